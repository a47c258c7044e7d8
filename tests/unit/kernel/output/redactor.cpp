// The redactor masks only what the sandbox was given, and what a stream sends when never
// depends on whether the output matches part of a secret (else it is an oracle).
#include <catch2/catch.hpp>

#include "kernel/output/output_stream.hpp"
#include "kernel/output/redactor.hpp"
#include "sandbox/policy/policy.hpp"

using namespace belljar;

namespace {
// Every chunk a stream sends for `pieces`, flushed as the reactor would between appends.
std::vector<std::string> chunks_for(const Redactor& redactor,
                                    const std::vector<std::string>& pieces) {
  OutputBudget budget;
  StreamBuffer stream;
  stream.set_hold_back(redactor.hold_back());
  std::vector<std::string> sent;
  auto now = StreamBuffer::Clock::now();
  for (const auto& piece : pieces) {
    stream.append(piece, budget);
    now += std::chrono::milliseconds(30);  // past the flush window, inside the hold window
    size_t cut = redactor.cut_after_secrets(stream.pending_text(), stream.ready(false, now));
    std::string text = stream.take_prefix(cut, now);
    if (!text.empty()) sent.push_back(redactor.redact(text));
  }
  std::string rest = stream.take(true, now);
  if (!rest.empty()) sent.push_back(redactor.redact(rest));
  return sent;
}
}  // namespace

TEST_CASE("only values the sandbox was given are redacted", "[redactor]") {
  std::string passed = "PASSED_TOKEN=sk-passed-0123456789",
              kernel_only = "KERNEL_TOKEN=sk-kernel-0123456789";
  std::string path = "PASSED_PATH=/home/someone/project", number = "PASSED_NUMBER=1234567890";
  char* environ[] = {passed.data(), kernel_only.data(), path.data(), number.data(), nullptr};
  Policy policy;
  policy.pass_env = {"PASSED_TOKEN", "PASSED_PATH", "PASSED_NUMBER", "UNSET_NAME"};
  policy.set_env = {{"SET_TOKEN", "set-value-abcdefgh"}, {"SHORT", "abc"}};
  Redactor redactor = Redactor::for_sandbox(policy, environ);
  CHECK(redactor.redact("a sk-passed-0123456789 b") == "a [redacted] b");
  CHECK(redactor.redact("set-value-abcdefgh") == "[redacted]");
  // Never in the sandbox: matching it would only tell a cell whether its guess was right.
  CHECK(redactor.redact("sk-kernel-0123456789") == "sk-kernel-0123456789");
  CHECK(redactor.redact("/home/someone/project 1234567890 abc") ==
        "/home/someone/project 1234567890 abc");
}

TEST_CASE("a secret split across output chunks is still redacted", "[redactor]") {
  Redactor redactor({"sk-split-secret-42"});
  auto sent = chunks_for(redactor, {"key: sk-sp", "lit-sec", "ret-42 done\n"});
  std::string all;
  for (const auto& chunk : sent) all += chunk;
  CHECK(all == "key: [redacted] done\n");
}

TEST_CASE("a whole secret across the hold-back cut is sent redacted, not split", "[redactor]") {
  Redactor redactor({"sk-observability-0123456789"});
  auto sent = chunks_for(redactor, {"key is sk-observability-0123456789\n", "more\n"});
  for (const auto& chunk : sent) CHECK(chunk.find("sk-") == std::string::npos);
  std::string all;
  for (const auto& chunk : sent) all += chunk;
  CHECK(all == "key is [redacted]\nmore\n");
}

TEST_CASE("chunk boundaries do not depend on whether output matches a secret", "[redactor]") {
  Redactor redactor({"sk-oracle-secret-42"});
  // A prefix of the secret, and a same-length guess that matches nothing.
  auto matching = chunks_for(redactor, {"xxxxxxxxxxxxxxxxxxxxxxxxsk-orac", "e", "e", "e"});
  auto other = chunks_for(redactor, {"xxxxxxxxxxxxxxxxxxxxxxxxzz-zzzz", "e", "e", "e"});
  REQUIRE(matching.size() == other.size());
  for (size_t i = 0; i < matching.size(); ++i) CHECK(matching[i].size() == other[i].size());
}

TEST_CASE("a held tail is sent after the hold window even without more output", "[redactor]") {
  OutputBudget budget;
  StreamBuffer stream;
  stream.set_hold_back(10);
  auto start = StreamBuffer::Clock::now();
  stream.append("progress 50%", budget);
  CHECK(stream.take(false, start + std::chrono::milliseconds(30)) == "pr");
  CHECK(stream.deadline() >= start + StreamBuffer::kHoldDelay);
  CHECK(stream.take(false, start + std::chrono::milliseconds(100)).empty());
  CHECK(stream.take(false, start + std::chrono::milliseconds(30) + StreamBuffer::kHoldDelay) ==
        "ogress 50%");
}
