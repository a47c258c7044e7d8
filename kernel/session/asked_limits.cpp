#include "kernel/session/asked_limits.hpp"

#include <cstdio>

#include "sandbox/policy/quantities.hpp"

namespace belljar {

std::variant<AskedLimits, std::string> decide_asked_limits(const nlohmann::json& frame,
                                                           const Policy& policy) {
  std::string refused;
  auto option = [&](const char* key, const char* flag) -> std::optional<std::string> {
    auto it = frame.find(key);
    if (it == frame.end() || !refused.empty()) return std::nullopt;
    // A number is read as its plain decimal text (bytes, seconds), through the same grammar.
    if (it->is_number()) return it->dump();
    if (!it->is_string()) {
      refused = std::string(flag) + ": expected the option's text, as written after it";
      return std::nullopt;
    }
    return it->get<std::string>();
  };
  auto parsed = [&](auto parse, const char* key, const char* flag) {
    std::optional<decltype(parse(std::string(), std::string()))> value;
    if (auto text = option(key, flag)) try {
        value = parse(flag, *text);
      } catch (const UsageError& e) {
        refused = e.what();  // names the option and the value: "--memory lots: expected a size ..."
      }
    return value;
  };
  auto duration = [](const std::string& flag, const std::string& text) {
    return parse_duration(flag, text);
  };
  auto size = [](const std::string& flag, const std::string& text) {
    return parse_size(flag, text);
  };
  auto timeout = parsed(duration, "timeout", "--timeout");
  auto cpu = parsed(duration, "cpu", "--cpu");
  auto output = parsed(size, "output_limit", "--output-limit");
  auto memory = parsed(size, "memory", "--memory");
  char text[160];
  if (refused.empty() && timeout && *timeout > policy.timeout_seconds) {
    std::snprintf(text, sizeof text,
                  "--timeout %g asks for more than this kernel's policy allows (%g s)", *timeout,
                  policy.timeout_seconds);
    refused = text;
  } else if (refused.empty() && cpu && *cpu > policy.cpu_limit()) {
    std::snprintf(text, sizeof text,
                  "--cpu %g asks for more than this kernel's policy allows (%g s)", *cpu,
                  policy.cpu_limit());
    refused = text;
  } else if (refused.empty() && output && *output > policy.output_limit_bytes) {
    refused = "--output-limit " + format_size(*output) +
              " asks for more than this kernel's policy allows (" +
              format_size(policy.output_limit_bytes) + ")";
  } else if (refused.empty() && memory && *memory > policy.memory_bytes) {
    refused = "--memory " + format_size(*memory) +
              " asks for more than this kernel's policy allows (" +
              format_size(policy.memory_bytes) + ")";
  }
  if (!refused.empty()) return refused;
  return AskedLimits{timeout, cpu, output, memory};
}

}  // namespace belljar
