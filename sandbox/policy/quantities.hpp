#pragma once
// Sizes and durations: the one grammar every limit is written in, on the command line, in a
// --policy file and on a %%limits line (the supervisor parses those with these functions), and
// the one way belljar prints a byte count back to a person.
//
// The grammar (README "Sizes and durations" states it for users):
//   NUMBER   plain decimal: 30, 1.5, .5 (no sign, exponent, hex, nan or inf)
//   SIZE     NUMBER then optionally a unit: K, M, G, T (any case; powers of 1024), each
//            optionally followed by B or iB, or B alone (bytes); one space may come before the
//            unit, so what format_size prints ("64.0 MiB") reads back
//   DURATION NUMBER then optionally a unit: ms, s, m, h (any case: 2M is two minutes);
//            no unit: seconds
// The threat: a value that means one thing in one place and another elsewhere (before this
// file, `%%limits --timeout 2M` meant two minutes while `--timeout 2M` was refused) and a
// lenient parser that reads "-1" or "1e999" as something huge. Anything else is refused with
// one message naming the flag and the value.
#include <cstdint>
#include <string>

namespace belljar {

// A size in bytes from 1 byte to 10^18; UsageError "FLAG TEXT: ..." otherwise.
uint64_t parse_size(const std::string& flag, const std::string& text);  // 512M, 1G, 4096
// The same grammar with another lower bound (0 where 0 means "no limit").
uint64_t parse_size(const std::string& flag, const std::string& text, uint64_t minimum);
// Seconds, from 10 ms to 7 days; UsageError "FLAG TEXT: ..." otherwise.
double parse_duration(const std::string& flag, const std::string& text);  // 30, 1.5s, 2m, 1h

// "12 bytes", "1.5 KiB", "64.0 MiB", "1.0 GiB", "2.0 TiB": one decimal, powers of 1024.
// parse_size reads it back exactly when the count is a multiple of a tenth of its unit.
std::string format_size(uint64_t bytes);

}  // namespace belljar
