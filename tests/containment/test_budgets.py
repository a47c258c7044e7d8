"""The supervisor's budgets against a hostile worker (issue 11, items 4 and 6 to 11).

The worker and everything it writes is the attacker: each test reproduces an attack from the
red-team pass from inside the sandbox (forged frames through the worker's own channel, raw
bytes on fd 3, threads left running) and checks the supervisor's bound from outside: bytes
delivered to the client, the supervisor's peak memory and CPU (/proc of the kernel process),
the audit log and the metrics file."""
import json
import os
import pathlib
import subprocess

import psutil
import pytest

from belljar_testing import (
    BELLJAR,
    ISOLATION,
    PYTHON,
    execute,
    of_type,
    running_kernel,
    stderr_of,
    stdout_of,
    wait_for_stream,
)

MiB = 1 << 20
NOTICE_SLACK = 4096  # one "[belljar] ... dropped" notice, and the message's own framing

# The cell's way to speak for the worker: the worker's own frame channel (it stamps the id of
# the request being served, as the honest worker does).
CHANNEL = "from belljar_worker import current as _s\nch = _s.session.channel\n"


def kernel_process(km):
    return psutil.Process(km.provisioner.pid)


def peak_rss(process):
    """VmHWM of the supervisor: the most it ever held, so a spike that is freed still counts."""
    for line in pathlib.Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/%d/status" % process.pid)


def content_bytes(messages):
    return sum(len(json.dumps(m["content"])) for m in messages)


def still_serves(kc):
    reply, outputs = execute(kc, "print('still here')", timeout=60)
    assert reply["content"]["status"] == "ok", reply["content"]
    assert stdout_of(outputs) == "still here\n"


# -- 6. every byte from the worker is charged against the cell's cap ---------------------------

def test_a_forged_limits_frame_cannot_reset_the_output_budget():
    # The red team's attack: 5 MB printed under --output-limit 1M, with a `limits` frame asking
    # for 1M (allowed: not above the policy) after each megabyte; each one used to reset the
    # budget to zero.
    code = CHANNEL + ("import sys\nline = 'y' * 1023 + '\\n'\n"
                      "for _ in range(5):\n"
                      "    for _ in range(1024): sys.stdout.write(line)\n"
                      "    sys.stdout.flush()\n"
                      "    ch.send({'type': 'limits', 'output_limit': 1 << 20})\n")
    with running_kernel(flags=["--output-limit", "1M"]) as (km, kc):
        reply, outputs = execute(kc, code, timeout=120)
        delivered = len(stdout_of(outputs).encode())
        assert delivered <= MiB, f"{delivered} bytes of stdout delivered under --output-limit 1M"
        assert stderr_of(outputs).count("output limit") == 1
        assert reply["metadata"]["belljar"]["output_truncated"] is True
        still_serves(kc)


def test_a_limits_frame_may_lower_the_cap_but_not_forget_what_was_used():
    code = CHANNEL + ("import sys\nsys.stdout.write('a' * 300_000); sys.stdout.flush()\n"
                      "ch.send({'type': 'limits', 'output_limit': 400_000})\n"
                      "sys.stdout.write('b' * 300_000); sys.stdout.flush()\n")
    with running_kernel(flags=["--output-limit", "1M"]) as (km, kc):
        reply, outputs = execute(kc, code, timeout=60)
        text = stdout_of(outputs)
        assert text.count("a") == 300_000
        assert text.count("b") == 100_000, "the lowered cap applies to the whole cell"


def test_a_huge_traceback_is_charged_and_cut():
    # 10 MB in an exception's message (and so in its traceback) under --output-limit 1M.
    with running_kernel(flags=["--output-limit", "1M"]) as (km, kc):
        reply, outputs = execute(kc, "raise ValueError('x' * 10_000_000)", timeout=120)
        errors = of_type(outputs, "error")
        assert len(errors) == 1
        assert content_bytes(errors) <= MiB + NOTICE_SLACK, content_bytes(errors)
        assert len(json.dumps(reply["content"])) <= MiB + NOTICE_SLACK
        content = reply["content"]
        assert content["status"] == "error" and content["ename"] == "ValueError"
        assert "dropped: past the output limit" in content["traceback"][-1]
        still_serves(kc)


