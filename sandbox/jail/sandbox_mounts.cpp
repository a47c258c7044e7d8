#include "sandbox/jail/sandbox_mounts.hpp"

#include "sandbox/os/path_parts.hpp"
#include "sandbox/os/small_file.hpp"

namespace belljar {

namespace {

constexpr size_t kMaxMountinfo = 16u << 20;  // a longer text is taken as unreadable

// mountinfo's octal escapes (\040 for a space, \011, \012, \134) undone; nothing for a
// malformed one.
std::optional<std::string> unescaped(std::string_view field) {
  std::string text;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] != '\\') {
      text += field[i];
      continue;
    }
    if (i + 3 >= field.size()) return std::nullopt;
    int value = 0;
    for (size_t k = 1; k <= 3; ++k) {
      char digit = field[i + k];
      if (digit < '0' || digit > '7') return std::nullopt;
      value = value * 8 + (digit - '0');
    }
    text += static_cast<char>(value);
    i += 3;
  }
  return text;
}

std::string joined(const std::vector<std::string>& parts, size_t count) {
  std::string text;
  for (size_t i = 0; i < count; ++i) text += "/" + parts[i];
  return text;
}

}  // namespace

SandboxMounts::SandboxMounts(const std::vector<std::vector<std::string>>& points) {
  for (const auto& point : points)
    for (size_t count = 0; count <= point.size(); ++count) held_.insert(joined(point, count));
}

std::optional<std::vector<std::vector<std::string>>> SandboxMounts::parse(
    std::string_view mountinfo) {
  std::vector<std::vector<std::string>> points;
  for (std::string_view line : lines(mountinfo)) {
    if (line.empty()) continue;
    auto fields = words(line);
    if (fields.size() < 5 || fields[4].empty() || fields[4][0] != '/') return std::nullopt;
    auto point = unescaped(fields[4]);
    if (!point) return std::nullopt;
    points.push_back(path_components(*point));
  }
  return points;
}

bool SandboxMounts::read(pid_t pid, std::optional<uint64_t> stamp) {
  held_.clear();
  stamp_.reset();
  std::string text = read_small_file("/proc/" + std::to_string(pid) + "/mountinfo", kMaxMountinfo);
  if (text.empty() || text.size() >= kMaxMountinfo) return false;
  auto points = parse(text);
  if (!points) return false;
  *this = SandboxMounts(*points);
  stamp_ = stamp;
  return true;
}

bool SandboxMounts::at_or_above(const std::vector<std::string>& path) const {
  return held_.count(joined(path, path.size())) != 0;
}

}  // namespace belljar
