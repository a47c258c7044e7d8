// libFuzzer target: the Kernel's real handlers of worker frames (Kernel::handle_frame and all
// under it: displays and results through bundle checks, active output, widget state and the
// budget; errors; comms; input requests; %%limits; %audit; done and the replies it finishes)
// on arbitrary frames from an (untrusted) worker. fuzz_worker_frames covers the framing.
//
// The seam: a real Kernel, --isolation none, whose "worker" is a stand-in (a /bin/sh script
// that reads fd 3 and discards it), so the Kernel's own start_worker, its worker link and pipes
// are the real ones; a Frontend that only counts what it is given; and KernelProbe, a friend of
// Kernel, which hands it frames as read_frames does, without the reactor's poll. Handlers are
// called without take_frames' per-frame boundary: any exception that would reach it is a
// finding (the boundary keeps the kernel alive, but a throw is still a handler's bug).
//
// Input: byte 0 chooses the request the kernel is serving (execute, comm_msg, complete, inspect,
// is_complete, comm_info, or a debug_request: initialize, on control); the rest is lines, each a
// frame's JSON body, "@ID" replaced by the current request's id and "@DID" by the last debug
// request's. Lines that are not a JSON object with a string "type" are skipped. The debug
// channel's frames (debug_reply, debug_event, debug_state) go to its handler, as fd 4's would.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "kernel/protocol/bounded_json.hpp"
#include "kernel/session/kernel.hpp"

namespace belljar {

class CountingFrontend : public Frontend {
 public:
  void add_poll_items(std::vector<zmq::pollitem_t>&) override {}
  void handle(const zmq::pollitem_t*, Kernel&) override {}
  void collect_pending(Kernel&) override {}
  void reply(Channel, const WireMessage&, const std::string&, nlohmann::json content,
             nlohmann::json metadata) override {
    bytes += dump_json(content).size() + dump_json(metadata).size();
  }
  void publish(const std::string&, nlohmann::json content, const WireMessage*) override {
    bytes += dump_json(content).size();
  }
  void request_input(const WireMessage&, nlohmann::json content) override {
    bytes += dump_json(content).size();
  }
  size_t bytes = 0;
};

struct KernelProbe {
  static void start(Kernel& kernel, Frontend& frontend) {
    kernel.client_.attach(frontend);
    kernel.start_worker();
    kernel.handle_frame(
        {{"type", "hello"}, {"language_info", {{"version", "3.12"}}}, {"debugger", true}});
  }
  static void ensure_worker(Kernel& kernel) {
    // A handler may fault the worker (replies it left unread): a fresh one, as its exit would.
    if (kernel.worker_ && kernel.worker_link_.frames_open()) return;
    kernel.drop_worker();
    if (kernel.current_.active()) kernel.current_.end();
    kernel.queue_.clear();
    start(kernel, *kernel.client_.frontend());
  }
  static WireMessage request(const std::string& type, nlohmann::json content) {
    static uint64_t serial = 0;
    WireMessage message;
    message.identities = {"fuzz"};
    message.header = {{"msg_id", "m" + std::to_string(++serial)},
                      {"msg_type", type},
                      {"session", "fuzz"},
                      {"username", "fuzz"},
                      {"version", "5.3"}};
    message.content = std::move(content);
    return message;
  }
  static void serve(Kernel& kernel, uint8_t choice) {
    switch (choice % 7) {
      case 0:
        kernel.submit_shell(request("execute_request", {{"code", "x"}, {"allow_stdin", true}}));
        break;
      case 1:
        kernel.submit_shell(request("comm_open", {{"comm_id", "c1"},
                                                  {"target_name", "jupyter.widget"},
                                                  {"data", nlohmann::json::object()}}));
        break;
      case 2:
        kernel.submit_shell(request("complete_request", {{"code", "x"}, {"cursor_pos", 1}}));
        break;
      case 3:
        kernel.submit_shell(request("inspect_request", {{"code", "x"}, {"cursor_pos", 1}}));
        break;
      case 4:
        kernel.submit_shell(request("is_complete_request", {{"code", "x"}}));
        break;
      case 5:
        kernel.submit_shell(request("comm_info_request", nlohmann::json::object()));
        break;
      case 6:
        kernel.submit_control(request(
            "debug_request",
            {{"type", "request"}, {"seq", 1}, {"command", "initialize"}, {"arguments", {}}}));
        break;
    }
  }
  static bool has_worker(const Kernel& kernel) { return kernel.worker_.has_value(); }
  static std::string current_id(const Kernel& kernel) {
    return kernel.current_.active() ? kernel.current_.cell().id : "none";
  }
  static std::string last_debug_id(const Kernel& kernel) {
    return std::to_string(kernel.debug_.last_id());
  }
  static void handle(Kernel& kernel, const nlohmann::json& frame) {
    try {
      kernel.worker_link_.read_output_before(frame);
      auto type = worker_frame(frame["type"].get<std::string>());
      if (type && debug_channel_frame(*type))
        kernel.debug_.handle_frame(frame);
      else
        kernel.handle_frame(frame);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "handle_frame threw on %s: %s\n", dump_json(frame).c_str(), e.what());
      std::abort();
    }
  }
  // Whatever the frames left running is finished, so the next input starts from a request.
  static void finish(Kernel& kernel) {
    for (int i = 0; i < 4 && kernel.current_.active() && kernel.worker_; ++i) {
      std::string id = kernel.current_.cell().id;
      handle(kernel,
             {{"type", std::string(worker_frame_name(worker_answer(kernel.current_.cell().kind)))},
              {"id", id}});
      if (kernel.current_.active() && kernel.current_.cell().id == id)
        handle(kernel, {{"type", "done"}, {"id", id}});
    }
    kernel.queue_.clear();
    kernel.debug_.end_session("the fuzz run ended");
  }
};

}  // namespace belljar

