"""Every shell command the README shows, run as a reader on a fresh machine would run it.

The commands are read from README.md itself and the documents in docs/ it links: each line of its shell blocks and of its command
line synopsis, and each inline code span, that starts with `belljar`, `build/belljar`,
`jupyter`, `papermill`, `./scripts/`, `/usr/bin/python3` or `echo`. Each one is either run here (COMMANDS) or skipped
for a reason given in SKIPPED; a command added to the README that is in neither fails
test_every_readme_command_is_run_or_skipped_for_a_reason until it is handled here.

Commands run through bash in a fresh directory, with a temporary HOME and Jupyter directories
(nothing reaches the user's own setup), `belljar` on PATH and `build/belljar` both meaning
$BELLJAR, PATH otherwise /usr/bin:/bin. Where the command lets a user choose the interpreter,
`--python /usr/bin/python3` is added (and the suites' --isolation); nothing else is changed
beyond the substitutions listed in COMMANDS.
"""
import json
import os
import pathlib
import re
import secrets
import select
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import nbformat
import pytest

from belljar_testing import (
    BELLJAR,
    ISOLATION,
    PYTHON,
    mcp_session_lines,
    readme_blocks,
    user_docs,
)

README = user_docs()  # README.md and the docs/ it links
STARTS = r"(?:\./scripts/|build/belljar |belljar |jupyter |papermill |/usr/bin/python3 |echo )"
POLICY = f"--python {PYTHON} --isolation {ISOLATION}"

# The README's command -> why this test does not run it.
SKIPPED = {
    "./scripts/demo.sh": "the README's first command: installs packages and builds; CI runs it",
    "./scripts/test.sh": "the README's second command: the whole suite, this test among it",
    "belljar kernel -f CONNECTION_FILE [policy flags]":
        "synopsis with placeholders; kernel.json runs it, which `jupyter console` below does",
    "belljar install [--user | --sys-prefix | --prefix DIR] [--name NAME]":
        "synopsis with placeholders; `build/belljar install --user ...` below is its example",
    "belljar run [policy flags] [--json] (FILE.py | -c CODE | -)":
        "synopsis with placeholders; each of its forms is run below",
    "belljar mcp [--http HOST:PORT [--http-host NAME]] [--max-sessions N] [--idle-timeout SECONDS] [--session-folders] [policy flags]":
        "synopsis; `belljar mcp` and `belljar mcp --http 127.0.0.1:8765` below",
    "belljar check [policy flags]": "synopsis; `belljar check` below",
    "belljar run": "the command's name in prose; its forms (script.py, -c, -) are run below",
    "belljar launch [policy flags] --kernel-id ID --port-range LO..HI --response-address IP:PORT --public-key KEY":
        "synopsis; a gateway runs it in a pod: tests/integration/test_launch.py plays the gateway",
    "belljar launch": "the command's name in prose; tests/integration/test_launch.py runs it",
    "belljar kernel": "the command's name in prose; kernel.json runs it (`jupyter console` below)",
    "./scripts/build-image.sh":
        "builds the kernel image (root, podman, minutes): tests/image/test_kernel_image.py runs it",
    "papermill walkthrough.ipynb out.ipynb -k belljar -p workload 5":
        "the walkthrough needs its chat stand-in and papermill from the frontends venv: "
        "tests/integration/test_notebooks.py runs it (test_papermill_reruns_the_walkthrough_with_a_parameter)",
    "jupyter lab": "starts a server and waits for a browser: tests/browser/jupyterlab.test.mjs "
                   "starts it on loopback and drives it in Chromium",
    "/usr/bin/python3 bench/bench.py":
        "the benchmark: minutes of runs, and it rewrites bench/RESULTS.md in the source tree",
    "/usr/bin/python3 bench/density.py":
        "the density benchmark: 150 kernels at once, and it rewrites bench/DENSITY.md",
    "/usr/bin/python3 bench/workspace.py":
        "the workspace broker's benchmark: minutes of file creation in three kernels, and it "
        "rewrites bench/WORKSPACE.md",
}


