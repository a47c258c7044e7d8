"""Where the audit log goes (kernel/observability/audit_destination.hpp). Without --audit-log each
kernel writes a file of its own in the user's state directory, so its stderr (the Jupyter
server's terminal, which clients such as nbclient read expecting it quiet) carries nothing per
cell; `--audit-log -` keeps the records on stderr. A state directory the sandbox could write (in
the workspace, or led there by a symlink), or none at all (HOME unset, missing, not a folder),
sends them to stderr with one warning saying why: never lost, never led elsewhere by a cell.
`belljar run` writes none unless asked; `belljar mcp` writes its file as a kernel does."""
import contextlib
import json
import os
import pathlib
import shutil
import stat
import subprocess
import tempfile

import pytest

from belljar_testing import (
    BELLJAR,
    ISOLATION,
    PYTHON,
    execute,
    kernel_info,
    mcp_session_lines,
    running_kernel,
    sandbox_writable_dir,
    stdout_of,
)

WARNING = "[belljar] warning: the audit log goes to stderr, not to the state directory: "
FIX = (". --audit-log FILE (outside the workspace) names a file; --audit-log - keeps stderr "
       "without this warning")
CELLS = ["x = 6 * 7", "print(x)", "raise ValueError('no')"]


@pytest.fixture
def place():
    """A folder for homes and state directories, off /tmp (which a degraded sandbox can write)."""
    root = pathlib.Path(tempfile.mkdtemp(prefix="belljar-audit-place-", dir="/var/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def workspace():
    path = sandbox_writable_dir("belljar-audit-ws-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def without_state_home(**env):
    """Changes to the test's environment: `env`, and no XDG_STATE_HOME (ctest sets one). A None
    value removes the variable, as running_kernel takes it."""
    return {"XDG_STATE_HOME": None, **env}


def environment(changes):
    """The test's environment with `changes` made, for a subprocess."""
    return {k: v for k, v in {**os.environ, **changes}.items() if v is not None}


@contextlib.contextmanager
def kernel(tmp_path, name, **kwargs):
    """running_kernel with its stderr kept in a file (a restarted kernel's too): yields
    (km, kc, the file), read once the kernel is shut down."""
    log = tmp_path / f"{name}.stderr"
    with open(log, "a") as stderr, running_kernel(stderr=stderr, **kwargs) as (km, kc):
        yield km, kc, log


def records_in(text):
    """The audit records among `text`'s lines (stderr holds warnings too)."""
    found = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "event" in record:
            found.append(record)
    return found


def warnings(text):
    return [line for line in text.splitlines() if line.startswith("[belljar] warning")]


def events(records):
    return [r["event"] for r in records]


def whole_session(records, cells):
    """A kernel's records from its start to its shutdown, with `cells` cells."""
    return ("worker_start" in events(records) and "kernel_start" in events(records)
            and events(records)[-1] == "shutdown" and events(records).count("cell") == cells)


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_each_kernel_writes_a_file_of_its_own_in_the_state_directory_and_stderr_stays_quiet(
        tmp_path, place):
    home = place / "home"
    home.mkdir()
    env = without_state_home(HOME=str(home))
    logs = []
    with kernel(tmp_path, "first", env=env) as (_, first, first_err), \
            kernel(tmp_path, "second", env=env) as (_, second, second_err):
        for kc in (first, second):
            info = kernel_info(kc)
            audit = info["belljar"]["audit_log"]
            assert audit == {"destination": audit["destination"], "failures": 0}, audit
            assert f"\nAudit log: {audit['destination']}" in info["banner"], info["banner"]
            logs.append(pathlib.Path(audit["destination"]))
        for code in CELLS:
            execute(first, code)
        # %audit reads the supervisor's own records, wherever the log is.
        reply, outputs = execute(first, "%audit 3")
        shown = [m["content"]["data"] for m in outputs if m["msg_type"] == "display_data"]
        assert reply["content"]["status"] == "ok" and shown, outputs
        assert [r["status"] for r in shown[0]["application/vnd.belljar.audit+json"]["records"]] == \
            ["ok", "ok", "error"]
        reply, outputs = execute(second, "print('the other one')")
        assert stdout_of(outputs) == "the other one\n"
        # What nbclient's parallel runs ask of a kernel: nothing at all on its stderr.
        assert first_err.read_text() == "" and second_err.read_text() == ""

    state = home / ".local" / "state" / "belljar"
    assert logs[0] != logs[1] and sorted(state.iterdir()) == sorted(logs)
    for made in (home / ".local", home / ".local" / "state", state):
        assert mode(made) == 0o700, made
    for log, cells in zip(logs, (len(CELLS) + 1, 1)):
        assert mode(log) == 0o600
        records = [json.loads(line) for line in log.read_text().splitlines()]
        kernel_id = records[0]["kernel"]
        assert log.name.startswith("audit-") and log.name.endswith(f"-{kernel_id}.jsonl"), log
        assert {r["kernel"] for r in records} == {kernel_id}  # this kernel's records only
        assert whole_session(records, cells), events(records)
    assert records_in(first_err.read_text() + second_err.read_text()) == []


def test_dash_keeps_the_records_on_stderr(tmp_path, place):
    home = place / "home"
    home.mkdir()
    with kernel(tmp_path, "dash", flags=["--audit-log", "-"],
                env=without_state_home(HOME=str(home))) as (_, kc, err):
        info = kernel_info(kc)
        assert info["belljar"]["audit_log"] == {"destination": "stderr", "failures": 0}
        assert info["banner"].endswith("\nAudit log: stderr"), info["banner"]
        execute(kc, "print(6 * 7)")
    text = err.read_text()
    records = records_in(text)
    assert whole_session(records, 1), events(records)
    assert WARNING not in text  # asked for: no warning
    assert not (home / ".local").exists()


def test_a_state_directory_in_the_workspace_is_not_used_nor_led_elsewhere_by_a_cell(
        tmp_path, workspace):
    env = {"XDG_STATE_HOME": str(workspace / "state")}
    why = f"{workspace}/state/belljar is in the workspace, which the sandbox can write"
    with kernel(tmp_path, "inside", env=env, workspace=workspace) as (km, kc, err):
        info = kernel_info(kc)
        assert info["belljar"]["audit_log"] == {"destination": "stderr", "failures": 0,
                                                "fallback": why}
        assert info["banner"].endswith(f"\nAudit log: stderr ({why})"), info["banner"]
        assert not (workspace / "state").exists()  # nothing of the kernel's made there
        # A cell makes the state directory a link to a folder of its own, for the next kernel.
        reply, _ = execute(kc, "import os\nos.mkdir('planted')\nos.mkdir('state')\n"
                               "os.symlink('../planted', 'state/belljar')")
        assert reply["content"]["status"] == "ok", reply["content"]
        assert (workspace / "state" / "belljar").is_symlink()  # the control: the link is there
        km.restart_kernel()
        kc.wait_for_ready(timeout=60)
        led = f"{workspace}/state/belljar leads to {workspace}/planted in the workspace, which " \
              "the sandbox can write"
        assert kernel_info(kc)["belljar"]["audit_log"]["fallback"] == led
        execute(kc, "print('after the restart')")
    assert list((workspace / "planted").iterdir()) == []
    text = err.read_text()
    # Each kernel said why once, before its first record; every record reached stderr.
    assert warnings(text) == [WARNING + why + FIX, WARNING + led + FIX]
    records = records_in(text)
    starts = [r for r in records if r["event"] == "kernel_start"]
    assert len(starts) == 2 and starts[0]["kernel"] != starts[1]["kernel"]
    assert events(records).count("cell") == 2 and events(records).count("shutdown") == 2
    assert text.startswith(WARNING)  # before the first record


def test_a_state_directory_that_a_symlink_leads_into_the_workspace_is_not_used(
        tmp_path, place, workspace):
    (workspace / "logs").mkdir()
    state = place / "state"
    state.mkdir(mode=0o700)
    (state / "belljar").symlink_to(workspace / "logs")
    why = (f"{state}/belljar leads to {workspace}/logs in the workspace, which the sandbox "
           "can write")
    with kernel(tmp_path, "led", env={"XDG_STATE_HOME": str(state)},
                workspace=workspace) as (_, kc, err):
        assert kernel_info(kc)["belljar"]["audit_log"]["fallback"] == why
        execute(kc, "print(1)")
    assert list((workspace / "logs").iterdir()) == []
    text = err.read_text()
    assert text.startswith(WARNING + why + FIX + "\n"), text
    assert whole_session(records_in(text), 1), text


@pytest.mark.parametrize("home", ["unset", "missing", "a file", "read-only"])
def test_without_a_usable_home_the_records_go_to_stderr_with_one_warning(tmp_path, place, home):
    if home == "read-only" and os.geteuid() == 0:
        pytest.skip("root writes any folder: the missing and file cases stand for it")
    value = {"unset": None, "missing": place / "missing", "a file": place / "file",
             "read-only": place / "read-only"}[home]
    why = {"unset": "HOME is not set",
           "missing": f"open({place}/missing): No such file or directory",
           "a file": f"open({place}/file): Not a directory",
           "read-only": f"mkdir({place}/read-only/.local): Permission denied"}[home]
    if home == "a file":
        value.write_text("")
    if home == "read-only":
        value.mkdir(mode=0o555)
    env = without_state_home(HOME=None if value is None else str(value))
    with kernel(tmp_path, "homeless", env=env) as (_, kc, err):
        info = kernel_info(kc)
        execute(kc, "print(1)")
    assert info["belljar"]["audit_log"] == {"destination": "stderr", "failures": 0,
                                            "fallback": why}
    assert info["banner"].endswith(f"\nAudit log: stderr ({why})"), info["banner"]
    text = err.read_text()
    assert warnings(text) == [WARNING + why + FIX]
    assert text.startswith(WARNING)  # before the first record
    assert whole_session(records_in(text), 1), text
    assert home != "missing" or not value.exists()  # a home is never made


def check_line(place, *flags, env):
    """`belljar check`'s line about the audit log."""
    done = subprocess.run([BELLJAR, "check", "--isolation", ISOLATION, *flags], env=env,
                          cwd=place, capture_output=True, text=True, timeout=120)
    lines = [line for line in done.stdout.splitlines() if line.startswith("audit log: ")]
    assert len(lines) == 1, (done.stdout, done.stderr)
    return lines[0]


def test_check_says_where_the_audit_log_goes(place, workspace):
    home = place / "home"
    home.mkdir()
    env = environment(without_state_home(HOME=str(home)))
    state = home / ".local" / "state" / "belljar"
    assert check_line(place, "--workspace", str(workspace), env=env) == (
        f"audit log: {state}/audit-<start>-<kernel>.jsonl, a file per kernel "
        "(belljar launch: stderr; belljar run: none)")
    assert state.is_dir() and list(state.iterdir()) == []  # made, as a kernel makes it; no log
    assert check_line(place, "--workspace", str(home), env=env) == (
        f"audit log: stderr, not the state directory: {state} is in the workspace, which the "
        "sandbox can write")
    assert check_line(place, "--workspace", str(workspace), "--audit-log", "-", env=env) == \
        "audit log: stderr (--audit-log -)"
    assert check_line(place, "--workspace", str(workspace), "--audit-log",
                      str(place / "audit.jsonl"), env=env) == f"audit log: {place}/audit.jsonl"
    assert check_line(place, "--workspace", str(workspace),
                      env={**env, "XDG_STATE_HOME": str(place / "xdg")}) == (
        f"audit log: {place}/xdg/belljar/audit-<start>-<kernel>.jsonl, a file per kernel "
        "(belljar launch: stderr; belljar run: none)")


def one_shot(home, workspace, *flags):
    return subprocess.run([BELLJAR, "run", "--python", PYTHON, "--isolation", ISOLATION,
                           "--workspace", str(workspace), *flags, "-c", "print(6 * 7)"],
                          env=environment(without_state_home(HOME=str(home))),
                          capture_output=True, text=True, timeout=120)


def test_run_writes_no_audit_log_unless_asked(place, workspace):
    home = place / "home"
    home.mkdir()
    quiet = one_shot(home, workspace)
    assert quiet.returncode == 0 and quiet.stdout == "42\n", quiet.stderr
    assert quiet.stderr == ""
    assert not (home / ".local").exists()
    asked = one_shot(home, workspace, "--audit-log", "-")
    assert asked.returncode == 0 and asked.stdout == "42\n", asked.stderr
    assert whole_session(records_in(asked.stderr), 1), asked.stderr


def test_mcp_writes_its_log_in_the_state_directory(place, workspace):
    home = place / "home"
    home.mkdir()
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "run_python", "arguments": {"code": "print(6 * 7)"}}}
    # Closing stdin is MCP's stdio shutdown: the server answers what it was sent, then exits.
    server = subprocess.run([BELLJAR, "mcp", "--python", PYTHON, "--isolation", ISOLATION,
                             "--workspace", str(workspace)],
                            input=mcp_session_lines(call), capture_output=True, text=True,
                            env=environment(without_state_home(HOME=str(home))), timeout=120)
    assert server.returncode == 0, server.stderr
    replies = {m["id"]: m for m in map(json.loads, server.stdout.splitlines())}
    assert replies[2]["result"]["isError"] is False
    assert server.stderr == ""
    # Two files: the router's (the sessions it opened and closed) and its one session's kernel,
    # each a file of its own, joined by the session's kernel id.
    logs = [[json.loads(line) for line in log.read_text().splitlines()]
            for log in (home / ".local" / "state" / "belljar").iterdir()]
    assert len(logs) == 2, logs
    (router,) = [records for records in logs if records[0]["event"] == "mcp_router_start"]
    (records,) = [records for records in logs if records is not router]
    assert whole_session(records, 1), events(records)
    opened = [r for r in router if r["event"] == "mcp_session_open"]
    assert [r["session_kernel"] for r in opened] == [records[0]["kernel"]]
    assert router[-1]["event"] == "mcp_router_stop"
