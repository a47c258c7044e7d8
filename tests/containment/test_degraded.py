"""Degraded mode as a default Kubernetes pod gets it: the kernel under a seccomp filter that
refuses namespaces and mounts (tests/tools/no_namespaces.cpp, like a container runtime's default
profile), with --isolation degraded. The containment table runs row by row with what degraded
mode keeps and gives up (probes.DEGRADED_ROWS), then the attacks an outside tester made on it:
the connection key, a host file through a symlink, a secret in the workspace's .env, writes in
the host's /tmp and home, and the host's processes.
"""
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest
from jupyter_client.connect import write_connection_file
from test_containment import _kernel_with_bait, matches, plain

from belljar_testing import (
    BELLJAR,
    NO_NAMESPACES,
    PYTHON,
    VALUE_SCAN_CELL,
    execute,
    running_kernel,
    sandbox_writable_dir,
    stdout_of,
)
from probes import DEGRADED_ROWS, GIVEN_UP, PRELUDE, PROBES

WRAPPER = [NO_NAMESPACES]
DEGRADED = ["--isolation", "degraded"]


@pytest.fixture(scope="module")
def degraded():
    ctx, km, kc, bait = _kernel_with_bait("degraded", wrapper=WRAPPER, secrets_in_workspace=False)
    yield km, kc, bait
    ctx.__exit__(None, None, None)
    bait.close()


def outcome_of(km, kc, code):
    """The probe's result, or "raised NAME [Errno N]" when it raised (a refused socket())."""
    reply, _ = execute(kc, code, user_expressions={"result": "result"})
    assert km.is_alive(), "the kernel died during a probe"
    content = reply["content"]
    if content["status"] != "ok":
        evalue = content.get("evalue", "")
        return f"raised {content['ename']} " + (evalue.split("]")[0] + "]" if evalue.startswith("[Errno") else "")
    return plain(content["user_expressions"]["result"]["data"]["text/plain"])


def test_the_rows_named_for_degraded_mode_are_rows_of_the_table():
    names = {p.name for p in PROBES}
    assert set(DEGRADED_ROWS) <= names, set(DEGRADED_ROWS) - names


def test_the_kernel_runs_without_namespaces(degraded):
    km, kc, _ = degraded
    info = kc.kernel_info(reply=True)["content"]
    assert info["belljar"]["isolation"] == "degraded"
    assert any("no pid namespace" in note for note in info["belljar"]["notes"]), info["belljar"]


@pytest.mark.parametrize("probe", PROBES, ids=[
    p.name + (" [given up]" if DEGRADED_ROWS.get(p.name, (None, None))[1] == GIVEN_UP else "")
    for p in PROBES])
def test_probe_in_degraded_mode(degraded, probe):
    km, kc, bait = degraded
    expected, verdict, why = DEGRADED_ROWS.get(probe.name, (probe.sandbox, "holds", "as strict"))
    outcome = outcome_of(km, kc, probe.code)
    assert matches(expected, outcome), f"{probe.name} ({verdict}: {why}): got {outcome!r}"
    if probe.name == "write outside the workspace":
        assert not (bait.outside / "escaped.txt").exists()