def readme_commands():
    """Each command as the README spells it (a synopsis line without its trailing comment)."""
    found = []
    for block in readme_blocks("sh") + readme_blocks(""):
        for line in block.splitlines():
            if re.match(STARTS, line):
                found.append(re.sub(r"\s+#.*$", "", line).strip())
    prose = re.sub(r"```.*?```", "", README, flags=re.S)
    found += [span for span in re.findall(r"`([^`\n]+)`", prose) if re.match(STARTS, span)]
    return list(dict.fromkeys(found))


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    """A fresh machine's user: HOME and Jupyter's directories empty, the build on PATH."""
    root = pathlib.Path(tempfile.mkdtemp(prefix="belljar-readme-commands-"))
    home, bindir, cwd = root / "home", root / "bin", root / "work"
    for d in (home, bindir, cwd):
        d.mkdir()
    os.chmod(root, 0o755)
    os.chmod(cwd, 0o777)  # the workspace ("."): the sandbox user must write it when we are root
    (bindir / "belljar").symlink_to(BELLJAR)
    (cwd / "build").symlink_to(pathlib.Path(BELLJAR).parent)
    env = {
        "PATH": f"{bindir}:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "JUPYTER_DATA_DIR": str(home / ".local" / "share" / "jupyter"),
        "JUPYTER_CONFIG_DIR": str(home / ".jupyter"),
        "JUPYTER_RUNTIME_DIR": str(home / ".local" / "share" / "jupyter" / "runtime"),
        "IPYTHONDIR": str(home / ".ipython"),
        "JUPYTER_PLATFORM_DIRS": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }
    yield env, cwd, home
    shutil.rmtree(root, ignore_errors=True)


