"""The Jupyter protocol as clients see it, through real jupyter_client against build/belljar."""
import os
import queue
import select
import shutil
import signal
import socket
import subprocess
import tempfile

import pytest
from jupyter_client.manager import KernelManager
from jupyter_client.session import Session

from belljar_testing import (
    PYTHON,
    TIMEOUT,
    collect,
    execute,
    install_kernelspec,
    of_type,
    ready_client,
    running_kernel,
    sandbox_writable_dir,
    shell_read_fence,
    stderr_of,
    stdout_of,
    wait_for_stream,
)


@pytest.fixture(scope="module")
def kernel():
    with running_kernel(flags=["--timeout", "20"]) as (km, kc):
        yield km, kc


def test_a_kernel_on_the_ipc_transport_serves_through_its_unix_socket_doors(tmp_path):
    """The connection file may name unix sockets ("transport": "ipc", "ip": a path prefix):
    the gate's doors are then unix sockets at PREFIX-PORT."""
    prefix = tmp_path / "kernel-ipc"
    with running_kernel(manager_args={"transport": "ipc", "ip": str(prefix)}) as (km, kc):
        info = km.get_connection_info()
        assert info["transport"] == "ipc"
        doors = sorted(tmp_path.glob("kernel-ipc-*"))
        assert len(doors) == 5 and all(door.is_socket() for door in doors), doors
        reply, outputs = execute(kc, "print(6 * 7)")
        assert reply["content"]["status"] == "ok"
        assert stdout_of(outputs) == "42\n"


