#pragma once
// Keeps the kernel's secrets out of notebooks: values of host environment variables that were
// stripped from the sandbox are replaced wherever they show up in output, so a key pasted into
// a cell doesn't land in the saved notebook.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace belljar {

class Redactor {
 public:
  static constexpr size_t kMinSecretLength = 8;
  static constexpr const char* kMask = "[redacted]";

  Redactor() = default;
  // Collects the values of `environ` variables the sandbox doesn't get. Paths and plain numbers
  // are not secrets (the workspace path is printed by os.getcwd() on purpose).
  static Redactor from_environment(char** environ, const std::vector<std::string>& passed);
  explicit Redactor(std::vector<std::string> secrets);

  bool empty() const { return secrets_.empty(); }
  // Bytes at the end of `text` that begin a secret: they wait for the next chunk, in case the
  // secret straddles the two.
  size_t partial_suffix(std::string_view text) const;
  std::string redact(std::string text) const;
  // Every string inside a JSON value (mime bundles, tracebacks), base64 images included as-is.
  void redact_json(nlohmann::json& value) const;

 private:
  std::vector<std::string> secrets_;  // longest first, so overlapping secrets mask fully
};

}  // namespace belljar