using namespace belljar;

namespace {

// The stand-in worker's folder, removed when the fuzzer exits (libFuzzer ends with exit()).
std::string& fuzz_dir() {
  static std::string dir;
  return dir;
}

Kernel& fuzzed_kernel() {
  static CountingFrontend frontend;
  static Kernel* kernel = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string dir_template =
        std::string(tmp && *tmp == '/' ? tmp : "/tmp") + "/belljar-fuzz-XXXXXX";
    std::string dir = ::mkdtemp(dir_template.data());
    fuzz_dir() = dir;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(fuzz_dir(), ec);
    });
    std::string stand_in = dir + "/python";
    if (FILE* f = std::fopen(stand_in.c_str(), "w")) {
      std::fputs("#!/bin/sh\ncat <&4 >/dev/null &\nexec cat <&3 >/dev/null\n", f);
      std::fclose(f);
    }
    ::chmod(stand_in.c_str(), 0700);
    std::filesystem::create_directories(dir + "/package/belljar_worker");
    KernelOptions options;
    options.policy.isolation = Isolation::none;
    options.policy.workspace = dir;
    options.policy.python = stand_in;
    options.policy.audit_log = "/dev/null";
    options.launch.python = stand_in;
    options.launch.worker_package_dir = dir + "/package";
    options.session_id = "fuzz-session-0000";
    auto* made = new Kernel(std::move(options));
    KernelProbe::start(*made, frontend);
    return made;
  }();
  return *kernel;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > (1 << 20)) return 0;
  Kernel& kernel = fuzzed_kernel();
  KernelProbe::ensure_worker(kernel);
  KernelProbe::serve(kernel, data[0]);
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  while (!rest.empty()) {
    size_t end = rest.find('\n');
    std::string line(rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    for (size_t at; (at = line.find("@DID")) != std::string::npos;)
      line.replace(at, 4, KernelProbe::last_debug_id(kernel));
    for (size_t at; (at = line.find("@ID")) != std::string::npos;)
      line.replace(at, 3, KernelProbe::current_id(kernel));
    auto frame = parse_bounded_json(line, nullptr);
    if (!frame || !frame->is_object() || !frame->contains("type") ||
        !(*frame)["type"].is_string() || (*frame)["type"] == "hello")
      continue;
    KernelProbe::handle(kernel, *frame);
    if (!KernelProbe::has_worker(kernel)) break;
  }
  KernelProbe::finish(kernel);
  return 0;
}