def test_a_port_held_for_a_moment_is_tried_again():
    """jupyter_client picks a kernel's ports by binding and closing probe sockets; a manager in
    another process may hold one just as belljar, quick to start, binds it (the jupyter_client
    peers' suite: test_start_parallel_process_kernels failed about one run in thirty). belljar
    tries a port the connection file names again for up to a second, saying so. Before, it
    exited at once: "cannot listen on ...: Address already in use"."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="belljar-spec-") as prefix:
        spec_dir = install_kernelspec(prefix)
        # cache_ports=False: the manager keeps the port it is given (else it picks them all).
        km = KernelManager(kernel_name=spec_dir.name, shell_port=port, cache_ports=False)
        km.kernel_spec_manager.kernel_dirs.insert(0, str(spec_dir.parent))
        workspace = sandbox_writable_dir("belljar-ws-")
        km.start_kernel(cwd=workspace, stderr=subprocess.PIPE)
        try:
            stderr = km.provisioner.process.stderr
            assert select.select([stderr], [], [], TIMEOUT)[0], "the kernel said nothing"
            line = stderr.readline().decode()
            assert line == f"belljar: tcp://127.0.0.1:{port} is in use; trying it again for " \
                           "up to 1 s\n", line
            holder.close()  # the other process's probe is gone
            with ready_client(km) as kc:
                reply, outputs = execute(kc, "print('bound')")
                assert stdout_of(outputs) == "bound\n"
                assert km.get_connection_info()["shell_port"] == port
        finally:
            holder.close()
            if km.has_kernel:
                km.shutdown_kernel(now=True)
            shutil.rmtree(workspace, ignore_errors=True)


def test_kernel_info_reports_the_workers_python(kernel):
    _, kc = kernel
    kc.kernel_info()
    reply = kc.get_shell_msg(timeout=30)
    content = reply["content"]
    real = subprocess.run([PYTHON, "-c", "import platform;print(platform.python_version())"],
                          capture_output=True, text=True).stdout.strip()
    assert content["status"] == "ok"
    assert content["implementation"] == "belljar"
    assert content["protocol_version"].startswith("5.")
    assert content["language_info"]["name"] == "python"
    assert content["language_info"]["version"] == real


def test_state_persists_and_result_is_rich(kernel):
    _, kc = kernel
    reply, _ = execute(kc, "x = 40")
    assert reply["content"]["status"] == "ok"
    reply, outputs = execute(kc, "x + 2")
    results = of_type(outputs, "execute_result")
    assert results and results[0]["content"]["data"]["text/plain"] == "42"
    assert results[0]["content"]["execution_count"] == reply["content"]["execution_count"]
    assert of_type(outputs, "execute_input")[0]["content"]["code"] == "x + 2"


def test_busy_and_idle_surround_every_request(kernel):
    _, kc = kernel
    msg_id = kc.execute("1")
    states = []
    while True:
        msg = kc.get_iopub_msg(timeout=30)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status":
            states.append(msg["content"]["execution_state"])
            if states[-1] == "idle":
                break
    assert states == ["busy", "idle"]


def test_print_subprocess_and_c_level_output_are_captured_in_order(kernel):
    _, kc = kernel
    code = ("import os, sys, ctypes\n"
            "print('one', flush=True)\n"
            "os.system('echo two')\n"
            "ctypes.CDLL(None).write(1, b'three\\n', 6)\n"
            "print('four')\n"
            "print('err', file=sys.stderr)\n")
    reply, outputs = execute(kc, code)
    assert reply["content"]["status"] == "ok"
    assert stdout_of(outputs).split() == ["one", "two", "three", "four"]
    assert "err" in stderr_of(outputs)


def test_error_has_ename_evalue_traceback(kernel):
    _, kc = kernel
    reply, outputs = execute(kc, "1/0")
    content = reply["content"]
    assert content["status"] == "error"
    assert content["ename"] == "ZeroDivisionError"
    assert "division" in content["evalue"]
    errors = of_type(outputs, "error")
    assert errors and errors[0]["content"]["traceback"]


def test_stop_on_error_aborts_queued_cells(kernel):
    _, kc = kernel
    # The first cell fails only once the second is queued behind it: it waits on input() until
    # the kernel has read the second execute.
    first = kc.execute("input('go? '); raise ValueError('boom')", allow_stdin=True)
    assert kc.get_stdin_msg(timeout=30)["msg_type"] == "input_request"
    second = kc.execute("print('must not run')")
    shell_read_fence(kc)
    kc.input("go")
    replies = {}
    while len(replies) < 2:
        msg = kc.get_shell_msg(timeout=30)
        replies[msg["parent_header"]["msg_id"]] = msg
    assert replies[first]["content"]["status"] == "error"
    assert replies[second]["content"]["status"] == "aborted"
    # Every execute_reply carries the count (the spec's shape; ipykernel's suite checks it):
    # an aborted cell takes none, so it is the failed cell's.
    count = replies[first]["content"]["execution_count"]
    assert replies[second]["content"]["execution_count"] == count
    reply, outputs = execute(kc, "print('after')")
    assert reply["content"]["status"] == "ok" and stdout_of(outputs) == "after\n"


def test_connect_request_is_answered_with_the_ports_bound(kernel):
    """connect_request, deprecated since protocol 5.1 but still sent by older clients and asked
    by ipykernel's own suite, gets the ports the kernel serves on."""
    km, kc = kernel
    msg = kc.session.msg("connect_request", {})
    kc.shell_channel.send(msg)
    reply = kc.get_shell_msg(timeout=30)
    assert reply["parent_header"]["msg_id"] == msg["header"]["msg_id"]
    assert reply["msg_type"] == "connect_reply"
    ports = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
    assert reply["content"] == {port: km.get_connection_info()[port] for port in ports}


def test_display_update_and_clear_output(kernel):
    _, kc = kernel
    code = ("from IPython.display import display, clear_output\n"
            "h = display({'text/plain': 'first', 'text/html': '<b>first</b>'}, raw=True, display_id=True)\n"
            "h.update({'text/plain': 'second'}, raw=True)\n"
            "clear_output(wait=True)\n")
    reply, outputs = execute(kc, code)
    assert reply["content"]["status"] == "ok", reply["content"]
    shown = of_type(outputs, "display_data")
    updated = of_type(outputs, "update_display_data")
    assert shown[0]["content"]["data"]["text/html"] == "<b>first</b>"
    display_id = shown[0]["content"]["transient"]["display_id"]
    assert updated[0]["content"]["transient"]["display_id"] == display_id
    assert updated[0]["content"]["data"]["text/plain"] == "second"
    assert of_type(outputs, "clear_output")[0]["content"]["wait"] is True


