#pragma once
// Token counts in what a model API sends back, for the cost of each request to a bound host:
// a JSON body with an OpenAI-style (`usage.prompt_tokens` / `completion_tokens`) or
// Anthropic-style (`usage.input_tokens` / `output_tokens`) usage object, or a server-sent event
// stream whose events carry one (OpenAI's final chunk with stream_options.include_usage,
// Anthropic's message_start and message_delta). The latest count of each kind wins: streams
// report running totals. A body is never trusted and never held whole: a JSON body keeps its
// first and last 64 KiB (a usage object sits at one end), a stream one line; what does not
// parse is not counted. So a connection costs the supervisor at most that, however large the
// response (256 connections to a bound host could otherwise hold gigabytes).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace belljar {

struct TokenUsage {
  std::optional<uint64_t> input, output;
  bool any() const { return input || output; }
};

class UsageReader {
 public:
  // From the response's Content-Type: JSON and event streams are read, anything else is not.
  explicit UsageReader(std::string_view content_type);
  void feed(std::string_view body);
  TokenUsage finish();

 private:
  enum class Kind { none, json, events };
  void read_event_line(std::string_view line);
  Kind kind_ = Kind::none;
  std::string text_;         // the JSON body's first bytes, or the event line being read
  std::string tail_;         // a JSON body's last bytes, once it outgrows text_
  bool overflowed_ = false;  // an event line past its cap: skipped
  TokenUsage usage_;
};

}  // namespace belljar