def test_a_flood_of_errors_shown_and_caught_ends_at_the_cap():
    # The red team's cell: IPython's showtraceback 500 times under --output-limit 1k. An error's
    # name and the start of its message are always kept, and were never charged: every one was
    # published (583 KB). Then raw frames with no traceback at all, on fd 3.
    with running_kernel(flags=["--output-limit", "1k"]) as (km, kc):
        reply, outputs = execute(kc, "ip = get_ipython()\nfor i in range(500):\n    try:\n"
                                     "        raise ValueError('V' * 1024)\n"
                                     "    except ValueError:\n        ip.showtraceback()\n")
        assert reply["content"]["status"] == "ok", stderr_of(outputs)
        errors = of_type(outputs, "error")
        assert len(errors) == 1 and content_bytes(errors) <= 2 * 1024 + NOTICE_SLACK, (
            len(errors), content_bytes(errors))
        reply, outputs = execute(kc, CHANNEL + (
            "for i in range(2000):\n"
            "    ch.send({'type': 'error', 'ename': 'N' * 256, 'evalue': 'V' * 1024,"
            " 'traceback': [], 'fails_cell': False})\n"))
        assert reply["content"]["status"] == "ok", stderr_of(outputs)
        assert len(of_type(outputs, "error")) == 1, content_bytes(of_type(outputs, "error"))
        still_serves(kc)


def test_huge_user_expressions_are_charged_and_replaced():
    # 20 MB asked back through user_expressions (what agents and read_file use).
    with running_kernel(flags=["--output-limit", "1M"]) as (km, kc):
        reply, _ = execute(kc, "big = 'z' * 20_000_000",
                           user_expressions={"big": "big", "small": "len(big)"}, timeout=120)
        assert len(json.dumps(reply["content"])) <= MiB + NOTICE_SLACK
        expressions = reply["content"]["user_expressions"]
        assert expressions["big"]["status"] == "error"
        assert expressions["big"]["ename"] == "OutputLimitError"
        assert expressions["small"]["data"]["text/plain"] == "20000000"


def test_user_expressions_answer_only_the_names_asked():
    code = CHANNEL + ("ch.send({'type': 'done', 'status': 'ok', 'payload': [],\n"
                      "         'user_expressions': {'asked': {'status': 'ok', 'data': {'text/plain': '1'},"
                      " 'metadata': {}}, **{f'extra{i}': {'status': 'ok', 'data': {'text/plain': 'x' * 1000},"
                      " 'metadata': {}} for i in range(5000)}}})\n")
    with running_kernel(flags=["--output-limit", "1M"]) as (km, kc):
        reply, _ = execute(kc, code, user_expressions={"asked": "1"}, timeout=60)
        assert set(reply["content"]["user_expressions"]) == {"asked"}


def test_a_huge_completion_reply_is_cut_to_the_cap():
    # The session's own completer replaced by one that answers with 20 MB of matches.
    code = CHANNEL + ("def flood(msg):\n"
                      "    ch.send({'type': 'complete_reply', 'id': msg['id'], 'cursor_start': 0,\n"
                      "             'cursor_end': 0, 'metadata': {'m': 'q' * 5_000_000},\n"
                      "             'matches': ['w' * 1000] * 20_000})\n"
                      "_s.session._handlers['complete'] = flood\n")
    with running_kernel(flags=["--output-limit", "1M"]) as (km, kc):
        reply, _ = execute(kc, code)
        assert reply["content"]["status"] == "ok"
        msg_id = kc.complete("w", 1)
        answer = kc.get_shell_msg(timeout=60)
        while answer["parent_header"].get("msg_id") != msg_id:
            answer = kc.get_shell_msg(timeout=60)
        assert answer["msg_type"] == "complete_reply"
        assert len(json.dumps(answer["content"])) <= MiB + NOTICE_SLACK
        assert 0 < len(answer["content"]["matches"]) < 20_000


