#pragma once
// What one execution produced, in the shape the agent-facing front doors report it: MCP's
// run_python (structuredContent) and `belljar run --json` print the same object:
//   {status, execution_count, outputs: [...], error, facts}
// outputs, in order:
//   {"type": "stream", "name": "stdout"|"stderr", "text"}
//   {"type": "result"|"display", "data": {mime: value}, "images": [{mime_type, bytes, file?}]}
//   {"type": "error", "ename", "evalue", "traceback"}   (one text, without ANSI colours)
// Binary images (PNG, JPEG, GIF, WebP) are listed in "images" by size (and the file they
// were saved to, if any) but their base64 stays out of "data": a client gets them as MCP
// image content or as files, never as text in a model's context.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace belljar {

class RunRecord {
 public:
  // An IOPub message of the execution: stream, display_data, update_display_data,
  // execute_result, error, clear_output. Anything else is ignored.
  void add(const std::string& msg_type, const nlohmann::json& content);
  // The execute_reply: its status and execution_count, and the facts in metadata.belljar.
  void finish(const nlohmann::json& reply_content, const nlohmann::json& reply_metadata);

  const std::string& status() const { return status_; }
  // Every output with its full data (base64 images included), in the shape above.
  const std::vector<nlohmann::json>& outputs() const { return outputs_; }
  // Records that the last output's `mime` image was saved to `path`.
  void note_file(const std::string& mime, const std::string& path);
  nlohmann::json structured() const;
  // The last `max_bytes` of stdout and stderr so far (for progress messages).
  std::string stream_tail(size_t max_bytes) const;

 private:
  void apply_pending_clear();
  std::vector<nlohmann::json> outputs_;
  bool clear_pending_ = false;
  std::string status_ = "running";
  nlohmann::json execution_count_ = nullptr;
  nlohmann::json error_ = nullptr;
  nlohmann::json facts_ = nlohmann::json::object();
  std::string streamed_;  // stdout and stderr interleaved, capped, for stream_tail
};

// Image types whose bundle value is base64 (the rest, SVG included, are text).
bool is_binary_image(const std::string& mime);
bool is_image(const std::string& mime);
// Removes ANSI escape sequences (colours in tracebacks).
std::string strip_ansi(const std::string& text);
// A Jupyter traceback (list of lines, each maybe several) as one plain text.
std::string plain_traceback(const nlohmann::json& traceback);

}  // namespace belljar
