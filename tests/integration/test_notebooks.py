"""Every notebook in notebooks/ runs on the belljar kernel, in the sandbox, through two client
stacks: Debian 12's (its python3 in the sandbox with ipywidgets 6, nbclient 0.7 in this process)
and a learner's PyPI stack (a venv of current releases in the sandbox, ipywidgets 8, run by
`jupyter nbconvert --to notebook --execute` from the frontends venv: nbconvert 7.17, nbclient 0.11,
as a course's CI runs it, with no helper). papermill re-runs the walkthrough with a parameter.

The chat stand-in runs on loopback as the demo runs it: over HTTPS with a demo CA made for the run
(scripts/demo-ca.sh) that the kernelspec trusts with --upstream-ca, wanting the
real OPENAI_API_KEY, which the kernel holds and binds to the stand-in with --secret. An error in
a cell not tagged raises-exception fails the test."""
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

import nbclient
import nbformat
import pytest

from belljar_testing import FRONTENDS, PYTHON, SANDBOX_VENV_PYTHON, SOURCE, install_kernelspec

NOTEBOOKS = sorted((SOURCE / "notebooks").glob("*.ipynb"))
# The session's Python, and the client that runs the notebook with it (execute_notebook).
SESSION_PYTHONS = {"debian": PYTHON, "venv": SANDBOX_VENV_PYTHON}
KERNEL_KEY = "sk-kernel-env-secret-abcdef123456"  # the course's key: the kernel's environment only
PLACEHOLDER = r"belljar-secret-OPENAI_API_KEY-[0-9a-f]{32}"
KERNEL_NAME = "belljar-nb"


class ProtocolOneClient(nbclient.NotebookClient):
    """Debian's nbclient, reading ipywidgets 6's widgets too. Widget protocol 1 puts a model's
    state in the comm_open's data itself; nbclient (0.7 as 0.11) reads only protocol 2's
    data["state"] and stops with KeyError: 'state' at the first widget, on any kernel. A
    protocol-1 widget is left to the frontend that is not there, as nbclient leaves every model
    it does not mimic; the cell's own outputs are kept as usual."""

    def on_comm_open_jupyter_widget(self, msg):
        if "state" not in msg["content"]["data"]:
            return None
        return super().on_comm_open_jupyter_widget(msg)


@pytest.fixture(scope="module")
def chat_service():
    tls = tempfile.mkdtemp(prefix="belljar-nb-tls-")
    subprocess.run([str(SOURCE / "scripts" / "demo-ca.sh"), tls, "localhost"], check=True, capture_output=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(SOURCE / "notebooks/services/chat_standin.py"),
                             "--port", str(port), "--tls-cert", f"{tls}/localhost.crt",
                             "--tls-key", f"{tls}/localhost-key.txt"],
                            stdout=subprocess.PIPE, text=True, env=dict(os.environ, OPENAI_API_KEY=KERNEL_KEY))
    proc.stdout.readline()  # it prints its address once listening
    yield {"port": port, "ca": f"{tls}/ca.crt"}
    proc.terminate()
    proc.wait(10)
    shutil.rmtree(tls, ignore_errors=True)


def course_kernelspec(service, python):
    """The course's kernelspec (the demo's policy) in a fresh prefix; returns the prefix."""
    prefix = tempfile.mkdtemp(prefix="belljar-nb-")
    port = service["port"]
    install_kernelspec(prefix, KERNEL_NAME, [
        "--python", python, "--timeout", "30", "--secret", f"OPENAI_API_KEY@localhost:{port}",
        "--allow-local-net", f"localhost:{port}", "--upstream-ca", service["ca"],
        "--set-env", f"CHAT_API_BASE=https://localhost:{port}/v1"])
    return prefix


def client_env(service, prefix):
    """What the client, and so the kernel it starts, runs with: the kernelspec's prefix and the
    course's key (the kernelspec trusts the demo CA with --upstream-ca)."""
    return dict(os.environ, JUPYTER_PATH=f"{prefix}/share/jupyter", OPENAI_API_KEY=KERNEL_KEY)


