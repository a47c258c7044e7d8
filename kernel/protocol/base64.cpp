#include "kernel/protocol/base64.hpp"

#include <sodium.h>

namespace belljar {

std::string base64_encode(std::string_view bytes) {
  const int variant = sodium_base64_VARIANT_ORIGINAL;
  // sodium_base64_ENCODED_LEN counts the terminating NUL that bin2base64 writes.
  std::string text(sodium_base64_ENCODED_LEN(bytes.size(), variant), '\0');
  ::sodium_bin2base64(text.data(), text.size(),
                      reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), variant);
  text.pop_back();
  return text;
}

std::optional<std::string> base64_decode(std::string_view text) {
  // Canonical only: a whole number of padded quads, no stray characters, zero bits after the
  // last byte (libsodium's decoder refuses the rest when no end pointer is asked for).
  if (text.size() % 4 != 0) return std::nullopt;
  std::string bytes(text.size() / 4 * 3, '\0');
  size_t n = 0;
  if (::sodium_base642bin(reinterpret_cast<unsigned char*>(bytes.data()), bytes.size(), text.data(),
                          text.size(), nullptr, &n, nullptr, sodium_base64_VARIANT_ORIGINAL) != 0)
    return std::nullopt;
  bytes.resize(n);
  return bytes;
}

}  // namespace belljar