@pytest.fixture
def home_under_tmp(monkeypatch):
    """The tester's setup: the kernel's home under /tmp, Jupyter's runtime directory (with the
    connection file) in it, and a workspace of its own."""
    root = pathlib.Path(tempfile.mkdtemp(prefix="belljar-degraded-home-"))
    home = root / "home"
    runtime = home / ".local" / "share" / "jupyter" / "runtime"
    runtime.mkdir(parents=True)
    (home / "notes.txt").write_text("the host home's own file\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
    workspace = sandbox_writable_dir("belljar-degraded-ws-")
    (workspace / "to-home").symlink_to(home / "notes.txt")
    yield home, runtime, workspace
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(workspace, ignore_errors=True)


def test_an_outside_testers_attacks_fail(home_under_tmp):
    home, runtime, workspace = home_under_tmp
    with running_kernel(flags=DEGRADED, workspace=str(workspace), wrapper=WRAPPER,
                        name="belljar-degraded-home") as (km, kc):
        key = km.session.key.decode()
        needle = {"head": key[: len(key) // 2], "length": len(key),
                  "sha256": hashlib.sha256(key.encode()).hexdigest()}
        reply, outputs = execute(kc, PRELUDE + VALUE_SCAN_CELL + f'''
import tempfile
out = {{}}
out["connection file"] = attempt(lambda: read_text({km.connection_file!r}))
out["runtime directory"] = attempt(lambda: os.listdir({str(runtime)!r}))
out["host home file"] = attempt(lambda: read_text({str(home / "notes.txt")!r}))
out["through a symlink"] = attempt(lambda: read_text("to-home"))
out["write host /tmp"] = attempt(lambda: open("/tmp/belljar-degraded-escape", "w").close())
out["write host home"] = attempt(lambda: open({str(home / "planted.txt")!r}, "w").close())
out["list host /tmp"] = attempt(lambda: os.listdir("/tmp"))
out["TMPDIR"] = os.environ["TMPDIR"]
out["HOME"] = os.environ["HOME"]
with tempfile.NamedTemporaryFile() as f:
    out["tempfile"] = f.name
hits = []
for path in regular_files([os.environ["HOME"], os.environ["TMPDIR"], os.getcwd(), "/etc", "/tmp"]):
    try:
        if holds(open(path, "rb").read(), {needle!r}):
            hits.append(path)
    except OSError:
        pass
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if holds(open(f"/proc/{{pid}}/environ", "rb").read(), {needle!r}):
            hits.append(pid)
    except OSError:
        pass
out["key found in"] = hits
print(json.dumps(out))
''')
        assert reply["content"]["status"] == "ok", reply["content"]
        got = json.loads(stdout_of(outputs).strip().splitlines()[-1])
    for attack in ("connection file", "runtime directory", "host home file", "through a symlink",
                   "write host /tmp", "write host home", "list host /tmp"):
        assert got[attack] == "EACCES", (attack, got)
    assert not pathlib.Path("/tmp/belljar-degraded-escape").exists()
    assert not (home / "planted.txt").exists()
    private = got["TMPDIR"].rsplit("/", 1)[0]
    assert private.startswith("/tmp/belljar-session-") and got["HOME"] == private + "/home"
    assert got["tempfile"].startswith(got["TMPDIR"] + "/")
    assert got["key found in"] == []
    assert not pathlib.Path(private).exists(), "the private directory outlived the session"


def start_refusal(workspace, tmp_path):
    """`belljar kernel` under the filter, degraded, in `workspace`: its exit status and stderr."""
    connection, _ = write_connection_file(str(tmp_path / "kernel.json"), ip="127.0.0.1",
                                          key=b"k-" + os.urandom(8).hex().encode())
    done = subprocess.run([*WRAPPER, BELLJAR, "kernel", "-f", connection, "--python", PYTHON,
                           *DEGRADED, "--workspace", str(workspace)],
                          capture_output=True, text=True, timeout=60)
    refusals = [line for line in done.stderr.splitlines() if line.startswith("belljar:")]
    return done.returncode, refusals


def test_a_workspace_holding_a_secret_is_refused_with_the_reason(tmp_path):
    workspace = sandbox_writable_dir("belljar-degraded-secret-")
    try:
        (workspace / "project").mkdir()
        (workspace / "project" / ".env").write_text("OPENAI_API_KEY=sk-in-the-workspace\n")
        status, refusals = start_refusal(workspace, tmp_path)
        assert status == 1 and len(refusals) == 1, refusals
        assert refusals[0] == (
            "belljar: refusing to start: the workspace holds project/.env (.env), which "
            "--isolation degraded cannot mask without a mount namespace: move it out of the "
            "workspace, or run where namespaces are allowed")
        # The control: the same workspace without it starts (and the filter is what refuses).
        (workspace / "project" / ".env").unlink()
        with running_kernel(flags=DEGRADED, workspace=str(workspace), wrapper=WRAPPER,
                            name="belljar-degraded-clean") as (km, kc):
            reply, outputs = execute(kc, "print('started')")
            assert stdout_of(outputs) == "started\n"
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


def test_a_workspace_that_is_a_home_with_the_runtime_directory_is_refused(tmp_path):
    workspace = sandbox_writable_dir("belljar-degraded-homews-")
    try:
        runtime = workspace / ".local" / "share" / "jupyter" / "runtime"
        runtime.mkdir(parents=True)
        (runtime / "jpserver-1.json").write_text('{"token": "the-servers-token"}')
        status, refusals = start_refusal(workspace, tmp_path)
        assert status == 1 and refusals and "the workspace holds .local/share/jupyter/runtime" in refusals[0], refusals
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


def test_check_says_what_degraded_mode_gives_up():
    done = subprocess.run([*WRAPPER, BELLJAR, "check", *DEGRADED], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "policy (isolation degraded): enforceable" in done.stdout
    for said in ("user namespaces are refused", "the worker sees the host's processes",
                 "a workspace holding one (.env, .ssh, jupyter/runtime, --hide ...) is refused",
                 "never the host's /tmp", "--tmp-size"):
        assert said in done.stdout, (said, done.stdout)
    strict = subprocess.run([*WRAPPER, BELLJAR, "check"], capture_output=True, text=True, timeout=60)
    assert strict.returncode == 1 and "NOT enforceable" in strict.stdout
