#pragma once
// Base64 (standard alphabet, padded) for the binary buffers of comm messages, which cross the
// worker's JSON frames as text (worker/PROTOCOL.md). Decoding is strict: anything that is not
// canonical base64 is refused, never half-decoded. libsodium does the work (signer.hpp).
#include <optional>
#include <string>
#include <string_view>

namespace belljar {

std::string base64_encode(std::string_view bytes);
// nullopt when `text` is not base64 (a wrong length, a character outside the alphabet,
// misplaced padding).
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace belljar