def run(reader, command, stdin=None, timeout=180, extra_env=None):
    env, cwd, _ = reader
    done = subprocess.run(["bash", "-c", "set -o pipefail; " + command], cwd=cwd, env={**env, **(extra_env or {})},
                          input=stdin, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{command}\nstdout: {done.stdout}\nstderr: {done.stderr}"
    return done


def installed(reader):
    """The README's install command, run once per module (the kernelspec the others use)."""
    _, _, home = reader
    spec = home / ".local" / "share" / "jupyter" / "kernels" / "belljar" / "kernel.json"
    if not spec.exists():
        run(reader, f"build/belljar install --user --name belljar --timeout 30 --memory 2G {POLICY}")
    return spec


def check_install(reader):
    spec = json.loads(installed(reader).read_text())
    argv = spec["argv"]
    assert spec["display_name"] == "Python 3 (belljar)"
    assert argv[1] == "kernel" and "{connection_file}" in argv
    assert argv[argv.index("--timeout") + 1] == "30" and argv[argv.index("--memory") + 1] == "2G"


def check_install_secret(reader):
    # The key is in the environment install runs from (as the README's `export` puts it): the
    # kernelspec bakes the binding, never the value, and gives the key no way into the sandbox.
    _, _, home = reader
    value = "sk-readme-" + secrets.token_hex(16)
    run(reader, f"build/belljar install --user --name belljar-openai --secret OPENAI_API_KEY@api.openai.com "
                f"{POLICY}", extra_env={"OPENAI_API_KEY": value})
    spec_file = home / ".local" / "share" / "jupyter" / "kernels" / "belljar-openai" / "kernel.json"
    spec = json.loads(spec_file.read_text())
    argv = spec["argv"]
    assert argv[1] == "kernel" and argv[argv.index("--secret") + 1] == "OPENAI_API_KEY@api.openai.com"
    assert "--pass-env" not in argv
    assert value not in spec_file.read_text()


def check_install_kubernetes(reader):
    _, _, home = reader
    run(reader, "build/belljar install --user --name belljar-k8s --kubernetes "
                "localhost/belljar-kernel:0.1.0 --timeout 30")
    spec_dir = home / ".local" / "share" / "jupyter" / "kernels" / "belljar-k8s"
    spec = json.loads((spec_dir / "kernel.json").read_text())
    proxy = spec["metadata"]["process_proxy"]
    assert proxy["class_name"] == "enterprise_gateway.services.processproxies.k8s.KubernetesProcessProxy"
    assert proxy["config"]["image_name"] == "localhost/belljar-kernel:0.1.0"
    assert spec["argv"][:2] == ["python", str(spec_dir / "scripts" / "launch_kubernetes.py")]
    assert spec["argv"][2:] == ["--RemoteProcessProxy.kernel-id", "{kernel_id}",
                                "--RemoteProcessProxy.port-range", "{port_range}",
                                "--RemoteProcessProxy.response-address", "{response_address}",
                                "--RemoteProcessProxy.public-key", "{public_key}"]
    assert json.loads(spec["env"]["BELLJAR_POLICY_FLAGS"]) == ["--timeout", "30"]
    assert spec["interrupt_mode"] == "signal"


def check_kernelspec_list(reader):
    installed(reader)
    out = run(reader, "jupyter kernelspec list").stdout
    _, _, home = reader
    assert re.search(r"^\s*belljar\s+%s$" % re.escape(str(home / ".local/share/jupyter/kernels/belljar")),
                     out, re.M), out


def console_session(reader, before, prompt, after, timeout=180):
    """`jupyter console --kernel belljar --simple-prompt` fed `before`, then `after` once
    `prompt` is on its output: the answer to input() goes in only when input() asks (piped all at
    once, the console read it as the next cell when the kernel's request came late, and then
    waited for an answer that was never coming). The whole output."""
    env, cwd, _ = reader
    console = subprocess.Popen(["bash", "-c", "jupyter console --kernel belljar --simple-prompt"],
                               cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
    out = b""
    try:
        console.stdin.write(before.encode())
        console.stdin.flush()
        deadline = time.monotonic() + timeout
        while prompt.encode() not in out:
            ready, _, _ = select.select([console.stdout], [], [], max(0, deadline - time.monotonic()))
            chunk = os.read(console.stdout.fileno(), 65536) if ready else b""
            assert chunk, f"no {prompt!r} from jupyter console: {out.decode(errors='replace')}"
            out += chunk
        rest, _ = console.communicate(after.encode(), timeout=max(1, deadline - time.monotonic()))
        out += rest
    finally:
        if console.poll() is None:
            console.kill()
            console.wait()
    assert console.returncode == 0, out.decode(errors="replace")
    return out.decode(errors="replace")


def check_console(reader):
    installed(reader)
    # --simple-prompt: the prompt reads piped lines (no terminal here); input() is answered too.
    out = console_session(reader, 'print(6 * 7)\nname = input("who? ")\n', "who? ",
                          'ada\nprint("hello", name)\n')
    assert "in a sandbox" in out  # belljar's banner, not ipykernel's
    _, _, home = reader
    assert f"Audit log: {home}/.local/state/belljar/audit-" in out  # its last line, where they go
    assert "42" in out and "who? " in out and "hello ada" in out, out


AUDIT_JSON = "application/vnd.belljar.audit+json"  # %audit's records, for a client


def check_nbconvert(reader):
    installed(reader)
    _, cwd, _ = reader
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("print(6 * 7)"),
                nbformat.v4.new_code_cell("import os; os.getcwd()"),
                nbformat.v4.new_code_cell("%audit 1")]  # a magic only belljar's supervisor has
    nbformat.write(nb, cwd / "nb.ipynb")
    done = run(reader, "jupyter nbconvert --to notebook --execute "
                       "--ExecutePreprocessor.kernel_name=belljar nb.ipynb")
    executed = nbformat.read(cwd / "nb.nbconvert.ipynb", as_version=4)
    first, second, audit = (cell.outputs for cell in executed.cells)
    assert [o.get("text") for o in first] == ["42\n"]
    assert second[0].output_type == "execute_result"
    assert second[0].data["text/plain"] == repr(str(cwd))
    assert "code_sha256" in json.dumps(audit), audit  # the cell records of this very run
    # The audit log is a file in the user's state directory: the terminal (the kernel's stderr,
    # which nbconvert passes on) shows none of it.
    _, _, home = reader
    (shown,) = [o for o in audit if AUDIT_JSON in o.get("data", {})]
    (record,) = shown["data"][AUDIT_JSON]["records"]
    logs = list((home / ".local" / "state" / "belljar").glob("audit-*.jsonl"))
    assert any(record["msg_id"] in log.read_text() for log in logs), logs
    assert record["msg_id"] not in done.stderr and '"event":' not in done.stderr, done.stderr


def check_run_script(reader):
    _, cwd, _ = reader
    (cwd / "script.py").write_text("import sys\nprint('from script', sys.executable)\n")
    out = run(reader, f"belljar run {POLICY} script.py").stdout
    assert out == f"from script {PYTHON}\n"


def check_run_code(reader):
    version = subprocess.run([PYTHON, "-c", "import sys; print(sys.version)"],
                             capture_output=True, text=True, check=True).stdout
    out = run(reader, f"build/belljar run {POLICY} --workspace . -c 'import sys; print(sys.version)'")
    assert out.stdout == version


def check_run_json(reader):
    out = run(reader, f"echo 'print(6 * 7)' | build/belljar run {POLICY} --json - | python3 -m json.tool")
    result = json.loads(out.stdout)
    assert result["status"] == "ok"
    assert {"type": "stream", "name": "stdout", "text": "42\n"} in result["outputs"]
    assert out.stdout.startswith("{\n    ")  # json.tool's indentation: the pipe's last stage ran


def check_mcp(reader):
    # Closing stdin is MCP's stdio shutdown: the server answers what it was sent, then exits.
    out = run(reader, f"belljar mcp {POLICY}",
              stdin=mcp_session_lines({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
    replies = {m["id"]: m for m in map(json.loads, out.stdout.splitlines())}
    assert replies[1]["result"]["serverInfo"]["name"] == "belljar"
    assert {t["name"] for t in replies[2]["result"]["tools"]} == {
        "run_python", "reset_session", "list_files", "read_file", "write_file", "checkpoint",
        "rollback", "list_checkpoints", "drop_checkpoint", "open_session", "close_session",
        "list_sessions"}


def check_mcp_http(reader):
    # Port 0 for 8765 (a free one; the server prints where). The token it generated is printed
    # for the reader, and a request without it is refused.
    env, cwd, _ = reader
    server = subprocess.Popen(["bash", "-c", f"exec belljar mcp --http 127.0.0.1:0 {POLICY}"],
                              cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        said, url, token = [], None, None
        for line in server.stderr:
            said.append(line)
            url = url or (re.findall(r"at (http://127\.0\.0\.1:\d+/mcp)$", line.strip()) or [None])[0]
            token = token or (re.findall(r"Authorization: Bearer (\S+)$", line.strip()) or [None])[0]
            if url and token:
                break
        assert url and token, "".join(said)
        initialize = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "reader", "version": "0"}}}).encode()

        def post(headers):
            request = urllib.request.Request(url, data=initialize, method="POST", headers={
                "Content-Type": "application/json", "Accept": "application/json", **headers})
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    return response.status, response.headers, json.loads(response.read())
            except urllib.error.HTTPError as refused:
                return refused.code, refused.headers, None

        assert post({})[0] == 401
        status, headers, answer = post({"Authorization": f"Bearer {token}"})
        assert status == 200 and headers["Mcp-Session-Id"], answer
        assert answer["result"]["serverInfo"]["name"] == "belljar"
    finally:
        server.terminate()
        assert server.wait(60) == 0


def check_check(reader):
    out = run(reader, "belljar check").stdout
    assert "host layers:" in out and "policy (isolation strict): enforceable" in out, out
    _, _, home = reader
    assert f"audit log: {home}/.local/state/belljar/audit-<start>-<kernel>.jsonl" in out, out


def check_help(reader):
    out = run(reader, "belljar --help").stdout
    for subcommand in ("kernel", "install", "run", "mcp", "check"):
        assert re.search(r"^\s*belljar %s\b" % subcommand, out, re.M), out


def check_version(reader):
    out = run(reader, "belljar --version").stdout
    assert re.fullmatch(r"belljar \d+\.\d+\.\d+\n", out), out


def check_flags_markdown(reader):
    out = run(reader, "belljar help --flags-markdown").stdout
    assert out.startswith("| flag | default | meaning |\n"), out
    assert out.strip() in README, "the README's flag table is not what the command prints"


# The README's command -> the check that runs it (the substitutions: --python and --isolation
# added where the command takes policy flags; nb.ipynb and script.py are files the test writes;
# `jupyter console` gets --simple-prompt to read piped input; `belljar --help | --version` is two).
COMMANDS = {
    "build/belljar install --user --name belljar --timeout 30 --memory 2G": [check_install],
    "build/belljar install --user --name belljar-openai --secret OPENAI_API_KEY@api.openai.com":
        [check_install_secret],
    "build/belljar install --user --name belljar-k8s --kubernetes localhost/belljar-kernel:0.1.0 --timeout 30":
        [check_install_kubernetes],
    "jupyter kernelspec list": [check_kernelspec_list],
    "jupyter console --kernel belljar": [check_console],
    "jupyter nbconvert --to notebook --execute --ExecutePreprocessor.kernel_name=belljar nb.ipynb":
        [check_nbconvert],
    "belljar run script.py": [check_run_script],
    "build/belljar run --workspace . -c 'import sys; print(sys.version)'": [check_run_code],
    "echo 'print(6 * 7)' | build/belljar run --json - | python3 -m json.tool": [check_run_json],
    "belljar mcp": [check_mcp],
    "belljar mcp --http 127.0.0.1:8765": [check_mcp_http],
    "belljar check": [check_check],
    "belljar --help | --version": [check_help, check_version],
    "belljar help --flags-markdown": [check_flags_markdown],
}


def test_every_readme_command_is_run_or_skipped_for_a_reason():
    commands = readme_commands()
    assert set(commands) == set(COMMANDS) | set(SKIPPED), (
        "README commands not handled here: %s; handled but no longer in the README: %s"
        % (sorted(set(commands) - set(COMMANDS) - set(SKIPPED)),
           sorted((set(COMMANDS) | set(SKIPPED)) - set(commands))))


@pytest.mark.parametrize("command,check",
                         [(c, f) for c, checks in COMMANDS.items() for f in checks],
                         ids=lambda v: v.__name__ if callable(v) else "")
def test_readme_command_works_as_shown(reader, command, check):
    check(reader)
