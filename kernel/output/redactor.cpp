#include "kernel/output/redactor.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "sandbox/jail_client/environment.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

namespace {
bool looks_secret(const std::string& value) {
  if (value.size() < Redactor::kMinSecretLength || value[0] == '/') return false;
  bool all_digits =
      std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isdigit(c); });
  return !all_digits;
}

const char* lookup(char** environ, const std::string& name) {
  for (char** entry = environ; entry && *entry; ++entry)
    if (std::string_view(*entry).substr(0, name.size()) == name && (*entry)[name.size()] == '=')
      return *entry + name.size() + 1;
  return nullptr;
}
}  // namespace

Redactor::Redactor(std::vector<std::string> secrets) : secrets_(std::move(secrets)) {
  std::erase_if(secrets_, [](const std::string& s) { return s.empty(); });
  std::sort(secrets_.begin(), secrets_.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  secrets_.erase(std::unique(secrets_.begin(), secrets_.end()), secrets_.end());
}

Redactor Redactor::for_sandbox(const Policy& policy, char** environ,
                               std::vector<std::string> bound_values) {
  // Which names are harmless is the sandbox's own rule (sandbox/jail_client/environment.hpp), not a
  // second list here: a variable the sandbox hands over unasked, or builds itself, is no secret.
  std::vector<std::string> secrets;
  for (const auto& name : policy.pass_env)
    if (const char* value = lookup(environ, name);
        value && !harmless_variable(name) && looks_secret(value))
      secrets.push_back(value);
  for (const auto& [name, value] : policy.set_env)
    if (!harmless_variable(name) && looks_secret(value)) secrets.push_back(value);
  // The values of bound secrets (--secret) never enter the sandbox, yet a cell could still get
  // one printed (an upstream that leaks it in a way the proxy cannot see). Only whole values
  // are masked, so this tells a guesser nothing short of the whole value.
  for (auto& value : bound_values) secrets.push_back(std::move(value));
  return Redactor(std::move(secrets));
}

size_t Redactor::cut_after_secrets(std::string_view text, size_t cut) const {
  size_t moved = cut;
  for (const auto& secret : secrets_) {
    size_t from = cut >= secret.size() ? cut - secret.size() + 1 : 0;
    for (size_t at = from; at < cut && at + secret.size() <= text.size(); ++at)
      if (text.compare(at, secret.size(), secret) == 0) moved = std::max(moved, at + secret.size());
  }
  return moved;
}

std::string Redactor::redact(std::string text) const {
  for (const auto& secret : secrets_) {
    size_t at = 0;
    while ((at = text.find(secret, at)) != std::string::npos) {
      text.replace(at, secret.size(), kMask);
      at += std::char_traits<char>::length(kMask);
    }
  }
  return text;
}

void Redactor::redact_json(nlohmann::json& value) const {
  if (secrets_.empty()) return;
  if (value.is_string()) {
    value = redact(value.get<std::string>());
  } else if (value.is_array() || value.is_object()) {
    for (auto& item : value) redact_json(item);
  }
}

}  // namespace belljar