# -- 7. bounded queues and bounded parsing -----------------------------------------------------

def test_requests_the_worker_never_reads_the_answers_to_are_bounded():
    # The red team's attack: audit_request frames sent in a loop and their replies never read;
    # each reply (the last cells' records) queued in the supervisor without bound.
    with running_kernel(flags=["--output-limit", "1M"]) as (km, kc):
        for i in range(60):
            execute(kc, f"v{i} = {i}")
        process = kernel_process(km)
        before = peak_rss(process)
        code = CHANNEL + ("import threading\n"
                          "for _ in range(4_000):\n"
                          "    ch.send({'type': 'audit_request', 'last': 1000})\n"
                          "threading.Event().wait()  # until the supervisor ends the worker\n")
        reply, _ = execute(kc, code, timeout=120)
        grown = peak_rss(process) - before
        assert grown < 48 * MiB, f"the supervisor grew by {grown / MiB:.0f} MiB"
        assert reply["content"]["status"] == "error", "the worker is at fault and restarted"
        assert reply["content"]["ename"] == "WorkerDied"
        still_serves(kc)


def test_a_frame_of_millions_of_empty_objects_is_refused_before_it_is_built():
    # One 16 MiB frame of `{}`: within the frame-size cap, ~600 MiB once parsed.
    code = ("import os, struct, sys\nsys.stdout.flush()\n"
            "body = b'{\"type\": \"display\", \"metadata\": {}, \"transient\": {}, \"data\": ['"
            " + b'{},' * ((16 << 20) // 3) + b'{}]}'\n"
            "os.write(3, struct.pack('>I', len(body)) + body)\n"
            "import threading; threading.Event().wait()  # until the supervisor ends the worker\n")
    with running_kernel() as (km, kc):
        process = kernel_process(km)
        before = peak_rss(process)
        reply, _ = execute(kc, code, timeout=120)
        grown = peak_rss(process) - before
        assert grown < 80 * MiB, f"the supervisor grew by {grown / MiB:.0f} MiB"
        assert reply["content"]["ename"] == "WorkerDied"
        still_serves(kc)


# -- 8. EOF on the frame socket is handled once --------------------------------------------------



def test_a_half_closed_frame_socket_does_not_spin_the_supervisor(tmp_path):
    # The worker shuts down its sending side of fd 3 once a request is answered and stays alive,
    # reading: the supervisor used to poll the EOF at 100% CPU forever. Now it stops polling the
    # socket and ends the worker past a grace period (worker_link.cpp). The half-close comes
    # from the worker's own is_complete handler, right after its reply: idle, between requests.
    code = ("import os, socket\n"
            "from belljar_worker import current as _s\n"
            "half_closed = socket.socket(fileno=os.dup(3))\n"
            "answer = _s.session._handlers['is_complete']\n"
            "def answer_then_half_close(msg):\n"
            "    answer(msg)\n"
            "    half_closed.shutdown(socket.SHUT_WR)\n"
            "    os.write(1, b'half-closed\\n')\n"
            "_s.session._handlers['is_complete'] = answer_then_half_close\n")
    audit = tmp_path / "audit.jsonl"
    with running_kernel(flags=["--audit-log", str(audit)]) as (km, kc):
        process = kernel_process(km)
        reply, _ = execute(kc, code)
        assert reply["content"]["status"] == "ok"
        start = process.cpu_times()
        asked = kc.is_complete("x = 1")
        answer = kc.get_shell_msg(timeout=60)
        assert answer["parent_header"]["msg_id"] == asked and answer["msg_type"] == "is_complete_reply"
        # Written after the shutdown: the pass of the reactor that reads it sees the EOF too.
        assert wait_for_stream(kc, None, "half-closed") is not None, "the worker never half-closed fd 3"
        # So this cell is never sent to the worker: it ends when the grace period does, with
        # the worker the supervisor ended. The CPU between spans the whole grace period.
        fence, _ = execute(kc, "print('after')")
        end = process.cpu_times()
        assert fence["content"]["status"] == "error" and fence["content"]["ename"] == "WorkerDied"
        faults = [json.loads(line) for line in audit.read_text().splitlines()
                  if json.loads(line)["event"] == "worker_fault"]  # recorded before the kill
        assert [f["fault"] for f in faults] == ["it closed its frame socket and kept running"]
        spent = (end.user + end.system) - (start.user + start.system)
        assert spent < 0.3, f"the supervisor spent {spent:.2f} s of CPU while the socket was half-closed"
        still_serves(kc)


