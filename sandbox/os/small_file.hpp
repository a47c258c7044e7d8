#pragma once
// Small files read whole (/proc and /sys entries, cgroup controls, config files) without
// iostreams: the jail helper is a static executable whose budget is 2 MB resident for two
// processes, and iostreams' locale machinery alone touches about a megabyte. One helper for
// every caller, on both sides of the jail.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace belljar {

// Up to `limit` bytes of the file (/proc files are generated on read: nothing is sized ahead);
// empty when it can't be opened.
std::string read_small_file(const std::string& path, size_t limit = 1u << 16);

// The whitespace-separated words of `text`, as views into it.
std::vector<std::string_view> words(std::string_view text);
// The lines of `text` (without their '\n'), as views into it.
std::vector<std::string_view> lines(std::string_view text);
// A whole unsigned decimal number, or nothing (no sign, no spaces, no overflow).
std::optional<uint64_t> parse_unsigned(std::string_view text);

}  // namespace belljar
