#pragma once
// The policy flags, each declared once: its name, the kind of value it takes, its default,
// what it means, its key in a --policy file and how it changes the Policy. Everything else is
// derived from this table: the command line's parsing (PolicyBuilder::take), the --policy
// file's keys and value shapes, `belljar --help`, kernel.json's argv and the README's flag
// table (a unit test compares the README with policy_flags_markdown()).
// The threat: a flag added in one place and not another, e.g. accepted on the command line but
// unknown to the policy file, or documented with a default it does not have.
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sandbox/policy/policy.hpp"

namespace belljar {

// What a flag's value is; decides how a --policy file may spell it.
enum class FlagValue {
  size,            // the SIZE grammar (quantities.hpp)
  duration,        // the DURATION grammar (quantities.hpp)
  count,           // a whole number
  directory,       // an existing directory, made absolute
  path,            // an existing file or directory, made absolute
  file,            // a file belljar writes, made absolute
  log_file,        // a file belljar appends to, made absolute, or `-`: stderr
  glob,            // a pattern matched inside the workspace
  host,            // HOST[:PORT]
  env_name,        // NAME
  env_assignment,  // NAME=VALUE; a policy file may give an object {NAME: VALUE}
  secret,          // NAME@HOST[:PORT]
  secret_file,     // NAME=PATH@HOST[:PORT], the path made absolute
  user,            // a user name or uid
  interpreter,     // a Python interpreter, resolved to an absolute path
  choice,          // one of a few words
  toggle,          // a switch: present is true; --flag=false, or true/false in a policy file
  policy_file,     // --policy itself: read before the other flags, never inside a policy file
};

struct PolicyFlag {
  std::string_view name;         // "--memory"
  std::string_view placeholder;  // "SIZE"; empty for a toggle
  FlagValue kind;
  bool repeatable = false;         // each use adds one; otherwise the last one wins
  std::string_view fallback;       // the default, as --help and the README show it
  std::string_view meaning;        // one line for --help and the README
  std::string_view file_key = {};  // the key in a --policy file (no dashes); empty: not there
  // Checks the value and sets it in the policy; UsageError "FLAG VALUE: why" when it is bad.
  void (*apply)(Policy& policy, const std::string& flag, const std::string& value) = nullptr;
  // A default resolved when kernel.json is written and baked into its argv, so the kernel runs
  // what install saw (the python on PATH then); null for the others.
  std::string Policy::*baked_when_absent = nullptr;

  std::string usage() const;  // "--memory SIZE", "--audit-code"
};

// Every policy flag, in the order --help and the README list them.
std::span<const PolicyFlag> policy_flags();
// The flag named NAME ("--memory"), or null.
const PolicyFlag* find_policy_flag(std::string_view name);
// The flag whose --policy file key is KEY ("allow-net" or "allow_net"), or null.
const PolicyFlag* find_policy_file_key(std::string key);

// The README's policy flag table, header included, one row per flag.
std::string policy_flags_markdown();

}  // namespace belljar
