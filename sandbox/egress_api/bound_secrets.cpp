#include "sandbox/egress_api/bound_secrets.hpp"

#include <string.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace belljar {

namespace {

std::string random_hex(size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  // The kernel's CSPRNG; a short read of 16 bytes does not happen once it is seeded.
  if (::getrandom(raw.data(), raw.size(), 0) != static_cast<ssize_t>(raw.size()))
    throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno) +
                             ": no randomness for a secret's placeholder");
  static const char* digits = "0123456789abcdef";
  std::string text;
  for (unsigned char b : raw) {
    text += digits[b >> 4];
    text += digits[b & 15];
  }
  return text;
}

std::string read_value(const SecretBinding& binding, const char* const* environment) {
  if (binding.file.empty()) {
    const std::string prefix = binding.name + "=";
    for (const char* const* entry = environment; entry && *entry; ++entry)
      if (std::strncmp(*entry, prefix.c_str(), prefix.size()) == 0)
        return std::string(*entry + prefix.size());
    throw UsageError(binding.flag_text() + ": " + binding.name +
                     " is not set in the kernel's environment");
  }
  std::ifstream in(binding.file, std::ios::binary);
  if (!in)
    throw UsageError(binding.flag_text() + ": cannot read " + binding.file + ": " +
                     std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  std::string value = text.str();
  if (value.size() > 64 * 1024)
    throw UsageError(binding.flag_text() + ": " + binding.file + " is larger than 64 KiB");
  // One trailing newline is the file's, not the value's (echo KEY > file).
  if (!value.empty() && value.back() == '\n') value.pop_back();
  if (!value.empty() && value.back() == '\r') value.pop_back();
  return value;
}

void check_value(const SecretBinding& binding, const std::string& value) {
  if (value.size() < 8)
    throw UsageError(binding.flag_text() + ": the value is " +
                     (value.empty() ? std::string("empty") : "shorter than 8 bytes") +
                     "; too short to find again in a response");
  for (unsigned char c : value)
    if (c < 0x20 || c == 0x7f)
      throw UsageError(binding.flag_text() +
                       ": the value holds a control character (a newline?); it is put into "
                       "header lines, which it could end");
}

}  // namespace

std::shared_ptr<const BoundSecrets> BoundSecrets::load(const std::vector<SecretBinding>& bindings,
                                                       const char* const* environment) {
  std::shared_ptr<BoundSecrets> secrets(new BoundSecrets());
  for (const auto& binding : bindings) {
    auto same = std::find_if(secrets->secrets_.begin(), secrets->secrets_.end(),
                             [&](const BoundSecret& s) { return s.name == binding.name; });
    if (same != secrets->secrets_.end()) {
      same->hosts.push_back(binding.host);
      continue;
    }
    std::string value = read_value(binding, environment);
    check_value(binding, value);
    secrets->secrets_.push_back({binding.name,
                                 std::move(value),
                                 "belljar-secret-" + binding.name + "-" + random_hex(16),
                                 {binding.host}});
  }
  return secrets;
}

BoundSecrets::~BoundSecrets() {
  for (auto& secret : secrets_)
    if (!secret.value.empty()) ::explicit_bzero(secret.value.data(), secret.value.size());
}

std::vector<const BoundSecret*> BoundSecrets::bound_to(const RequestHost& host,
                                                       uint16_t port) const {
  std::vector<const BoundSecret*> bound;
  for (const auto& secret : secrets_)
    if (match_host(secret.hosts, host, port).kind == HostVerdict::Kind::allowed)
      bound.push_back(&secret);
  return bound;
}

std::vector<std::pair<std::string, std::string>> BoundSecrets::placeholders() const {
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& secret : secrets_) entries.emplace_back(secret.name, secret.placeholder);
  return entries;
}

std::vector<std::string> BoundSecrets::values() const {
  std::vector<std::string> values;
  for (const auto& secret : secrets_) values.push_back(secret.value);
  return values;
}

}  // namespace belljar
