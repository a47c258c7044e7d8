#pragma once
// Keeps secrets the sandbox was given out of notebooks: values of variables passed in with
// --pass-env or --set-env that look like secrets are replaced wherever they show up in output,
// so an API key printed by a cell doesn't land in the saved notebook.
//
// Only values the sandbox had are matched. A value it never had cannot appear in its output;
// matching it anyway turns the redactor into an oracle (a cell prints guesses and watches what
// gets held back or masked, one character at a time). For the same reason nothing observable
// depends on whether output matches part of a secret: stream output always keeps back the same
// number of bytes (the longest secret's length less one), match or no match.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace belljar {

struct Policy;

class Redactor {
 public:
  static constexpr size_t kMinSecretLength = 8;
  static constexpr const char* kMask = "[redacted]";

  Redactor() = default;
  // The secret-looking values the sandbox's environment gets from this policy: --pass-env
  // variables (read from `environ`) and --set-env values. Paths and plain numbers are not
  // secrets (the workspace path is printed by os.getcwd() on purpose), nor are the variables
  // the sandbox itself deems harmless (harmless_variable: the allowlist, PATH, HOME, ...).
  // `bound_values`: the real values of bound secrets (--secret), masked as well.
  static Redactor for_sandbox(const Policy& policy, char** environ,
                              std::vector<std::string> bound_values = {});
  explicit Redactor(std::vector<std::string> secrets);

  bool empty() const { return secrets_.empty(); }
  // Bytes a stream keeps back between flushes so a secret straddling two chunks is still
  // caught. The same for every text: it depends on the secrets' lengths only.
  size_t hold_back() const { return secrets_.empty() ? 0 : secrets_.front().size() - 1; }
  // A cut of `text` at `cut`, moved past any whole secret that straddles it, so the secret is
  // redacted in the part sent. (A secret that is not whole in `text` starts inside the held
  // tail, at or after the cut: hold_back() makes sure of that.)
  size_t cut_after_secrets(std::string_view text, size_t cut) const;
  std::string redact(std::string text) const;
  // Every string inside a JSON value (mime bundles, tracebacks), base64 images included as-is.
  void redact_json(nlohmann::json& value) const;

 private:
  std::vector<std::string> secrets_;  // longest first, so overlapping secrets mask fully
};

}  // namespace belljar
