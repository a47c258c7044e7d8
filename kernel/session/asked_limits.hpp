#pragma once
// What `%%limits` asks of one cell, decided against the kernel's policy: a part of the cell
// limits (cell_limits.cpp) with one job, tested alone (tests/unit/kernel/session/
// asked_limits.cpp). The worker only passes the options' text on; it is parsed here with the
// command line's own grammar (sandbox/policy/quantities.hpp) and granted only when it is
// tighter than the policy, so a forged frame can lower a cell's limits, never raise them.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>

#include "sandbox/policy/policy.hpp"

namespace belljar {

struct AskedLimits {
  std::optional<double> timeout, cpu;      // seconds
  std::optional<uint64_t> output, memory;  // bytes
};

// The limits a `limits` frame asks for, or why they are refused: the option and its value
// named ("--memory lots: expected a size ...", "--timeout 90 asks for more than ...").
std::variant<AskedLimits, std::string> decide_asked_limits(const nlohmann::json& frame,
                                                           const Policy& policy);

}  // namespace belljar