def test_user_expressions_are_evaluated(kernel):
    _, kc = kernel
    reply, _ = execute(kc, "y = 6", user_expressions={"double": "y * 2", "bad": "nope"})
    expressions = reply["content"]["user_expressions"]
    assert expressions["double"]["data"]["text/plain"] == "12"
    assert expressions["bad"]["status"] == "error"


def test_input_goes_through_the_stdin_channel(kernel):
    _, kc = kernel
    msg_id = kc.execute("name = input('who? ')\nprint('hello', name)", allow_stdin=True)
    request = kc.get_stdin_msg(timeout=30)
    assert request["msg_type"] == "input_request"
    assert request["content"]["prompt"] == "who? "
    kc.input("belljar")
    reply, outputs = collect(kc, msg_id)
    assert reply["content"]["status"] == "ok"
    assert "hello belljar" in stdout_of(outputs)


def test_input_without_stdin_raises_a_clear_error(kernel):
    _, kc = kernel
    reply, _ = execute(kc, "input()", allow_stdin=False)
    assert reply["content"]["status"] == "error"
    assert "input" in reply["content"]["evalue"].lower()


def test_complete_inspect_is_complete(kernel):
    _, kc = kernel
    execute(kc, "import os\nbelljar_value = 1")
    kc.complete("belljar_va", 10)
    reply = kc.get_shell_msg(timeout=30)["content"]
    assert "belljar_value" in reply["matches"]
    assert reply["cursor_start"] == 0 and reply["cursor_end"] == 10
    kc.inspect("os.path.join", 12)
    reply = kc.get_shell_msg(timeout=30)["content"]
    assert reply["found"] and "join" in reply["data"]["text/plain"]
    kc.is_complete("for i in range(3):")
    assert kc.get_shell_msg(timeout=30)["content"]["status"] == "incomplete"
    kc.is_complete("x = 1")
    assert kc.get_shell_msg(timeout=30)["content"]["status"] == "complete"


def test_comm_info_answers(kernel):
    _, kc = kernel
    kc.comm_info()
    reply = kc.get_shell_msg(timeout=30)
    assert reply["msg_type"] == "comm_info_reply" and reply["content"]["status"] == "ok"


def test_interrupt_request_stops_a_busy_loop_and_keeps_state(kernel):
    km, kc = kernel
    execute(kc, "kept = 'yes'")
    msg_id = kc.execute("print('busy', flush=True)\nwhile True: pass")
    assert wait_for_stream(kc, msg_id, "busy"), "the cell never started"
    km.interrupt_kernel()
    reply, _ = collect(kc, msg_id, timeout=30)
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    reply, outputs = execute(kc, "print(kept)")
    assert stdout_of(outputs) == "yes\n"


def test_worker_crash_is_reported_and_history_survives(kernel):
    _, kc = kernel
    execute(kc, "marker_before_crash = 1")
    reply, _ = execute(kc, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert reply["content"]["status"] == "error"
    assert "SIGSEGV" in reply["content"]["evalue"]
    reply, _ = execute(kc, "'marker_before_crash' in dir()", user_expressions={"alive": "1+1"})
    assert reply["content"]["status"] == "ok"
    assert reply["content"]["user_expressions"]["alive"]["data"]["text/plain"] == "2"
    kc.history(hist_access_type="search", pattern="marker_before_crash*")
    history = kc.get_shell_msg(timeout=30)["content"]["history"]
    assert any("marker_before_crash = 1" in entry[2] for entry in history)
    reply, _ = execute(kc, "import os; os._exit(3)")
    assert "exit status 3" in reply["content"]["evalue"]


def test_history_tail_and_range(kernel):
    _, kc = kernel
    execute(kc, "history_probe = 'tail'")
    kc.history(hist_access_type="tail", n=1)
    tail = kc.get_shell_msg(timeout=30)["content"]["history"]
    assert tail[-1][2] == "history_probe = 'tail'"
    kc.history(hist_access_type="range", session=0, start=1, stop=3)
    ranged = kc.get_shell_msg(timeout=30)["content"]["history"]
    assert [entry[1] for entry in ranged] == [1, 2]


def _history(kc, **request):
    msg_id = kc.history(**request)
    reply = kc.get_shell_msg(timeout=30)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=30)
    return reply["content"]["history"]


