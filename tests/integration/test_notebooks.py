"""nbclient executes every notebook in notebooks/ on the belljar kernel, in the sandbox, with the
chat stand-in running on loopback as the demo runs it. An error in a cell not tagged
raises-exception fails the test."""
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import nbformat
import pytest
from nbclient import NotebookClient

from belljar_testing import SOURCE, install_kernelspec

NOTEBOOKS = sorted((SOURCE / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def chat_service():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(SOURCE / "notebooks/services/chat_standin.py"),
                             "--port", str(port)], stdout=subprocess.PIPE, text=True)
    proc.stdout.readline()  # it prints its address once listening
    yield port
    proc.terminate()
    proc.wait(10)


def execute_notebook(path, port, workdir):
    prefix = tempfile.mkdtemp(prefix="belljar-nb-")
    spec = install_kernelspec(prefix, "belljar-nb", [
        "--timeout", "30", "--allow-net", f"127.0.0.1:{port}",
        "--set-env", f"CHAT_API_BASE=http://127.0.0.1:{port}/v1"])
    os.environ["JUPYTER_PATH"] = str(spec.parent.parent)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, kernel_name="belljar-nb", timeout=120,
                            resources={"metadata": {"path": str(workdir)}})
    client.execute()
    shutil.rmtree(prefix, ignore_errors=True)
    return nb


def outputs_of(nb):
    return [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_without_unexpected_errors(path, chat_service, tmp_path):
    os.chmod(tmp_path, 0o777)
    (tmp_path / ".env").write_text("OPENAI_API_KEY=sk-notebook-test-secret-123456\n")
    os.environ["OPENAI_API_KEY"] = "sk-kernel-env-secret-abcdef123456"
    try:
        nb = execute_notebook(path, chat_service, tmp_path)
    finally:
        del os.environ["OPENAI_API_KEY"]
    text = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
                   for o in outputs_of(nb))
    assert "sk-notebook-test-secret" not in text and "sk-kernel-env-secret" not in text
    if path.name == "walkthrough.ipynb":
        mimes = {m for o in outputs_of(nb) for m in o.get("data", {})}
        assert "image/png" in mimes and "text/html" in mimes
        errors = [o for o in outputs_of(nb) if o.output_type == "error"]
        assert any(e.ename == "TimeoutError" for e in errors)
        assert "OPENAI_API_KEY present? False" in text
