// The redactor masks only what the sandbox was given, and what a stream sends when never
// depends on whether the output matches part of a secret (else it is an oracle).
#include "kernel/output/redactor.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "kernel/output/output_stream.hpp"
#include "sandbox/jail_client/environment.hpp"
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

// What the reactor publishes for one stream, in real time: each piece arrives `gap` after the
// one before; between pieces the reactor sleeps until the stream's deadline and flushes it when
// due (reactor.cpp), a piece read is flushed at once when due (worker_link.cpp read_pipe), and
// the cell's end sends the rest.
std::vector<std::string> published(const Redactor& redactor, const std::vector<std::string>& pieces,
                                   std::chrono::milliseconds gap) {
  using Clock = StreamBuffer::Clock;
  OutputBudget budget;
  StreamBuffer stream;
  stream.set_hold_back(redactor.hold_back());
  std::vector<std::string> sent;
  auto flush = [&](bool final) {
    auto now = Clock::now();
    size_t cut = redactor.cut_after_secrets(stream.pending_text(), stream.ready(final, now));
    std::string text = redactor.redact(stream.take_prefix(cut, now));
    if (!text.empty()) sent.push_back(text);
  };
  auto arrives = Clock::now();
  for (const auto& piece : pieces) {
    while (Clock::now() < arrives) {
      std::this_thread::sleep_until(stream.pending() ? std::min(arrives, stream.deadline())
                                                     : arrives);
      if (stream.due(Clock::now())) flush(false);
    }
    stream.append(piece, budget);
    if (stream.due(Clock::now())) flush(false);
    arrives = Clock::now() + gap;
  }
  flush(true);
  return sent;
}

// `text` cut into `n` pieces of (nearly) equal size.
std::vector<std::string> split(const std::string& text, size_t n) {
  std::vector<std::string> pieces;
  for (size_t i = 0; i < n; ++i)
    pieces.push_back(
        text.substr(i * text.size() / n, (i + 1) * text.size() / n - i * text.size() / n));
  return pieces;
}

std::string joined(const std::vector<std::string>& chunks) {
  std::string all;
  for (const auto& chunk : chunks) all += chunk;
  return all;
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

TEST_CASE("a secret in 2, 3 or N separate writes is never published", "[redactor]") {
  const std::string secret = "sk-live-0123456789abcdef";
  Redactor redactor({secret});
  const std::string line = "token=" + secret + " ok\n";
  // 2 and 3 pieces; N: one write per byte. Writes 5 ms apart: inside the flush window.
  for (size_t n : {size_t(2), size_t(3), line.size()}) {
    // Every cut point of the line, for the two-piece case; evenly spread ones otherwise.
    std::vector<std::vector<std::string>> splits;
    if (n == 2)
      for (size_t cut = 1; cut < line.size(); ++cut)
        splits.push_back({line.substr(0, cut), line.substr(cut)});
    else
      splits.push_back(split(line, n));
    for (const auto& pieces : splits) {
      INFO("pieces: " << pieces.size() << ", first: \"" << pieces.front() << "\"");
      auto sent = published(redactor, pieces, std::chrono::milliseconds(n == 2 ? 0 : 5));
      for (const auto& chunk : sent) CHECK(chunk.find("sk-live") == std::string::npos);
      CHECK(joined(sent) == "token=[redacted] ok\n");
    }
  }
}

// KNOWN GAP, kept visible rather than weakened: a tail is held for kHoldDelay (500 ms) at most,
// so a secret whose pieces arrive further apart than that is published in two stream messages,
// each innocent on its own; a notebook joins consecutive stream outputs, and the secret is in
// the saved file. [!shouldfail] makes this test pass while the gap exists and fail (so the tag
// must go) once a fix closes it.
TEST_CASE("a secret written across the hold-back deadline is never published",
          "[redactor][!shouldfail]") {
  const std::string secret = "sk-live-0123456789abcdef";
  Redactor redactor({secret});
  const std::string line = "token=" + secret + " ok\n";
  auto gap = StreamBuffer::kHoldDelay + std::chrono::milliseconds(100);
  for (size_t n : {size_t(2), size_t(3)}) {
    auto sent = published(redactor, split(line, n), gap);
    INFO("pieces: " << n << ", published: " << sent.size() << " messages");
    for (const auto& chunk : sent) CHECK(chunk.find("sk-live") == std::string::npos);
    CHECK(joined(sent).find(secret) == std::string::npos);
  }
}

// The redactor and the sandbox share one rule for which variables are harmless
// (sandbox/jail_client/environment.hpp): this fails if they drift apart again.
TEST_CASE("the redactor treats the sandbox's harmless variables as the sandbox does",
          "[redactor][environment]") {
  const std::string value = "sk-looks-like-a-secret-0123";  // secret-looking by the redactor
  // Every name of the allowlist (a prefix entry stands for one name it admits), the names the
  // sandbox builds itself, and names that are neither.
  std::vector<std::string> names;
  for (const auto& entry : environment_allowlist())
    names.push_back(entry.ends_with('*') ? entry.substr(0, entry.size() - 1) + "ALL" : entry);
  for (const auto& name : sandbox_built_variables()) names.push_back(name);
  const std::vector<std::string> secret_names = {"API_TOKEN", "LANGUAGE_KEY", "XTERM", "PATHS"};
  names.insert(names.end(), secret_names.begin(), secret_names.end());

  // What the sandbox builds with no --pass-env: the host's value under every name.
  std::vector<std::string> host_entries;
  for (const auto& name : names) host_entries.push_back(name + "=" + value);
  std::vector<char*> host;
  for (auto& entry : host_entries) host.push_back(entry.data());
  host.push_back(nullptr);
  std::map<std::string, std::string> unasked;
  for (const auto& entry :
       sandbox_environment(Policy{}, {"/opt/py/bin"}, "/home/sandbox", host.data()))
    unasked[entry.substr(0, entry.find('='))] = entry.substr(entry.find('=') + 1);

  for (const auto& name : names) {
    INFO("variable " << name);
    bool built = std::find(sandbox_built_variables().begin(), sandbox_built_variables().end(),
                           name) != sandbox_built_variables().end();
    // The sandbox copies it unasked (or, for the names it builds, sets it itself): harmless.
    bool harmless = unasked.count(name) && (unasked[name] == value || built);
    CHECK(harmless == harmless_variable(name));
    Policy passed;
    passed.pass_env = {name};
    Policy set;
    set.set_env = {{name, value}};
    std::string shown = harmless ? value : Redactor::kMask;
    CHECK(Redactor::for_sandbox(passed, host.data()).redact(value) == shown);
    CHECK(Redactor::for_sandbox(set, nullptr).redact(value) == shown);
  }
  // Exactly the built names are set with nothing from the host, so none is missing above.
  std::set<std::string> built_only;
  for (const auto& entry : sandbox_environment(Policy{}, {}, "/home/sandbox", nullptr))
    built_only.insert(entry.substr(0, entry.find('=')));
  CHECK(built_only ==
        std::set<std::string>(sandbox_built_variables().begin(), sandbox_built_variables().end()));
  // PATH on purpose: a passed PATH that does not start with '/' is still not masked.
  std::string relative_path = "PATH=bin:.local/bin:/usr/bin";
  char* path_env[] = {relative_path.data(), nullptr};
  Policy pass_path;
  pass_path.pass_env = {"PATH"};
  CHECK(Redactor::for_sandbox(pass_path, path_env).empty());
}