def execute_notebook(path, service, workdir, python="debian"):
    """The notebook at `path` executed in `workdir` (the kernel's workspace), as the notebook
    the client wrote."""
    prefix = course_kernelspec(service, SESSION_PYTHONS[python])
    env = client_env(service, prefix)
    try:
        if python == "debian":
            saved = dict(os.environ)
            os.environ.update(env)
            try:
                nb = nbformat.read(path, as_version=4)
                ProtocolOneClient(nb, kernel_name=KERNEL_NAME, timeout=120,
                                  resources={"metadata": {"path": str(workdir)}}).execute()
            finally:
                os.environ.clear()
                os.environ.update(saved)
            return nb
        shutil.copy(path, workdir / path.name)
        done = run_client(
            [FRONTENDS / "bin" / "jupyter", "nbconvert", "--to", "notebook", "--execute",
             f"--ExecutePreprocessor.kernel_name={KERNEL_NAME}", "--ExecutePreprocessor.timeout=120",
             "--output", f"executed-{path.name}", path.name],
            cwd=workdir, env=env)
        assert done.returncode == 0, done.stderr[-4000:]
        return nbformat.read(workdir / f"executed-{path.name}", as_version=4)
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


def outputs_of(nb):
    return [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]


def text_of(outputs):
    return "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in outputs)


def widget_outputs_of(nb):
    """What Output widgets captured (ipywidgets 8's interact prints into one), from the widget
    state the client saved with the notebook."""
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    return [o for model in state.get("state", {}).values()
            for o in model.get("state", {}).get("outputs", [])]


@pytest.mark.parametrize("python", SESSION_PYTHONS)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_without_unexpected_errors(path, python, chat_service, tmp_path):
    os.chmod(tmp_path, 0o777)
    (tmp_path / ".env").write_text("OPENAI_API_KEY=sk-notebook-test-secret-123456\n")
    nb = execute_notebook(path, chat_service, tmp_path, python)
    text = text_of(outputs_of(nb))
    assert "sk-notebook-test-secret" not in text and "sk-kernel-env-secret" not in text
    assert "sk-kernel-env-secret" not in nbformat.writes(nb)  # the saved notebook, metadata and all
    if path.name == "walkthrough.ipynb":
        mimes = {m for o in outputs_of(nb) for m in o.get("data", {})}
        assert "image/png" in mimes and "text/html" in mimes
        errors = [o for o in outputs_of(nb) if o.output_type == "error"]
        assert any(e.ename == "TimeoutError" for e in errors)
        # Section 2: the key inside is a placeholder.
        assert re.search(r"OPENAI_API_KEY inside the sandbox: %s\n" % PLACEHOLDER, text), text
        # Section 3: the call with that placeholder answers (the stand-in wants the real key).
        assert "(answered by gpt-4o-mini)" in text, text
        # The exercise: printed, echoed back, written to a file -- the placeholder every time.
        assert re.search(r"1\. printed: +%s\n" % PLACEHOLDER, text), text
        assert re.search(r"2\. echoed back: +Bearer %s\n" % PLACEHOLDER, text), text
        assert re.search(r"3\. written, read back: %s\n" % PLACEHOLDER, text), text
        assert re.fullmatch(PLACEHOLDER, (tmp_path / "stolen-key.txt").read_text())  # on the host too
        # The widget exercise: interact's first run (workload 10**6, temperature 0) printed its time
        # and the chat answer: into the cell with ipywidgets 6 (its view is not kept: interact's
        # clear_output, meant for its Output widget, clears the cell when no frontend routes it,
        # as on ipykernel), into its Output widget's state with ipywidgets 8.
        shown = text + text_of(widget_outputs_of(nb))
        assert re.search(r"workload 1,000,000: \d+\.\d\d s \(the kernel's cap: 30 s\)\n.*answered by",
                         shown), shown


