"""The session's memory cap holds for the session as a whole, with or without a memory cgroup.

Without one (an unprivileged kernel), --memory used to be RLIMIT_AS, a cap per process: memfds,
SysV shared memory and forked children each took the session far past it. Now seccomp refuses
what no process's mappings show (memfd_create, shmget: ENOSYS) and the warden samples the
session's total and stops the sandbox past the cap. Each attack aims at 3x the cap; a sampler in
this test, outside the sandbox, watches the memory the sandbox holds (its processes' anonymous
and shared memory, plus the host's shared memory that appeared meanwhile) and asserts that it
never got past 1.5x the cap. ctest runs this file under ulimit."""
import json
import os
import shutil
import threading

import pytest

from belljar_testing import (
    ISOLATION,
    execute,
    running_kernel,
    sandbox_writable_dir,
    stdout_of,
    still_answers,
)

CAP_MIB = 256
FLAGS = ["--isolation", ISOLATION, "--timeout", "60", "--memory", f"{CAP_MIB}M", "--pids", "64",
         "--file-size", "64M"]
TARGET_MIB = 3 * CAP_MIB  # what each attack tries to hold


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _kb(text, name):
    for line in text.splitlines():
        if line.startswith(name):
            return int(line.split()[1]) * 1024
    return 0


def _descendants(pid):
    found, pending = [], [pid]
    while pending:
        parent = pending.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            for child in _read(f"/proc/{parent}/task/{task}/children").split():
                found.append(int(child))
                pending.append(int(child))
    return found


def _held_by(pid):
    """Anonymous and shared memory of one process: PSS where this user may read it, RSS else."""
    rollup = _read(f"/proc/{pid}/smaps_rollup")
    if "Pss_Anon:" in rollup:
        return _kb(rollup, "Pss_Anon:") + _kb(rollup, "Pss_Shmem:")
    status = _read(f"/proc/{pid}/status")
    return _kb(status, "RssAnon:") + _kb(status, "RssShmem:")


class OutsideSampler:
    """Samples, every 10 ms until stopped, what the kernel's sandbox holds: its processes' memory
    plus the growth of the host's Shmem (memfds and SysV segments that no mapping shows). The
    period is how often it looks, not a wait for anything; one last sample is taken on stopping,
    so what the sandbox holds after the cell's reply is seen too."""

    def __init__(self, kernel_pid):
        self.kernel_pid = kernel_pid
        self.peak = 0
        self._stop = threading.Event()
        self._shmem_base = _kb(_read("/proc/meminfo"), "Shmem:")
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self):
        total = sum(_held_by(p) for p in _descendants(self.kernel_pid))
        total += max(0, _kb(_read("/proc/meminfo"), "Shmem:") - self._shmem_base)
        self.peak = max(self.peak, total)

    def _run(self):
        while not self._stop.wait(0.01):
            self._sample()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sample()


@pytest.fixture(scope="module")
def capped():
    workspace = sandbox_writable_dir("belljar-memory-")
    audit = sandbox_writable_dir("belljar-memory-audit-") / "audit.jsonl"
    with running_kernel(flags=FLAGS + ["--audit-log", str(audit)], workspace=workspace) as (km, kc):
        km.audit = audit
        yield km, kc
    shutil.rmtree(workspace, ignore_errors=True)
    shutil.rmtree(audit.parent, ignore_errors=True)


def attack(km, kc, code):
    with OutsideSampler(km.provisioner.process.pid) as sampler:
        reply, outputs = execute(kc, code, timeout=120)
    peak_mib = sampler.peak / (1 << 20)
    print(f"peak held by the sandbox, seen from outside: {peak_mib:.0f} MiB "
          f"(cap {CAP_MIB} MiB); cell: {reply['content'].get('ename')} "
          f"{reply['content'].get('evalue', '')[:160]!r}; stdout {stdout_of(outputs)!r}")
    return reply["content"], outputs, peak_mib


def worker_exits(km):
    records = [json.loads(line) for line in km.audit.read_text().splitlines()]
    return [r for r in records if r.get("event") == "worker_exit"]


MEMFD_FILL = f"""
import os
fds, held, block = [], 0, b'x' * (1 << 20)
while held < ({TARGET_MIB} << 20):
    fd = os.memfd_create('fill')
    for _ in range(32):
        os.write(fd, block)
    fds.append(fd)
    held += 32 << 20
print('held', held >> 20, 'MiB in memfds')
"""

