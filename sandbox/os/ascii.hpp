#pragma once
// ASCII case for protocol text (HTTP field names, tokens, hosts): never the locale's, whose
// rules could fold a non-ASCII byte onto an ASCII letter.
#include <string>
#include <string_view>

namespace belljar {

inline std::string ascii_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace belljar
