#include "sandbox/policy/quantities.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "sandbox/policy/policy.hpp"

namespace belljar {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// "1.5G" -> {1.5, "G"}: the NUMBER of the grammar and what follows it. Hand-read rather than
// strtod, which would also take "1e3", "0x10", " 5", "nan" and "infinity".
std::pair<double, std::string> split_number(const std::string& text, const std::string& bad) {
  size_t end = 0;
  size_t digits = 0;
  while (end < text.size() && is_digit(text[end])) ++end, ++digits;
  if (end < text.size() && text[end] == '.') {
    ++end;
    while (end < text.size() && is_digit(text[end])) ++end, ++digits;
  }
  if (digits == 0) throw UsageError(bad);
  double number = std::strtod(text.substr(0, end).c_str(), nullptr);
  if (!std::isfinite(number)) throw UsageError(bad);
  return {number, text.substr(end)};
}

std::string lower(std::string text) {
  for (auto& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// K, M, G, T as powers of 1024, with an optional B or iB; "B" alone; nothing: bytes.
bool size_scale(std::string unit, double& scale) {
  unit = lower(unit);
  if (unit.empty() || unit == "b") return scale = 1, true;
  if (unit.size() == 3 && unit.compare(1, 2, "ib") == 0)
    unit.resize(1);
  else if (unit.size() == 2 && unit[1] == 'b')
    unit.resize(1);
  if (unit.size() != 1) return false;
  static constexpr std::string_view kPrefixes = "kmgt";
  auto power = kPrefixes.find(unit[0]);
  if (power == std::string_view::npos) return false;
  scale = std::ldexp(1.0, 10 * static_cast<int>(power + 1));
  return true;
}

}  // namespace

uint64_t parse_size(const std::string& flag, const std::string& text, uint64_t minimum) {
  const std::string bad = flag + " " + text + ": expected a size like 512M or 1G";
  auto [number, unit] = split_number(text, bad);
  // One space before a unit, as format_size writes it; never a space and nothing after it.
  if (!unit.empty() && unit[0] == ' ') {
    unit.erase(0, 1);
    if (unit.empty() || unit[0] == ' ') throw UsageError(bad);
  }
  double scale = 1;
  if (!size_scale(unit, scale)) throw UsageError(bad);
  double bytes = number * scale;
  if (bytes < static_cast<double>(minimum) || bytes > 1.0e18 || (minimum > 0 && bytes < 1))
    throw UsageError(flag + " " + text + ": out of range");
  return static_cast<uint64_t>(bytes);
}

uint64_t parse_size(const std::string& flag, const std::string& text) {
  return parse_size(flag, text, 1);
}

double parse_duration(const std::string& flag, const std::string& text) {
  const std::string bad = flag + " " + text + ": expected seconds like 30, 1.5s, 2m or 1h";
  auto [number, unit] = split_number(text, bad);
  unit = lower(unit);
  double scale = 0;
  if (unit.empty() || unit == "s")
    scale = 1;
  else if (unit == "ms")
    scale = 0.001;
  else if (unit == "m")
    scale = 60;
  else if (unit == "h")
    scale = 3600;
  else
    throw UsageError(bad);
  double seconds = number * scale;
  if (seconds < 0.01 || seconds > 7 * 24 * 3600.0)
    throw UsageError(flag + " " + text + ": out of range (10ms to 7 days)");
  return seconds;
}

std::string format_size(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  char text[48];
  int unit = -1;
  double value = static_cast<double>(bytes);
  while (unit < 3 && value >= 1024) value /= 1024, ++unit;
  if (unit < 0)
    std::snprintf(text, sizeof text, "%llu bytes", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
  return text;
}

}  // namespace belljar
