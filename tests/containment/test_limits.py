"""Destructive probes: runaway code stops at its caps and the kernel keeps answering. These run
only inside the sandbox (never with --isolation none), and ctest runs this file under ulimit."""
import os
import resource
import shutil

import pytest

from belljar_testing import (
    ISOLATION,
    NO_NAMESPACES,
    execute,
    running_kernel,
    sandbox_writable_dir,
    stderr_of,
    stdout_of,
    still_answers,
)

FLAGS = ["--isolation", ISOLATION, "--timeout", "4", "--memory", "256M", "--pids", "64",
         "--tmp-size", "16M", "--file-size", "8M"]


@pytest.fixture(scope="module")
def capped():
    workspace = sandbox_writable_dir("belljar-limits-")
    with running_kernel(flags=FLAGS, workspace=workspace) as (km, kc):
        yield km, kc, workspace
    shutil.rmtree(workspace, ignore_errors=True)


def test_cpu_spin_hits_the_time_limit_and_keeps_state(capped):
    km, kc, _ = capped
    execute(kc, "kept_value = 42")
    reply, _ = execute(kc, "while True: pass")  # the limit's reply, or none within TIMEOUT
    content = reply["content"]
    assert content["status"] == "error" and content["ename"] == "TimeoutError"
    assert "--timeout" in content["evalue"] and "kept" in content["evalue"]
    assert reply["metadata"]["belljar"]["limit_hit"] == "timeout"
    reply, _ = execute(kc, "kept_value", user_expressions={"v": "kept_value"})
    assert reply["content"]["user_expressions"]["v"]["data"]["text/plain"] == "42"


def test_sleep_hits_the_time_limit(capped):
    km, kc, _ = capped
    reply, _ = execute(kc, "import time; time.sleep(600)")
    assert reply["content"]["ename"] == "TimeoutError"
    assert "--timeout" in reply["content"]["evalue"]
    still_answers(km, kc, timeout=30)


def test_memory_bomb_is_reported_as_the_memory_limit(capped):
    km, kc, _ = capped
    reply, _ = execute(kc, "hog = []\nwhile True: hog.append(bytearray(16 << 20))")
    content = reply["content"]
    assert content["status"] == "error"
    assert content["ename"] == "MemoryError", content
    if "memory limit" in content.get("evalue", ""):
        assert "--memory" in content["evalue"]
    still_answers(km, kc, timeout=30)


def test_fork_bomb_stops_at_the_process_cap(capped):
    km, kc, _ = capped
    code = ("import os, time\nchildren = 0\n"
            "try:\n"
            "    while True:\n"
            "        pid = os.fork()\n"
            "        if pid == 0:\n"
            "            time.sleep(30); os._exit(0)\n"
            "        children += 1\n"
            "except OSError as e:\n"
            "    print('stopped after', children, 'forks:', e.strerror)\n")
    reply, outputs = execute(kc, code, timeout=60)
    assert "stopped after" in stdout_of(outputs), (reply["content"], stderr_of(outputs))
    forks = int(stdout_of(outputs).split()[2])
    assert forks < 64
    still_answers(km, kc, timeout=30)


def test_tmp_fill_stops_at_the_tmp_size(capped):
    km, kc, _ = capped
    code = ("import errno\nwritten = 0\n"
            "try:\n"
            "    with open('/tmp/fill', 'wb') as f:\n"
            "        while True:\n"
            "            f.write(b'x' * (1 << 20)); f.flush(); written += 1\n"
            "except OSError as e:\n"
            "    print(errno.errorcode[e.errno], written)\n")
    reply, outputs = execute(kc, code, timeout=60)
    name, megabytes = stdout_of(outputs).split()
    assert name in ("ENOSPC", "EFBIG") and int(megabytes) <= 16
    execute(kc, "import os; os.remove('/tmp/fill')")
    still_answers(km, kc, timeout=30)


def test_workspace_fill_stops_at_the_file_size(capped):
    km, kc, workspace = capped
    code = ("import errno\n"
            "try:\n"
            "    with open('big.bin', 'wb') as f:\n"
            "        for _ in range(64): f.write(b'x' * (1 << 20)); f.flush()\n"
            "    print('no limit')\n"
            "except OSError as e:\n"
            "    print(errno.errorcode[e.errno])\n")
    reply, outputs = execute(kc, code, timeout=60)
    assert stdout_of(outputs).strip() == "EFBIG"
    assert (workspace / "big.bin").stat().st_size <= 8 << 20
    (workspace / "big.bin").unlink()
    still_answers(km, kc, timeout=30)


