#pragma once
// Runs a fake worker in a real sandbox: its serve() is the Python body a test gives, which
// reports what it finds as JSON on fd 3. Dangerous probes (fork and memory bombs) stay inside
// the sandbox and under its caps.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "sandbox/jail_client/host_check.hpp"
#include "sandbox/jail_client/jail_helper.hpp"
#include "sandbox/jail_client/worker_process.hpp"

namespace belljar::testing {

namespace fs = std::filesystem;

inline const char* kTestPython = "/usr/bin/python3";

// The jail helper of this build, opened once for every test that starts a sandbox.
inline std::shared_ptr<const JailHelper> test_jail_helper() {
  static std::shared_ptr<const JailHelper> helper = JailHelper::open(BELLJAR_JAIL_HELPER);
  return helper;
}

// What a test's sandbox runs: `python` with the worker package in `package`.
inline WorkerLaunch test_launch(const std::string& python, const fs::path& package) {
  return {python, package, test_jail_helper()};
}

struct TempDir {
  fs::path path;
  // `parent`: where it is made (the temporary directory unless said).
  explicit TempDir(const std::string& prefix = "belljar-test",
                   const fs::path& parent = fs::temp_directory_path()) {
    std::string tmpl = (parent / (prefix + "-XXXXXX")).string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
    fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path operator/(const std::string& name) const { return path / name; }
};

inline void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Indents a probe body under `def serve():`, with helpers: report(obj) writes JSON to fd 3.
inline std::string worker_module(const std::string& body) {
  std::string module =
      "import os, sys, json, errno, ctypes, socket, signal, time, resource\n"
      "def report(obj):\n"
      "    data = (json.dumps(obj) + '\\n').encode()\n"
      "    while data:\n"
      "        data = data[os.write(3, data):]\n"
      "def attempt(fn):\n"
      "    try:\n"
      "        value = fn()\n"
      "        return {'ok': True, 'value': value if isinstance(value, (int, str, bool, list, "
      "type(None))) else str(value)}\n"
      "    except OSError as e:\n"
      "        return {'ok': False, 'errno': errno.errorcode.get(e.errno, str(e.errno))}\n"
      "    except Exception as e:\n"
      "        return {'ok': False, 'error': type(e).__name__}\n"
      "def serve():\n";
  std::string line;
  std::istringstream in(body);
  while (std::getline(in, line)) module += "    " + line + "\n";
  return module;
}

struct SandboxRun {
  std::string frames, out, err;
  WorkerExit exit;
  std::vector<std::string> notes;
  pid_t worker_pid = -1;
  // The first (or only) JSON document the probe reported.
  nlohmann::json result() const {
    auto nl = frames.find('\n');
    auto doc = nlohmann::json::parse(frames.substr(0, nl), nullptr, false);
    if (doc.is_discarded())
      throw std::runtime_error("probe reported no JSON; stdout: " + out + " stderr: " + err);
    return doc;
  }
};

struct FakeWorker {
  TempDir package{"belljar-pkg"};
  explicit FakeWorker(const std::string& body) {
    write_file(package / "belljar_worker/__init__.py", "");
    write_file(package / "belljar_worker/main.py", worker_module(body));
  }
  WorkerLaunch launch() const { return test_launch(kTestPython, package.path); }
};

inline Policy test_policy(const fs::path& workspace, Isolation isolation = Isolation::strict) {
  Policy policy;
  policy.workspace = workspace;
  policy.python = kTestPython;
  policy.isolation = isolation;
  policy.memory_bytes = 512ull << 20;
  policy.pids = 64;
  policy.tmp_size_bytes = 64ull << 20;
  return policy;
}

// Reads everything until the worker is gone; `during` runs once per loop (to interrupt etc.).
inline SandboxRun collect(
    WorkerProcess& worker, double timeout_seconds = 30,
    const std::function<void(WorkerProcess&, const std::string& frames)>& during = {}) {
  SandboxRun run;
  run.notes = worker.notes();
  run.worker_pid = worker.worker_pid();
  bool open[3] = {true, true, true};
  const int fds[3] = {worker.frames_fd(), worker.stdout_fd(), worker.stderr_fd()};
  std::string* sinks[3] = {&run.frames, &run.out, &run.err};
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<int>(timeout_seconds * 1000));
  for (;;) {
    if (std::chrono::steady_clock::now() > deadline) {
      worker.kill();
      throw std::runtime_error("the sandboxed probe did not finish in time; stdout: " + run.out +
                               " stderr: " + run.err);
    }
    if (during) during(worker, run.frames);
    pollfd p[3];
    for (int i = 0; i < 3; ++i) p[i] = {open[i] ? fds[i] : -1, POLLIN, 0};
    ::poll(p, 3, 50);
    for (int i = 0; i < 3; ++i) {
      if (!open[i] || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      ssize_t n = ::read(fds[i], buf, sizeof buf);
      if (n > 0)
        sinks[i]->append(buf, static_cast<size_t>(n));
      else if (n == 0 || errno != EINTR)
        open[i] = false;
    }
    if (!open[0] && !open[1] && !open[2]) {
      if (auto exit = worker.poll_exit()) {
        run.exit = *exit;
        return run;
      }
    }
  }
}

inline SandboxRun run_probe(const std::string& body, const Policy& policy,
                            double timeout_seconds = 30) {
  FakeWorker fake(body);
  WorkerProcess worker = WorkerProcess::start(policy, fake.launch());
  return collect(worker, timeout_seconds);
}

inline bool running_as_root() {
  return ::geteuid() == 0;
}

}  // namespace belljar::testing
