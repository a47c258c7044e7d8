#pragma once
// The byte buffers that live as long as a session (frames from and to the worker, MCP's input
// and output lines) grow to fit the largest message that ever passed through them, and a
// std::string never gives that room back: one 50 MB display or write_file call left the
// supervisor 50 MB larger for the rest of the session. Where such a buffer has been drained,
// give_back_room returns room past kKeptRoom to the allocator, so what the supervisor holds
// between messages stays bounded whatever passed before.
#include <cstddef>
#include <string>

namespace belljar {

// Room a drained buffer may keep: far above the usual frame and line, so shrinking is rare.
inline constexpr size_t kKeptRoom = 1u << 20;

// Gives back the room of `buffer` beyond its content once it holds over kKeptRoom and is
// mostly empty (a quarter at most: a buffer still filling up keeps its room).
inline void give_back_room(std::string& buffer) {
  if (buffer.capacity() > kKeptRoom && buffer.size() <= kKeptRoom / 4) buffer.shrink_to_fit();
}

}  // namespace belljar
