#include "kernel/session/run_record.hpp"

namespace belljar {

using json = nlohmann::json;

namespace {
constexpr size_t kTailKeep = 64 * 1024;

std::string text_of(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

json bundle_of(const json& content) {
  auto data = content.find("data");
  return data != content.end() && data->is_object() ? *data : json::object();
}

std::string display_id_of(const json& content) {
  auto transient = content.find("transient");
  if (transient == content.end() || !transient->is_object()) return {};
  return text_of(*transient, "display_id");
}

// Rough size of a base64 payload once decoded.
size_t decoded_size(const std::string& base64) {
  size_t padding = 0;
  for (auto it = base64.rbegin(); it != base64.rend() && (*it == '=' || *it == '\n'); ++it)
    padding += *it == '=';
  size_t chars = 0;
  for (char c : base64) chars += c != '\n' && c != '\r';
  return chars / 4 * 3 - std::min(padding, chars / 4 * 3);
}
}  // namespace

bool is_binary_image(const std::string& mime) {
  return mime == "image/png" || mime == "image/jpeg" || mime == "image/gif" || mime == "image/webp";
}

bool is_image(const std::string& mime) {
  return is_binary_image(mime) || mime == "image/svg+xml";
}

std::string strip_ansi(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\x1b') {
      out += text[i];
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '[') {
      // CSI: parameters and intermediates, then one final byte in @..~
      size_t j = i + 2;
      while (j < text.size() && !(text[j] >= 0x40 && text[j] <= 0x7e)) ++j;
      i = j;
    } else if (i + 1 < text.size() && text[i + 1] == ']') {
      // OSC (hyperlinks): up to BEL or ESC backslash
      size_t j = i + 2;
      while (j < text.size() && text[j] != '\x07' &&
             !(text[j] == '\x1b' && j + 1 < text.size() && text[j + 1] == '\\'))
        ++j;
      i = j < text.size() && text[j] == '\x1b' ? j + 1 : j;
    } else {
      ++i;  // a two-byte escape
    }
  }
  return out;
}

std::string plain_traceback(const json& traceback) {
  std::string text;
  if (!traceback.is_array()) return text;
  for (auto& line : traceback) {
    if (!line.is_string()) continue;
    if (!text.empty() && text.back() != '\n') text += '\n';
    text += strip_ansi(line.get<std::string>());
  }
  return text;
}

void RunRecord::apply_pending_clear() {
  if (!clear_pending_) return;
  outputs_.clear();
  clear_pending_ = false;
}

void RunRecord::add(const std::string& msg_type, const json& content) {
  if (!content.is_object()) return;
  if (msg_type == "clear_output") {
    auto wait = content.find("wait");
    clear_pending_ = true;
    if (!(wait != content.end() && wait->is_boolean() && wait->get<bool>())) apply_pending_clear();
    return;
  }
  if (msg_type == "stream") {
    apply_pending_clear();
    std::string name = text_of(content, "name") == "stderr" ? "stderr" : "stdout";
    std::string text = text_of(content, "text");
    streamed_ += text;
    if (streamed_.size() > 2 * kTailKeep) streamed_.erase(0, streamed_.size() - kTailKeep);
    if (!outputs_.empty() && outputs_.back()["type"] == "stream" && outputs_.back()["name"] == name)
      outputs_.back()["text"] = outputs_.back()["text"].get<std::string>() + text;
    else
      outputs_.push_back({{"type", "stream"}, {"name", name}, {"text", text}});
  } else if (msg_type == "display_data" || msg_type == "execute_result") {
    apply_pending_clear();
    json output = {{"type", msg_type == "display_data" ? "display" : "result"},
                   {"data", bundle_of(content)}};
    if (std::string id = display_id_of(content); !id.empty()) output["display_id"] = id;
    outputs_.push_back(std::move(output));
  } else if (msg_type == "update_display_data") {
    std::string id = display_id_of(content);
    for (auto& output : outputs_)
      if (!id.empty() && output.value("display_id", "") == id) output["data"] = bundle_of(content);
  } else if (msg_type == "error") {
    apply_pending_clear();
    json error = {{"ename", text_of(content, "ename")},
                  {"evalue", text_of(content, "evalue")},
                  {"traceback", plain_traceback(content.value("traceback", json::array()))}};
    error_ = error;
    error["type"] = "error";
    outputs_.push_back(std::move(error));
  }
}

void RunRecord::finish(const json& reply_content, const json& reply_metadata) {
  status_ = reply_content.is_object() ? text_of(reply_content, "status") : "";
  if (status_.empty()) status_ = "error";
  if (reply_content.is_object()) {
    auto count = reply_content.find("execution_count");
    if (count != reply_content.end() && count->is_number_integer()) execution_count_ = *count;
    if (status_ == "error" && error_.is_null())
      error_ = {{"ename", text_of(reply_content, "ename")},
                {"evalue", text_of(reply_content, "evalue")},
                {"traceback", plain_traceback(reply_content.value("traceback", json::array()))}};
  }
  if (reply_metadata.is_object()) {
    auto facts = reply_metadata.find("belljar");
    if (facts != reply_metadata.end() && facts->is_object()) facts_ = *facts;
  }
}

void RunRecord::note_file(const std::string& mime, const std::string& path) {
  if (outputs_.empty()) return;
  outputs_.back()["files"][mime] = path;
}

json RunRecord::structured() const {
  json outputs = json::array();
  for (const auto& output : outputs_) {
    if (output["type"] != "display" && output["type"] != "result") {
      outputs.push_back(output);
      continue;
    }
    json data = json::object(), images = json::array();
    json files = output.value("files", json::object());
    for (auto& [mime, value] : output["data"].items()) {
      if (is_image(mime)) {
        json image = {
            {"mime_type", mime},
            {"bytes", !value.is_string()      ? 0
                      : is_binary_image(mime) ? decoded_size(value.get_ref<const std::string&>())
                                              : value.get_ref<const std::string&>().size()}};
        if (files.contains(mime)) image["file"] = files[mime];
        images.push_back(std::move(image));
      }
      if (!is_binary_image(mime)) data[mime] = value;
    }
    json entry = {{"type", output["type"]}, {"data", std::move(data)}};
    if (!images.empty()) entry["images"] = std::move(images);
    outputs.push_back(std::move(entry));
  }
  return {{"status", status_},
          {"execution_count", execution_count_},
          {"outputs", std::move(outputs)},
          {"error", status_ == "error" ? error_ : json(nullptr)},
          {"facts", facts_}};
}

std::string RunRecord::stream_tail(size_t max_bytes) const {
  if (streamed_.size() <= max_bytes) return streamed_;
  size_t start = streamed_.size() - max_bytes;
  while (start < streamed_.size() && (static_cast<unsigned char>(streamed_[start]) & 0xC0) == 0x80)
    ++start;
  return streamed_.substr(start);
}

}  // namespace belljar