SYSV_FILL = f"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
libc.shmctl.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
ids, held, size = [], 0, 32 << 20
try:
    while held < ({TARGET_MIB} << 20):
        sid = libc.shmget(0, size, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
        if sid < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), 'shmget')
        addr = libc.shmat(sid, None, 0)
        ctypes.memset(addr, 1, size)
        libc.shmdt(addr)  # detached: no process maps it any more
        ids.append(sid)
        held += size
    print('held', held >> 20, 'MiB in SysV segments')
finally:
    for sid in ids:
        libc.shmctl(sid, 0, None)  # IPC_RMID
"""

# Each child says on a pipe when it holds its 128 MiB (or its end closes: it was killed first),
# and the next is forked only then. A memory cgroup's OOM killer acts as the children allocate,
# so with all six done at least one is gone; if all six still run, nothing stopped them in the
# act and the cell waits for the warden, which samples from outside, to stop the sandbox (the
# --timeout of 60 s would end the wait, failing the test, if it never did).
FORKED_CHILDREN = """
import os, time
children = []
for _ in range(6):
    held, tell = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(held)
        hog = b'x' * (128 << 20)
        os.write(tell, b'h')
        time.sleep(30)
        os._exit(0)
    os.close(tell)
    os.read(held, 1)
    os.close(held)
    children.append(pid)
running = [pid for pid in children if os.waitpid(pid, os.WNOHANG) == (0, 0)]  # reaps the killed
if len(running) == len(children):
    while True:
        time.sleep(30)  # until the sandbox is stopped
for pid in running:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
print('alive', len(running))
"""


def test_memfd_fill_is_refused(capped):
    km, kc = capped
    content, outputs, peak = attack(km, kc, MEMFD_FILL)
    assert peak < 1.5 * CAP_MIB, f"the sandbox held {peak:.0f} MiB under --memory {CAP_MIB}M"
    assert content["status"] == "error", stdout_of(outputs)
    assert content["ename"] == "OSError" and "Function not implemented" in content["evalue"]
    still_answers(km, kc, timeout=60)


def test_sysv_shared_memory_fill_is_refused(capped):
    km, kc = capped
    content, outputs, peak = attack(km, kc, SYSV_FILL)
    assert peak < 1.5 * CAP_MIB, f"the sandbox held {peak:.0f} MiB under --memory {CAP_MIB}M"
    assert content["status"] == "error", stdout_of(outputs)
    assert content["ename"] == "OSError" and "Function not implemented" in content["evalue"]
    still_answers(km, kc, timeout=60)


def test_forked_children_share_one_cap(capped):
    km, kc = capped
    exits_before = len(worker_exits(km))
    content, outputs, peak = attack(km, kc, FORKED_CHILDREN)
    assert peak < 1.5 * CAP_MIB, f"the sandbox held {peak:.0f} MiB under --memory {CAP_MIB}M"
    if content["status"] == "ok":
        # A memory cgroup (as root): the cgroup holds the total (the peak above); its OOM killer
        # ends the largest process, a child, and the worker lives on.
        assert stdout_of(outputs).startswith("alive "), stdout_of(outputs)
    else:
        # No cgroup: the warden saw the session's total pass the cap and stopped the sandbox.
        assert content["ename"] == "MemoryError", content
        assert "--memory" in content["evalue"] and "session" in content["evalue"]
        assert "together" in content["evalue"]  # the figure the warden measured
        exits = worker_exits(km)[exits_before:]
        assert exits and exits[0]["memory_limit"] is True and exits[0]["during_cell"] is True
    still_answers(km, kc, timeout=60)


def test_a_forked_pool_within_the_cap_is_left_alone(capped):
    """Pages a forked pool shares with its parent count once (PSS), not once per process."""
    km, kc = capped
    code = ("import os, time\n"
            "base = b'y' * (96 << 20)\n"  # shared copy-on-write with every child below
            "children = []\n"
            "for _ in range(6):\n"
            "    pid = os.fork()\n"
            "    if pid == 0:\n"
            "        time.sleep(1.5); os._exit(0)\n"
            "    children.append(pid)\n"
            "for pid in children: os.waitpid(pid, 0)\n"
            "print('pool done')\n")
    reply, outputs = execute(kc, code, timeout=60)
    assert reply["content"]["status"] == "ok", reply["content"]
    assert stdout_of(outputs) == "pool done\n"