def test_history_size_keeps_the_newest_cells_for_tail_range_and_search():
    # A long session's history is bounded: past --history-size cells, the oldest are dropped
    # and every kind of request answers from the newest ones, at their own line numbers.
    with running_kernel(flags=["--history-size", "3"]) as (_, kc):
        for n in range(1, 6):
            reply, _ = execute(kc, "cell_%d = %d" % (n, n))
            assert reply["content"]["execution_count"] == n
        newest = [[1, 3, "cell_3 = 3"], [1, 4, "cell_4 = 4"], [1, 5, "cell_5 = 5"]]
        assert _history(kc, hist_access_type="tail", n=10) == newest
        assert _history(kc, hist_access_type="range", session=0, start=1, stop=0) == newest
        assert _history(kc, hist_access_type="range", session=0, start=2, stop=5) == newest[:2]
        assert _history(kc, hist_access_type="search", pattern="cell_*") == newest
        assert _history(kc, hist_access_type="search", pattern="cell_1*") == []
        execute(kc, "40 + 2")
        assert _history(kc, hist_access_type="tail", n=1, output=True) == [[1, 6, ["40 + 2", "42"]]]


def _raw_send(kc, msg_type, content, key):
    session = Session(key=key)
    msg = session.msg(msg_type, content)
    session.send(kc.shell_channel.socket, msg)
    return msg["header"]["msg_id"]


def test_unsigned_wrongly_signed_and_replayed_messages_get_no_reply(kernel):
    _, kc = kernel
    wrong = _raw_send(kc, "execute_request", {"code": "print('forged')", "silent": False}, b"wrong-key")
    unsigned = _raw_send(kc, "execute_request", {"code": "print('unsigned')", "silent": False}, b"")
    # Replay: capture the exact frames of a valid request and send them twice.
    session = kc.session
    msg = session.msg("execute_request", {"code": "replayed = globals().get('replayed', 0) + 1",
                                          "silent": False, "store_history": True,
                                          "user_expressions": {}, "allow_stdin": False})
    frames = session.serialize(msg)
    kc.shell_channel.socket.send_multipart(frames)
    # The kernel answers shell requests in order: a reply to either forged request would come
    # before this one.
    first = kc.get_shell_msg(timeout=30)
    assert first["parent_header"]["msg_id"] not in (wrong, unsigned), "a forged request was run"
    assert first["parent_header"]["msg_id"] == msg["header"]["msg_id"]
    kc.shell_channel.socket.send_multipart(frames)
    kc.shell_channel.socket.send_multipart([b"garbage"])
    kc.shell_channel.socket.send_multipart([b"<IDS|MSG>", b"sig", b"{", b"{}", b"{}", b"{}"])
    reply, _ = execute(kc, "replayed", user_expressions={"n": "replayed"})
    assert reply["content"]["user_expressions"]["n"]["data"]["text/plain"] == "1"
    # Whatever else came on shell since is still queued: none of it answers a forged request.
    leftovers = []
    while True:
        try:
            leftovers.append(kc.get_shell_msg(timeout=0))
        except queue.Empty:
            break
    assert not [m for m in leftovers if m["parent_header"].get("msg_id") in (wrong, unsigned)]


