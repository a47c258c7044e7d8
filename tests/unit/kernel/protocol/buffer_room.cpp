// give_back_room: a drained long-lived buffer does not keep the room of its largest message.
#include "kernel/protocol/buffer_room.hpp"

#include <catch2/catch.hpp>
#include <string>

using belljar::give_back_room;
using belljar::kKeptRoom;

TEST_CASE("a drained buffer gives back room past the kept size", "[buffer_room]") {
  std::string buffer(8 * kKeptRoom, 'x');
  buffer.erase(0, buffer.size() - 10);  // ten bytes left, the room of 8 MiB kept
  REQUIRE(buffer.capacity() >= 8 * kKeptRoom);
  give_back_room(buffer);
  CHECK(buffer.capacity() <= kKeptRoom);
  CHECK(buffer == std::string(10, 'x'));
}

TEST_CASE("a buffer still full, or within the kept size, keeps its room", "[buffer_room]") {
  std::string full(2 * kKeptRoom, 'x');
  size_t room = full.capacity();
  give_back_room(full);
  CHECK(full.capacity() == room);

  std::string usual(kKeptRoom / 2, 'x');
  usual.clear();
  room = usual.capacity();
  give_back_room(usual);
  CHECK(usual.capacity() == room);  // the usual frame's room is reused, not reallocated
}
