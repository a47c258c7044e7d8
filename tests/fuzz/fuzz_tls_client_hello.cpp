// libFuzzer target: scan_client_hello on arbitrary bytes from an (untrusted) sandboxed client.
//
// Input: the bytes as the client sent them. The verdict on the whole must be one every shorter
// prefix leads to: a prefix is either still incomplete or already has the same verdict (bytes
// that arrive later never change what was decided), and a complete ClientHello's name is
// non-empty. The scanner must never read past what it was given (ASan) nor past its bound.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sandbox/egress/tls_client_hello.hpp"

using namespace belljar;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  constexpr size_t kMax = 4096;  // small, so the fuzzer reaches the bound
  ClientHelloScan whole = scan_client_hello(bytes, kMax);
  if (whole.status == ClientHelloScan::Status::complete && whole.server_name)
    check(!whole.server_name->empty());
  if (whole.status == ClientHelloScan::Status::malformed) check(!whole.error.empty());
  // Prefixes at a few cut points (every one would make the fuzzer quadratic).
  for (size_t cut : {size / 2, size / 3, size > 0 ? size - 1 : 0}) {
    ClientHelloScan part = scan_client_hello(bytes.substr(0, cut), kMax);
    if (part.status == ClientHelloScan::Status::incomplete) continue;
    check(part.status == whole.status);
    check(part.server_name == whole.server_name);
  }
  return 0;
}
