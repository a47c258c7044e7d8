// Sizes and durations: one grammar for the command line, --policy files and %%limits, and the
// one size formatter whose output the grammar reads back.
#include "sandbox/policy/quantities.hpp"

#include <catch2/catch.hpp>

#include "sandbox/policy/policy.hpp"
#include "usage_error.hpp"

using namespace belljar;
using belljar::testing::usage_error;

TEST_CASE("duration units are case-insensitive, as %%limits took them", "[policy][duration]") {
  // Before: `%%limits --timeout 2M` meant two minutes while `--timeout 2M` was refused.
  CHECK(parse_duration("--timeout", "2M") == Approx(120));
  CHECK(parse_duration("--timeout", "2m") == Approx(120));
  CHECK(parse_duration("--timeout", "1H") == Approx(3600));
  CHECK(parse_duration("--timeout", "1.5S") == Approx(1.5));
  CHECK(parse_duration("--timeout", "500MS") == Approx(0.5));
  CHECK(parse_duration("--timeout", "500Ms") == Approx(0.5));
  CHECK(parse_duration("--timeout", ".5") == Approx(0.5));
  CHECK(parse_duration("--timeout", "5.") == Approx(5));
}

TEST_CASE("size units: K/M/G/T in any case, with B or iB, or B alone", "[policy][size]") {
  CHECK(parse_size("--memory", "1kib") == 1024);
  CHECK(parse_size("--memory", "1KIB") == 1024);
  CHECK(parse_size("--memory", "1Kb") == 1024);
  CHECK(parse_size("--memory", "3gB") == 3ull << 30);
  CHECK(parse_size("--memory", "4096B") == 4096);
  CHECK(parse_size("--memory", "4096b") == 4096);
  CHECK(parse_size("--memory", ".5K") == 512);
  CHECK(parse_size("--memory", "64 M") == 64ull << 20);
  CHECK(parse_size("--memory", "64.0 MiB") == 64ull << 20);
}

TEST_CASE("the number is a plain decimal: no exponent, padding or stray space",
          "[policy][size][duration]") {
  for (const char* bad : {"1e3", "1E3M", "0x10", " 5", "5 ", "5M ", "5  M", "5 ", "1 B B", ".",
                          "..5", "5..", "1,5G", "5\tM", "١٢"}) {
    INFO("value: " << bad);
    CHECK_THAT(usage_error([&] { parse_size("--memory", bad); }),
               Catch::StartsWith(std::string("--memory ") + bad + ":"));
  }
  for (const char* bad : {"1e3", "1E1s", " 5", "5 ", "5 m", ".", "2 M", "1mss", "1sm"}) {
    INFO("value: " << bad);
    CHECK_THAT(usage_error([&] { parse_duration("--timeout", bad); }),
               Catch::StartsWith(std::string("--timeout ") + bad + ":"));
  }
}

TEST_CASE("a size may be 0 only where the caller says so", "[policy][size]") {
  CHECK(parse_size("--workspace-quota", "0", 0) == 0);
  CHECK(parse_size("--workspace-quota", "0K", 0) == 0);
  CHECK(parse_size("--workspace-quota", "64M", 0) == 64ull << 20);
  CHECK_THAT(usage_error([] { parse_size("--memory", "0"); }), Catch::Contains("out of range"));
  CHECK_THAT(usage_error([] { parse_size("--memory", "0.5"); }), Catch::Contains("out of range"));
  CHECK_THAT(usage_error([] { parse_size("--workspace-quota", "-0", 0); }),
             Catch::StartsWith("--workspace-quota -0:"));
}

TEST_CASE("sizes are printed with one decimal in powers of 1024", "[policy][size][format]") {
  CHECK(format_size(0) == "0 bytes");
  CHECK(format_size(12) == "12 bytes");
  CHECK(format_size(1023) == "1023 bytes");
  CHECK(format_size(1024) == "1.0 KiB");
  CHECK(format_size(1536) == "1.5 KiB");
  CHECK(format_size(64ull << 20) == "64.0 MiB");
  CHECK(format_size(1ull << 30) == "1.0 GiB");
  CHECK(format_size((1ull << 30) - 1) == "1024.0 MiB");
  CHECK(format_size(2ull << 40) == "2.0 TiB");
  CHECK(format_size(5000ull << 40) == "5000.0 TiB");
}

TEST_CASE("what format_size prints, parse_size reads back", "[policy][size][format]") {
  for (uint64_t unit : {1ull << 10, 1ull << 20, 1ull << 30, 1ull << 40}) {
    for (uint64_t count : {1ull, 2ull, 3ull, 10ull, 64ull, 100ull, 512ull, 1000ull, 1023ull}) {
      uint64_t bytes = count * unit;
      INFO(bytes << " printed as " << format_size(bytes));
      CHECK(parse_size("--memory", format_size(bytes)) == bytes);
      // A tenth of the unit survives the one decimal too: 1.5 GiB, 0.5 MiB printed as KiB.
      uint64_t and_a_half = bytes + unit / 2;
      INFO(and_a_half << " printed as " << format_size(and_a_half));
      CHECK(parse_size("--memory", format_size(and_a_half)) == and_a_half);
    }
  }
}