# -- 10. frames are tied to the request they answer -----------------------------------------------

def test_a_forged_done_does_not_carry_a_cells_output_into_the_next_cell():
    # Cell 1 ends itself early with a forged `done`; cell 2 is sent on its reply. Once cell 2's
    # execute reaches the worker (fd 3 readable: the supervisor now serves cell 2), cell 1's
    # thread displays while cell 1's code still runs; cell 2 must show none of it. Those frames
    # come before cell 2's own `done` on the same socket, so its reply is their fence.
    code = CHANNEL + ("import select, threading\n"
                      "def later():\n"
                      "    select.select([3], [], [])\n"
                      "    for i in range(15):\n"
                      "        display('from-cell-1 %d' % i)\n"
                      "ch.send({'type': 'done', 'status': 'ok', 'user_expressions': {}, 'payload': []})\n"
                      "thread = threading.Thread(target=later, daemon=True)\n"
                      "thread.start()\n"
                      "thread.join()\n")
    with running_kernel() as (km, kc):
        first, _ = execute(kc, code)
        second, outputs = execute(kc, "print('cell 2')")
        shown = json.dumps([m["content"] for m in outputs])
        assert "from-cell-1" not in shown, "cell 1's display was attributed to cell 2"
        assert stdout_of(outputs) == "cell 2\n"
        assert second["content"]["status"] == "ok"
        still_serves(kc)


# -- 4. the supervisor's own files are out of the sandbox's reach --------------------------------

def run_once(args, code, cwd, timeout=180):
    """`belljar run`: one cell in a fresh sandbox, the kernel's stderr captured."""
    return subprocess.run([BELLJAR, "run", "--python", PYTHON, "--isolation", ISOLATION, *map(str, args),
                           "-c", code], capture_output=True, text=True, timeout=timeout, cwd=cwd)


