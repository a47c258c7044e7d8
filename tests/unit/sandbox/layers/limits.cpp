// The caps: processes, memory, file size, /tmp, and the CPU and memory accounting the
// supervisor's per-cell limits read. The bombs go off inside the sandbox only.
#include <catch2/catch.hpp>

#include "sandbox_harness.hpp"

using namespace belljar;
using namespace belljar::testing;

TEST_CASE("a fork bomb stops at the process cap", "[sandbox]") {
  TempDir ws;
  auto policy = test_policy(ws.path);
  policy.pids = 24;
  auto run = run_probe(R"PY(
children, failure = [], None
for i in range(200):
    try:
        pid = os.fork()
    except OSError as e:
        failure = errno.errorcode[e.errno]
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
report({'forked': len(children), 'failure': failure})
)PY",
                       policy);
  auto r = run.result();
  INFO(r.dump() << run.notes.size());
  CHECK(r["failure"] == "EAGAIN");
  CHECK(r["forked"] < 24);
  CHECK(r["forked"] >= 10);
}

TEST_CASE("a memory bomb stops at the memory cap", "[sandbox]") {
  TempDir ws;
  auto policy = test_policy(ws.path);
  policy.memory_bytes = 128ull << 20;
  auto run = run_probe(R"PY(
blocks = []
try:
    for i in range(64):
        blocks.append(bytearray(32 << 20))   # touched: bytearray zero-fills
    report({'outcome': 'no limit'})
except MemoryError:
    report({'outcome': 'MemoryError', 'allocated_mb': 32 * len(blocks)})
)PY",
                       policy, 60);
  INFO(run.frames << run.err);
  if (run.frames.empty()) {
    // A memory cgroup: the OOM killer ends the worker, and the exit says why.
    CHECK(run.exit.signal == SIGKILL);
    CHECK(run.exit.memory_limit);
    CHECK(run.exit.describe().find("memory limit") != std::string::npos);
  } else {
    // RLIMIT_AS: Python's own MemoryError, and the worker lives on.
    auto r = run.result();
    CHECK(r["outcome"] == "MemoryError");
    CHECK(r["allocated_mb"] <= 128);
  }
  if (running_as_root()) CHECK(run.exit.memory_limit);  // this host offers a memory cgroup to root
}

TEST_CASE("files stop at the file-size cap, /tmp and home at the tmp-size cap", "[sandbox]") {
  TempDir ws;
  auto policy = test_policy(ws.path);
  policy.file_size_bytes = 1 << 20;
  policy.tmp_size_bytes = 8 << 20;
  auto run = run_probe(R"PY(
def fill(path, chunk=1 << 20, total=64 << 20):
    written = 0
    try:
        with open(path, 'wb') as f:
            while written < total:
                f.write(b'x' * chunk)
                f.flush()
                written += chunk
        return {'written': written}
    except OSError as e:
        return {'written': written, 'errno': errno.errorcode[e.errno]}
out = {}
out['big'] = fill('big.bin', chunk=256 << 10, total=4 << 20)
out['tmp'] = [fill('/tmp/fill-%d' % i) for i in range(12)]
out['home'] = fill('/home/sandbox/more', chunk=4096, total=1 << 20)
report(out)
)PY",
                       policy);
  auto r = run.result();
  INFO(r.dump());
  CHECK(r["big"]["errno"] == "EFBIG");
  CHECK(fs::file_size(ws / "big.bin") == (1u << 20));
  uint64_t tmp_total = 0;
  bool tmp_full = false;
  for (const auto& f : r["tmp"]) {
    tmp_total += f["written"].get<uint64_t>();
    tmp_full = tmp_full || f.value("errno", "") == "ENOSPC";
  }
  CHECK(tmp_full);
  CHECK(tmp_total <= (8u << 20));
  CHECK(r["home"]["errno"] == "ENOSPC");  // one cap for /tmp, /dev/shm and the home
}

TEST_CASE("cpu_seconds and peak_memory_bytes measure the sandbox", "[sandbox]") {
  TempDir ws;
  FakeWorker fake(R"PY(
import subprocess
end = time.process_time() + 0.6
while time.process_time() < end:
    pass
# A subprocess burns CPU too, and is counted while it runs; it says when it has.
child = subprocess.Popen([sys.executable, '-c', 'import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\nprint("burned", flush=True)\ntime.sleep(30)'],
                         stdout=subprocess.PIPE)
block = bytearray(96 << 20)
child.stdout.readline()
report({'burned': True})
time.sleep(30)
)PY");
  WorkerProcess worker = WorkerProcess::start(test_policy(ws.path), fake.launch());
  double cpu = 0;
  uint64_t peak = 0;
  collect(worker, 30, [&](WorkerProcess& w, const std::string& frames) {
    if (cpu == 0 && frames.find("burned") != std::string::npos) {
      cpu = w.cpu_seconds();
      peak = w.peak_memory_bytes();
      w.kill();
    }
  });
  CHECK(cpu >= 1.0);
  CHECK(cpu < 10);
  CHECK(peak >= (96ull << 20));
}
