#include "kernel/redactor.hpp"

#include <algorithm>
#include <cctype>

namespace belljar {

namespace {
bool sandbox_gets(const std::string& name, const std::vector<std::string>& passed) {
  static const char* kAllowed[] = {"PATH", "LANG", "TZ", "TERM"};
  for (const char* allowed : kAllowed)
    if (name == allowed) return true;
  if (name.rfind("LC_", 0) == 0) return true;
  return std::find(passed.begin(), passed.end(), name) != passed.end();
}

bool looks_secret(const std::string& value) {
  if (value.size() < Redactor::kMinSecretLength || value[0] == '/') return false;
  bool all_digits = std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isdigit(c); });
  return !all_digits;
}
}  // namespace

Redactor::Redactor(std::vector<std::string> secrets) : secrets_(std::move(secrets)) {
  std::sort(secrets_.begin(), secrets_.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  secrets_.erase(std::unique(secrets_.begin(), secrets_.end()), secrets_.end());
}

Redactor Redactor::from_environment(char** environ, const std::vector<std::string>& passed) {
  std::vector<std::string> secrets;
  for (char** entry = environ; entry && *entry; ++entry) {
    std::string pair = *entry;
    auto eq = pair.find('=');
    if (eq == std::string::npos) continue;
    std::string name = pair.substr(0, eq), value = pair.substr(eq + 1);
    if (!sandbox_gets(name, passed) && looks_secret(value)) secrets.push_back(value);
  }
  return Redactor(std::move(secrets));
}

size_t Redactor::partial_suffix(std::string_view text) const {
  size_t longest = 0;
  for (const auto& secret : secrets_) {
    for (size_t k = std::min(secret.size() - 1, text.size()); k > longest; --k) {
      if (text.substr(text.size() - k) == std::string_view(secret).substr(0, k)) {
        longest = k;
        break;
      }
    }
  }
  return longest;
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