@pytest.fixture
def host(tmp_path):
    """A workspace, a directory only the host writes, and a host file the attack wants."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.chmod(workspace, 0o777)
    logs = tmp_path / "logs"
    logs.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    return workspace, logs, victim


@pytest.mark.parametrize("flag", ["--audit-log", "--metrics"])
def test_log_and_metrics_paths_the_sandbox_can_write_are_refused(host, flag):
    workspace, logs, _ = host
    (logs / "into-ws").symlink_to(workspace)  # a directory that resolves into the workspace
    for path in (workspace / "file", workspace / "sub" / ".." / "file", logs / "into-ws" / "file"):
        done = run_once(["--workspace", workspace, flag, path], "print('ran')", cwd=workspace)
        assert done.returncode == 2, (path, done.returncode, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and flag in lines[0] and "writable from inside the sandbox" in lines[0], lines
        assert "ran" not in done.stdout
        assert not (workspace / "file").exists()


def test_a_symlink_at_the_audit_log_path_is_refused(host):
    workspace, logs, victim = host
    (logs / "audit.jsonl").symlink_to(victim)
    done = run_once(["--workspace", workspace, "--audit-log", logs / "audit.jsonl"], "print('ran')",
                    cwd=workspace)
    assert done.returncode == 2, done.stderr
    assert "--audit-log" in done.stderr and "symlink" in done.stderr
    assert victim.read_text() == "precious\n"


def test_symlinks_at_the_metrics_temporary_names_are_never_written_through(host):
    # The red team planted a symlink at `<metrics>.tmp.<kernel pid>` (the old, predictable
    # temporary name): the next rewrite went through it into a host file.
    workspace, logs, victim = host
    metrics = logs / "metrics.prom"
    with running_kernel(flags=["--metrics", str(metrics)], workspace=str(workspace)) as (km, kc):
        pid = km.provisioner.pid
        for name in (f"metrics.prom.tmp.{pid}", f".metrics.prom.tmp.{pid}"):
            (logs / name).symlink_to(victim)
        for _ in range(3):
            execute(kc, "1")  # each cell's end rewrites the file before its reply (cell_records.cpp)
        assert victim.read_text() == "precious\n"
        assert not metrics.is_symlink()
        assert 'belljar_cells_total{status="ok"} 3' in metrics.read_text()


# -- 9. what the worker can trigger is rate-limited and aggregated -------------------------------

def test_a_flood_of_unknown_and_stale_frames_logs_a_bounded_number_of_lines(host):
    workspace, _, _ = host
    code = CHANNEL + ("for i in range(100_000):\n"
                      "    ch.send({'type': 'bogus-%d' % (i % 7)})\n"
                      "    ch.send({'type': 'display', 'id': 'stale', 'data': {'text/plain': 'x'},"
                      " 'metadata': {}, 'transient': {}})\n"
                      "print('sent')\n")
    done = run_once(["--workspace", workspace, "--timeout", "300"], code, cwd=workspace, timeout=400)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "sent" in done.stdout
    logged = [line for line in done.stderr.splitlines() if line.startswith("[belljar]")]
    assert len(logged) <= 40, f"{len(logged)} log lines for 200k bad frames"
    assert any("unknown frame type" in line for line in logged)


def egress_flood(workspace, logs, requests):
    """Runs `requests` denied proxy requests from one cell; returns (the audit records, the
    metrics text, how many 403s the cell saw)."""
    audit, metrics = logs / "audit.jsonl", logs / "metrics.prom"
    code = ("import socket\ndenied = 0\n"
            f"for _ in range({requests}):\n"
            "    s = socket.create_connection(('127.0.0.1', 3128))\n"
            "    s.sendall(b'GET http://flood.example.com/ HTTP/1.1\\r\\nHost: flood.example.com\\r\\n\\r\\n')\n"
            "    denied += s.recv(64).startswith(b'HTTP/1.1 403')\n"
            "    s.close()\n"
            "print('denied', denied)\n")
    # The allowlist names a loopback stand-in only so that the proxy exists.
    done = run_once(["--workspace", workspace, "--timeout", "600", "--allow-net", "127.0.0.1:9",
                     "--audit-log", audit, "--metrics", metrics], code, cwd=workspace, timeout=700)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = int(done.stdout.split("denied")[1].split()[0])
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    return records, metrics.read_text(), seen, audit.stat().st_size


def test_denied_egress_in_a_loop_is_aggregated_with_exact_totals(host):
    workspace, logs, _ = host
    requests = 30_000
    records, metrics, seen, size = egress_flood(workspace, logs, requests)
    assert seen == requests
    full = [r for r in records if r["event"] == "egress"]
    summaries = [r for r in records if r["event"] == "egress_summary"]
    assert size < 256 * 1024, f"the audit log grew to {size} bytes ({len(full)} egress records)"
    assert len(full) <= 200 * len(summaries), (len(full), len(summaries))
    counted = sum(entry["count"] for s in summaries for entry in s["by_destination"]
                  if entry["destination"] == "flood.example.com:80" and entry["decision"] == "denied")
    not_queued = sum(s["not_queued"] for s in summaries)
    assert counted + not_queued == requests, (counted, not_queued)
    assert sum(s["decisions"] for s in summaries) == counted
    assert f'belljar_egress_requests_total{{decision="denied"}} {counted}' in metrics


def test_past_the_refusal_budget_denied_connections_are_answered_unread_and_counted(host):
    # Each refusal cost the supervisor more CPU than the connection cost the cell (20,000 denied
    # CONNECTs: 1.7 times). Past a burst the proxy answers unread, so most of these cost it a
    # send and a close, and only their count reaches the log and the metrics.
    workspace, logs, _ = host
    requests = 3000
    records, metrics, seen, _ = egress_flood(workspace, logs, requests)
    assert seen == requests  # every one still got its 403
    summaries = [r for r in records if r["event"] == "egress_summary"]
    full = [r for r in records if r["event"] == "egress"]
    counted = sum(entry["count"] for s in summaries for entry in s["by_destination"]
                  if entry["destination"] == "flood.example.com:80" and entry["decision"] == "denied")
    unread = sum(s["refused_unread"] for s in summaries)
    not_queued = sum(s["not_queued"] for s in summaries)
    assert unread > 0 and unread <= not_queued, (unread, not_queued)
    assert counted + not_queued == requests, (counted, not_queued)
    assert len(full) <= counted < requests - unread + 1
    assert f"belljar_egress_refused_unread_total {unread}\n" in metrics


# -- 11. CPU between cells is charged and enforced -----------------------------------------------

def test_a_daemon_thread_spinning_between_cells_is_stopped_at_the_cpu_limit(tmp_path):
    # The red team's attack, scaled down: a thread left spinning after its cell said ok.
    audit = tmp_path / "audit.jsonl"
    with running_kernel(flags=["--cpu", "3", "--timeout", "30", "--audit-log", str(audit)]) as (km, kc):
        reply, _ = execute(kc, "kept = 1\nimport threading\n"
                               "def spin():\n"
                               "    while True: pass\n"
                               "threading.Thread(target=spin, daemon=True).start()")
        assert reply["content"]["status"] == "ok"
        notice = wait_for_stream(kc, reply["parent_header"]["msg_id"], "while no cell ran", timeout=30)
        assert notice is not None, "no notice: the background thread spins unbounded"
        assert "--cpu" in notice and "restarted" in notice
        reply, outputs = execute(kc, "print('next')")
        content = reply["content"]
        assert content["status"] == "error" and content["ename"] == "TimeoutError", content
        assert "while no cell ran" in content["evalue"] and "did not run" in content["evalue"]
        assert stdout_of(outputs) == ""
        assert reply["metadata"]["belljar"]["limit_hit"] == "cpu"
        reply, outputs = execute(kc, "print('kept' in globals())")
        assert reply["content"]["status"] == "ok" and stdout_of(outputs) == "False\n"
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    stopped = [r for r in records if r["event"] == "background_cpu"]
    # Stopped by --cpu 3, once past it, and before it had taken much more: CPU the sandbox
    # spent (a containment bound, not a duration: the sampler looks once a second of wall time,
    # so at most about a second of CPU more, however loaded the machine).
    assert len(stopped) == 1 and stopped[0]["limit_seconds"] == 3, stopped
    assert 3 <= stopped[0]["cpu_seconds"] < 5, stopped


def test_cpu_spent_between_cells_is_charged_to_the_next_cell():
    with running_kernel(flags=["--cpu", "10", "--timeout", "30"]) as (km, kc):
        reply, _ = execute(kc, "import threading, time\n"
                               "def burn():\n"
                               "    while time.thread_time() < 1.0: pass\n"
                               "    print('burnt', flush=True)\n"
                               "threading.Thread(target=burn, daemon=True).start()")
        assert reply["content"]["status"] == "ok"
        # Printed between cells, so parented to the last one: the CPU is spent before cell 2.
        assert wait_for_stream(kc, reply["parent_header"]["msg_id"], "burnt") is not None
        reply, _ = execute(kc, "pass")
        facts = reply["metadata"]["belljar"]
        assert facts["background_cpu_ms"] >= 800, facts
        assert facts["cpu_ms"] >= facts["background_cpu_ms"]
