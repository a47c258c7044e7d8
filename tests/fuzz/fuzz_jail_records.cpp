// libFuzzer target: what the jail's processes read from one another (sandbox/jail_protocol/).
// The reports of init come from inside the sandbox, and a record is read field by field with
// lengths from the bytes themselves, so: arbitrary bytes are either refused with RecordError
// (never anything else, never a crash or a read past the end) or read into a report, a spec or
// a request that, written again and read back, is written again to the very same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "sandbox/jail_protocol/jail_reports.hpp"
#include "sandbox/jail_protocol/jail_spec.hpp"

using namespace belljar;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// encode(decode(x)) is a fixed point: what the reader keeps, the writer says the same way.
template <typename Decode, typename Encode>
void stable(std::string_view bytes, Decode decode, Encode encode) {
  try {
    auto first = encode(decode(bytes));
    check(encode(decode(first)) == first);
  } catch (const RecordError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  stable(bytes, decode_report, [](const JailReport& r) { return encode(r); });
  stable(bytes, JailSpec::decode, [](const JailSpec& s) { return s.encode(); });
  stable(bytes, SurveyRequest::decode, [](const SurveyRequest& r) { return r.encode(); });
  return 0;
}
