#pragma once
// The one-shot front door: `belljar run (FILE.py | -c CODE | -)` runs the code once in a fresh
// sandbox and prints what it produced the way a terminal user expects: stdout to stdout,
// stderr and tracebacks to stderr, text results and displays to stdout, images saved in the
// workspace as belljar-output-N.EXT (their paths printed). --json prints the RunRecord
// instead (the shape of MCP run_python's structuredContent).
#include <filesystem>
#include <string>

#include "kernel/observability/diagnostics.hpp"
#include "kernel/session/frontend.hpp"
#include "kernel/session/run_record.hpp"
#include "sandbox/os/fd.hpp"

namespace belljar {

struct RunRequest {
  std::string code;
  bool json_output = false;
  bool stdin_is_code = false;       // `-`: the code came from stdin, so input() gets EOF
  std::filesystem::path workspace;  // where images are saved
};

class RunFrontend : public Frontend {
 public:
  RunFrontend(Kernel& kernel, RunRequest request);

  void add_poll_items(std::vector<zmq::pollitem_t>& items) override;
  void handle(const zmq::pollitem_t* items, Kernel& kernel) override;
  void collect_pending(Kernel&) override {}
  void reply(Channel channel, const WireMessage& parent, const std::string& type,
             nlohmann::json content, nlohmann::json metadata) override;
  void publish(const std::string& type, nlohmann::json content, const WireMessage* parent) override;
  void request_input(const WireMessage& parent, nlohmann::json content) override;
  std::optional<std::chrono::steady_clock::time_point> next_wakeup() const override;

  // 0: the code ran without error; 1: it raised (or a limit stopped it).
  int exit_status() const { return exit_status_; }

 private:
  void print_display(const nlohmann::json& data, bool result);
  std::string save_image(const std::string& mime, const nlohmann::json& value);
  void read_input_line();

  Kernel& kernel_;
  RunRequest request_;
  Fd workspace_dir_;
  RateLimitedLog save_log_;  // the sandbox decides how many displays fail to save
  bool submitted_ = false;
  std::string request_id_;
  RunRecord record_;
  int images_saved_ = 0;
  int exit_status_ = 1;
  bool waiting_for_input_ = false;
  bool stdin_open_ = true;
  std::string input_line_;
  bool color_ = false;  // keep tracebacks' ANSI colours (stderr is a terminal)
};

}  // namespace belljar