def test_kill_minus_one_only_kills_the_sandbox(capped):
    km, kc, workspace = capped
    sentinel = os.getpid()
    # A SIGKILL is acted on before its target runs again: had it reached the kernel, no reply
    # would come, and had it reached this test, nothing would read one. The reply is the fence.
    execute(kc, "import os, signal; os.kill(-1, signal.SIGKILL)")
    assert os.getpid() == sentinel and km.is_alive()
    still_answers(km, kc, timeout=30)


def test_worker_crash_keeps_workspace_files(capped):
    km, kc, workspace = capped
    reply, _ = execute(kc, "open('kept.txt', 'w').write('still here')\n"
                           "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert reply["content"]["status"] == "error"
    assert "SIGSEGV" in reply["content"]["evalue"]
    assert "workspace files were kept" in reply["content"]["evalue"]
    assert (workspace / "kept.txt").read_text() == "still here"
    reply, outputs = execute(kc, "print(open('kept.txt').read())")
    assert stdout_of(outputs) == "still here\n"


def test_limits_magic_tightens_memory_for_one_cell(capped):
    km, kc, _ = capped
    reply, _ = execute(kc, "%%limits --memory 64M\nhog = bytearray(160 << 20)")
    content = reply["content"]
    assert content["status"] == "error"
    if content["ename"] == "LimitError":
        # No memory cgroup for this user: refused plainly, never silently unenforced.
        assert "no memory cgroup" in content["evalue"]
    else:
        assert content["ename"] == "MemoryError" and "64.0 MiB" in content["evalue"]
    reply, _ = execute(kc, "hog = bytearray(160 << 20); del hog")
    assert reply["content"]["status"] == "ok", "the session's own cap came back after the cell"
    reply, _ = execute(kc, "%%limits --memory 4G\n1")
    assert reply["content"]["ename"] == "LimitError" and "policy" in reply["content"]["evalue"]


# Opens /dev/null until the cell is refused (or 2000 are open); says the errno, the descriptors
# the process then held, the limit, soft and hard, and whether the cell could raise it again.
HOARD_DESCRIPTORS = """
import errno, os, resource
before = len(os.listdir('/proc/self/fd')) - 1  # the listing's own descriptor is closed again
held = []
try:
    while len(held) < 2000:
        held.append(os.open('/dev/null', os.O_RDONLY))
    stopped = 'none'
except OSError as e:
    stopped = errno.errorcode[e.errno]
peak = before + len(held)
for fd in held:
    os.close(fd)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard + 1, hard + 1))
    raised = 'raised'
except (OSError, ValueError):
    raised = 'kept'
print(stopped, peak, soft, hard, raised)
"""

# The full jail (init forks the worker) and degraded mode (the warden does): one limit, both.
MODES = [pytest.param([], ["--isolation", ISOLATION], id=ISOLATION),
         pytest.param([NO_NAMESPACES], ["--isolation", "degraded"], id="degraded")]


@pytest.mark.parametrize(("wrapper", "mode"), MODES)
def test_a_cell_holds_no_more_descriptors_than_open_files(wrapper, mode):
    workspace = sandbox_writable_dir("belljar-open-files-")
    try:
        with running_kernel(flags=[*mode, "--timeout", "30", "--open-files", "64"],
                            workspace=workspace, wrapper=wrapper) as (km, kc):
            reply, outputs = execute(kc, HOARD_DESCRIPTORS)
            assert reply["content"]["status"] == "ok", (reply["content"], stderr_of(outputs))
            stopped, peak, soft, hard, raised = stdout_of(outputs).split()
            assert stopped == "EMFILE"
            # Every descriptor below the limit was taken, and none above it.
            assert int(peak) == 64
            assert (int(soft), int(hard)) == (64, 64)
            assert raised == "kept"
            still_answers(km, kc, timeout=30)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


@pytest.mark.parametrize(("wrapper", "mode"), MODES)
def test_control_the_default_open_files_hold_far_more(wrapper, mode):
    workspace = sandbox_writable_dir("belljar-open-files-")
    try:
        with running_kernel(flags=[*mode, "--timeout", "30"], workspace=workspace,
                            wrapper=wrapper) as (km, kc):
            reply, outputs = execute(kc, HOARD_DESCRIPTORS)
            assert reply["content"]["status"] == "ok", (reply["content"], stderr_of(outputs))
            stopped, peak, soft, hard, raised = stdout_of(outputs).split()
            # 2000 opened and none refused: the probe itself would have reported an EMFILE.
            assert stopped == "none" and int(peak) > 2000
            assert int(soft) == int(hard) == min(4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
