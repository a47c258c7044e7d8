#include "kernel/run/run_frontend.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "kernel/observability/diagnostics.hpp"
#include "kernel/protocol/base64.hpp"
#include "kernel/protocol/bounded_json.hpp"
#include "kernel/session/kernel.hpp"

namespace belljar {

using json = nlohmann::json;

namespace {
// Preferred first: one file per display, the best type it offers.
const char* const kSavedImages[][2] = {{"image/png", "png"},
                                       {"image/jpeg", "jpg"},
                                       {"image/gif", "gif"},
                                       {"image/webp", "webp"},
                                       {"image/svg+xml", "svg"}};

void write_all(FILE* stream, const std::string& text) {
  if (text.empty()) return;
  std::fwrite(text.data(), 1, text.size(), stream);
  std::fflush(stream);
}

// Image data as Jupyter sends it may be wrapped in lines (nbformat writes it so).
std::optional<std::string> decode_base64(const std::string& text) {
  std::string clean;
  clean.reserve(text.size());
  for (char c : text)
    if (c != '\n' && c != '\r' && c != ' ') clean += c;
  return base64_decode(clean);
}
}  // namespace

RunFrontend::RunFrontend(Kernel& kernel, RunRequest request)
    : kernel_(kernel), request_(std::move(request)) {
  workspace_dir_.reset(::open(request_.workspace.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  color_ = !request_.json_output && ::isatty(STDERR_FILENO);
  stdin_open_ = !request_.stdin_is_code;
}

void RunFrontend::add_poll_items(std::vector<zmq::pollitem_t>& items) {
  items.push_back({nullptr, waiting_for_input_ && stdin_open_ ? STDIN_FILENO : -1, ZMQ_POLLIN, 0});
}

std::optional<std::chrono::steady_clock::time_point> RunFrontend::next_wakeup() const {
  if (!submitted_) return std::chrono::steady_clock::now();
  return std::nullopt;
}

void RunFrontend::handle(const zmq::pollitem_t* items, Kernel&) {
  if (!submitted_) {
    submitted_ = true;
    WireMessage message;
    message.header = make_header("execute_request", kernel_.session_id());
    message.header["username"] = "run";
    message.content = {{"code", request_.code}, {"silent", false},
                       {"store_history", true}, {"user_expressions", json::object()},
                       {"allow_stdin", true},   {"stop_on_error", true}};
    request_id_ = message.id();
    kernel_.submit_shell(std::move(message));
    return;
  }
  if (waiting_for_input_ && (items[0].revents & (ZMQ_POLLIN | ZMQ_POLLERR))) read_input_line();
}

void RunFrontend::publish(const std::string& type, json content, const WireMessage* parent) {
  if (!parent || parent->id() != request_id_ || !content.is_object()) return;
  record_.add(type, content);
  if (type == "display_data" || type == "execute_result" || type == "update_display_data") {
    auto data = content.find("data");
    if (data != content.end() && data->is_object()) print_display(*data, type == "execute_result");
    return;
  }
  if (request_.json_output) return;
  if (type == "stream") {
    std::string text = content.value("text", "");
    write_all(content.value("name", "") == "stderr" ? stderr : stdout, text);
  } else if (type == "error") {
    std::string traceback;
    auto lines = content.find("traceback");
    if (lines != content.end() && lines->is_array())
      for (auto& line : *lines)
        if (line.is_string())
          traceback +=
              (color_ ? line.get<std::string>() : strip_ansi(line.get<std::string>())) + "\n";
    if (traceback.empty())
      traceback = content.value("ename", "") + ": " + content.value("evalue", "") + "\n";
    write_all(stderr, traceback);
  }
}

void RunFrontend::print_display(const json& data, bool result) {
  for (auto& [mime, extension] : kSavedImages) {
    auto value = data.find(mime);
    if (value == data.end() || !value->is_string()) continue;
    std::string path = save_image(mime, *value);
    if (path.empty()) break;  // not saved (said on stderr): show its text instead
    if (request_.json_output)
      record_.note_file(mime, path);
    else
      write_all(stdout, std::string("[") + mime + " saved to " + path + "]\n");
    return;
  }
  if (request_.json_output) return;
  auto text = data.find("text/plain");
  if (text != data.end() && text->is_string() && !text->get_ref<const std::string&>().empty())
    write_all(stdout, text->get<std::string>() + "\n");
  (void)result;
}

std::string RunFrontend::save_image(const std::string& mime, const json& value) {
  std::string extension;
  for (auto& [type, ext] : kSavedImages)
    if (mime == type) extension = ext;
  std::optional<std::string> bytes = mime == "image/svg+xml"
                                         ? std::optional<std::string>(value.get<std::string>())
                                         : decode_base64(value.get<std::string>());
  if (!bytes || !workspace_dir_) {
    save_log_.log("belljar run: could not save a display",
                  mime + (bytes ? " (no workspace)" : " (bad base64)"));
    return {};
  }
  std::string name = "belljar-output-" + std::to_string(++images_saved_) + "." + extension;
  // Code in the sandbox can write the workspace: written beside and renamed over the name, so
  // a symlink or hard link it planted there is replaced, never written through.
  std::string temporary = "." + name + ".tmp-" + std::to_string(::getpid());
  Fd file(::openat(workspace_dir_.get(), temporary.c_str(),
                   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  bool ok = file.valid();
  for (size_t done = 0; ok && done < bytes->size();) {
    ssize_t n = ::write(file.get(), bytes->data() + done, bytes->size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    done += ok ? static_cast<size_t>(n) : 0;
  }
  int saved_errno = errno;
  file.reset();
  if (ok && ::renameat(workspace_dir_.get(), temporary.c_str(), workspace_dir_.get(),
                       name.c_str()) != 0) {
    ok = false;
    saved_errno = errno;
  }
  if (!ok) {
    ::unlinkat(workspace_dir_.get(), temporary.c_str(), 0);
    save_log_.log("belljar run: could not save a display",
                  (request_.workspace / name).string() + ": " + std::strerror(saved_errno));
    return {};
  }
  return (request_.workspace / name).string();
}

void RunFrontend::request_input(const WireMessage& parent, json content) {
  if (request_.json_output) {
    kernel_.deliver_input("\x04");  // no terminal conversation in --json mode: input() gets EOF
    return;
  }
  write_all(stdout, content.value("prompt", ""));
  waiting_for_input_ = true;
  read_input_line();
}

void RunFrontend::read_input_line() {
  // A line already read ahead (several input() calls fed at once) is used first.
  for (;;) {
    auto newline = input_line_.find('\n');
    if (newline != std::string::npos) {
      std::string value = input_line_.substr(0, newline);
      input_line_.erase(0, newline + 1);
      if (!value.empty() && value.back() == '\r') value.pop_back();
      waiting_for_input_ = false;
      kernel_.deliver_input(value);
      return;
    }
    if (!stdin_open_) {
      waiting_for_input_ = false;
      if (!input_line_.empty())
        kernel_.deliver_input(std::exchange(input_line_, std::string()));
      else
        kernel_.deliver_input("\x04");  // EOF: the worker raises EOFError
      return;
    }
    // Called again when poll says stdin is readable; one read never blocks then.
    struct pollfd probe = {STDIN_FILENO, POLLIN, 0};
    if (::poll(&probe, 1, 0) <= 0) return;
    char chunk[4096];
    ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0)
      stdin_open_ = false;
    else
      input_line_.append(chunk, static_cast<size_t>(n));
  }
}

void RunFrontend::reply(Channel, const WireMessage& parent, const std::string& type, json content,
                        json metadata) {
  if (type != "execute_reply" || parent.id() != request_id_) return;
  record_.finish(content, metadata);
  exit_status_ = record_.status() == "ok" ? 0 : 1;
  if (request_.json_output) write_all(stdout, dump_json(record_.structured()) + "\n");
  kernel_.request_shutdown();
}

}  // namespace belljar
