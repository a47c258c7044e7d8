"""nbclient executes every notebook in notebooks/ on the belljar kernel, in the sandbox, with the
chat stand-in running on loopback as the demo runs it: over HTTPS with a demo CA made for the run
(scripts/demo-ca.sh) that the kernel trusts through SSL_CERT_FILE in its environment, wanting the
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

import nbformat
import pytest

from belljar_testing import PYTHON, SOURCE, install_kernelspec

sys.path.insert(0, str(SOURCE / "scripts"))
from execute_notebook import NotebookClient  # noqa: E402  nbclient, reading ipywidgets 6's widgets too

NOTEBOOKS = sorted((SOURCE / "notebooks").glob("*.ipynb"))
# The session's Python: Debian's, with its packages, and a learner's venv of current PyPI
# releases (requirements/sandbox-python.txt, made by scripts/build.sh).
SESSION_PYTHONS = {"debian": PYTHON,
                   "venv": os.environ.get("BELLJAR_SANDBOX_VENV_PYTHON",
                                          str(SOURCE / "build/venvs/sandbox-python/bin/python"))}
KERNEL_KEY = "sk-kernel-env-secret-abcdef123456"  # the course's key: the kernel's environment only
PLACEHOLDER = r"belljar-secret-OPENAI_API_KEY-[0-9a-f]{32}"


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


def execute_notebook(path, service, workdir, python=PYTHON):
    prefix = tempfile.mkdtemp(prefix="belljar-nb-")
    port = service["port"]
    spec = install_kernelspec(prefix, "belljar-nb", [
        "--python", python, "--timeout", "30", "--secret", f"OPENAI_API_KEY@localhost:{port}",
        "--allow-local-net", f"localhost:{port}",
        "--set-env", f"CHAT_API_BASE=https://localhost:{port}/v1"])
    os.environ["JUPYTER_PATH"] = str(spec.parent.parent)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, kernel_name="belljar-nb", timeout=120,
                            resources={"metadata": {"path": str(workdir)}})
    client.execute()
    shutil.rmtree(prefix, ignore_errors=True)
    return nb


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
    # What the kernel inherits: the course's key, and the demo CA it verifies the service with.
    os.environ["OPENAI_API_KEY"] = KERNEL_KEY
    os.environ["SSL_CERT_FILE"] = chat_service["ca"]
    try:
        nb = execute_notebook(path, chat_service, tmp_path, SESSION_PYTHONS[python])
    finally:
        del os.environ["OPENAI_API_KEY"]
        del os.environ["SSL_CERT_FILE"]
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