def run_client(args, cwd, env):
    """A PyPI client (nbconvert, papermill) run to its end. Each cell has its own timeout (120 s)
    inside; past 600 s in all the run fails with what the client and the kernel wrote, rather
    than holding ctest until its own timeout hides it (a papermill run once waited that long)."""
    try:
        return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired as late:
        stderr = late.stderr or b""
        stderr = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
        raise AssertionError("%s did not finish within 600 s; its stderr (the kernel's too):\n%s"
                             % (os.path.basename(args[0]), stderr[-8000:])) from None


def test_papermill_reruns_the_walkthrough_with_a_parameter(chat_service, tmp_path):
    """`papermill walkthrough.ipynb out.ipynb -k belljar -p workload 5`, as a course author re-runs
    an exercise with other values: papermill puts its cell after the one tagged `parameters`,
    and sections 4 and the widget exercise run with workload 5, not 10**6. papermill counts an
    error output as a failure even in a cell tagged raises-exception: it runs every cell (the
    tag lets the run go on), then exits 1 naming the first error, which must be section 4's
    TimeoutError, the one the walkthrough means to show."""
    os.chmod(tmp_path, 0o777)
    (tmp_path / ".env").write_text("OPENAI_API_KEY=sk-notebook-test-secret-123456\n")
    shutil.copy(SOURCE / "notebooks" / "walkthrough.ipynb", tmp_path / "walkthrough.ipynb")
    prefix = course_kernelspec(chat_service, SANDBOX_VENV_PYTHON)
    try:
        done = run_client([FRONTENDS / "bin" / "papermill", "walkthrough.ipynb", "out.ipynb",
                           "-k", KERNEL_NAME, "-p", "workload", "5", "--execution-timeout", "120"],
                          cwd=tmp_path, env=client_env(chat_service, prefix))
    finally:
        shutil.rmtree(prefix, ignore_errors=True)
    nb = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    limits = next(cell for cell in code if cell.source.startswith("%%limits"))
    assert done.returncode == 1, done.stderr[-4000:]
    assert re.search(r"PapermillExecutionError: \n-+\nException encountered at \"In \[%d\]\"" %
                     limits.execution_count, done.stderr), done.stderr[-4000:]
    assert "TimeoutError" in done.stderr
    errors = [(cell.source, o.ename) for cell in code for o in cell.outputs if o.output_type == "error"]
    assert errors == [(limits.source, "TimeoutError")]
    # Every cell ran, in order, the injected one right after the parameters cell.
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1))
    tags = [cell.metadata.get("tags", []) for cell in code]
    at = tags.index(["parameters"])
    assert tags[at + 1] == ["injected-parameters"]
    assert re.search(r"^workload = 5$", code[at + 1].source, re.M), code[at + 1].source
    assert nb.metadata.papermill.parameters == {"workload": 5}
    # Section 4 summed five squares (0 + 1 + 4 + 9 + 16), and the widget exercise ran with 5.
    section4 = next(cell for cell in code if "range(workload)" in cell.source and "survivor" in cell.source)
    assert [o.data["text/plain"] for o in section4.outputs if o.output_type == "execute_result"] == ["30"]
    shown = text_of(widget_outputs_of(nb))
    assert re.search(r"^workload 5: \d+\.\d\d s \(the kernel's cap: 30 s\)\n.*answered by", shown, re.M), shown
    assert "workload 1,000,000" not in shown
    assert "sk-kernel-env-secret" not in nbformat.writes(nb)


def test_the_chat_standin_wants_the_real_key_over_https(chat_service):
    """What makes the walkthrough's answer proof of injection: without the real key, 401."""
    context = ssl.create_default_context(cafile=chat_service["ca"])
    url = f"https://localhost:{chat_service['port']}/v1/chat/completions"
    body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}).encode()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                         urllib.request.HTTPSHandler(context=context))

    def status(headers):
        try:
            with opener.open(urllib.request.Request(url, data=body, headers=headers), timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())
    assert status({})[0] == 401
    assert status({"Authorization": "Bearer belljar-secret-OPENAI_API_KEY-" + "0" * 32})[0] == 401
    code, answer = status({"Authorization": f"Bearer {KERNEL_KEY}"})
    assert code == 200 and answer["usage"]["completion_tokens"] > 0