def test_interrupt_by_signal_reaches_the_cell():
    with running_kernel() as (km, kc):
        msg_id = kc.execute("import time\nprint('busy', flush=True)\nwhile True: time.sleep(0.01)")
        assert wait_for_stream(kc, msg_id, "busy"), "the cell never started"
        os.kill(km.provisioner.process.pid, signal.SIGINT)
        reply, _ = collect(kc, msg_id, timeout=30)
        assert reply["content"]["ename"] == "KeyboardInterrupt"


def test_timeout_interrupts_and_keeps_variables():
    with running_kernel(flags=["--timeout", "2"]) as (km, kc):
        execute(kc, "survivor = 7")
        reply, _ = execute(kc, "while True: pass")  # no reply within TIMEOUT fails the test
        assert reply["content"]["status"] == "error"
        assert "--timeout" in reply["content"]["evalue"] and "kept" in reply["content"]["evalue"]
        reply, _ = execute(kc, "survivor", user_expressions={"v": "survivor"})
        assert reply["content"]["user_expressions"]["v"]["data"]["text/plain"] == "7"


def test_code_ignoring_the_interrupt_is_killed_and_the_session_restarts():
    with running_kernel(flags=["--timeout", "1"]) as (km, kc):
        code = ("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                "while True: time.sleep(0.05)")
        reply, _ = execute(kc, code)
        assert reply["content"]["status"] == "error"
        assert "variables were lost" in reply["content"]["evalue"]
        reply, outputs = execute(kc, "print('fresh')")
        assert stdout_of(outputs) == "fresh\n"


def test_shutdown_ends_the_process():
    with running_kernel() as (km, kc):
        kc.shutdown()
        kc.get_control_msg(timeout=30)
        km.provisioner.process.wait(timeout=10)  # raises if it is still running then
        assert not km.is_alive()


def test_text_printed_after_a_frame_is_never_published_before_it(kernel):
    # Each print follows its clear_output: a stream message carrying i must come after the
    # (i+1)-th clear_output and before the next one. The supervisor used to drain the pipes
    # between reading a frame and handling it, catching text written just after the frame.
    _, kc = kernel
    code = ("from IPython.display import clear_output\n"
            "for i in range(400):\n"
            "    clear_output(wait=True)\n"
            "    print(i)\n")
    for run in range(5):
        reply, outputs = execute(kc, code)
        assert reply["content"]["status"] == "ok"
        clears = 0
        for message in outputs:
            if message["msg_type"] == "clear_output":
                clears += 1
            elif message["msg_type"] == "stream":
                numbers = {int(n) for n in message["content"]["text"].split()}
                assert numbers == {clears - 1}, (
                    f"run {run}: stream {sorted(numbers)} published after {clears} clear_output")
        assert clears == 400


def test_limits_magic_values_follow_the_command_lines_grammar(kernel):
    # The supervisor parses %%limits values with the flags' own parser: the same words are
    # accepted and refused, and a refusal names the option and the value.
    _, kc = kernel
    reply, outputs = execute(kc, "%%limits --memory lots\nprint('never')")
    assert reply["content"]["ename"] == "LimitError"
    assert "--memory lots: expected a size like 512M or 1G" in reply["content"]["evalue"]
    assert "never" not in stdout_of(outputs)
    reply, outputs = execute(kc, "%%limits --timeout 1ms\nprint('never')")
    assert reply["content"]["ename"] == "LimitError"
    assert "--timeout 1ms: out of range" in reply["content"]["evalue"]
    reply, outputs = execute(kc, "%%limits --timeout 1.5s --output-limit 1MiB\nprint('ran')")
    assert reply["content"]["status"] == "ok" and stdout_of(outputs) == "ran\n"
    limits = reply["metadata"]["belljar"]["limits"]
    assert limits["timeout_seconds"] <= 1.5 + 1 and limits["output_limit_bytes"] == 1 << 20
