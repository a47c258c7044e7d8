"""The README's snippets for agents, run as written: the mcpServers entry (also what the
TypeScript SDK suite in tests/mcp starts) and the jupyter_client example."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from belljar_testing import (
    BELLJAR,
    ISOLATION,
    PYTHON,
    install_kernelspec,
    mcp_session_lines,
    readme_blocks,
    sandbox_writable_dir,
)


@pytest.fixture
def workspace():
    ws = str(sandbox_writable_dir("belljar-readme-"))
    yield ws
    shutil.rmtree(ws, ignore_errors=True)


def test_the_mcp_servers_entry_starts_a_working_server(workspace):
    blocks = [b for b in readme_blocks("json") if '"mcpServers"' in b]
    assert len(blocks) == 1
    entry = json.loads(blocks[0])["mcpServers"]["belljar"]
    assert entry["command"] == "/path/to/belljar"
    assert entry["args"][0] == "mcp"
    args = [workspace if a == "/path/to/workspace" else a for a in entry["args"]]
    server = subprocess.Popen([BELLJAR, *args, "--python", PYTHON, "--isolation", ISOLATION],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    requests = [
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "run_python", "arguments": {"code": "import os; os.getcwd()"}}},
    ]
    # Closing stdin is MCP's stdio shutdown: the server answers what it was sent, then exits.
    out, err = server.communicate(mcp_session_lines(*requests), timeout=120)
    assert server.returncode == 0, err
    replies = {m["id"]: m for m in map(json.loads, out.splitlines())}
    assert replies[1]["result"]["protocolVersion"] == "2025-06-18"
    result = replies[2]["result"]
    assert result["isError"] is False
    assert result["content"] == [{"type": "text", "text": "Out[1]: %r" % workspace}]
    assert result["structuredContent"]["facts"]["limits"]["timeout_seconds"] == 30


def test_the_jupyter_client_example_runs_as_written(workspace):
    blocks = [b for b in readme_blocks("python") if "start_new_kernel" in b]
    assert len(blocks) == 1
    with tempfile.TemporaryDirectory(prefix="belljar-spec-") as prefix:
        install_kernelspec(prefix, name="belljar")  # the name the example asks for
        env = dict(os.environ, JUPYTER_PATH=os.path.join(prefix, "share", "jupyter"))
        done = subprocess.run([sys.executable, "-c", blocks[0]], cwd=workspace, env=env,
                              capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("execute_result") and "2432902008176640000" in line for line in lines)
    status, facts = lines[-1].split(" ", 1)
    assert status == "ok"
    assert "'wall_ms'" in facts and "'limit_hit': None" in facts


def test_the_checkpoint_and_rollback_calls_go_back_as_shown(workspace):
    blocks = [b for b in readme_blocks("json") if '"name": "rollback"' in b]
    assert len(blocks) == 1
    text, calls, at = blocks[0].strip(), [], 0
    while at < len(text):
        call, at = json.JSONDecoder().raw_decode(text, at)
        calls.append(call)
        at = len(text) - len(text[at:].lstrip())
    keep, back = calls
    for call in (keep, back):
        del call["params"]["arguments"]["session"]  # this connection's own session
    def run(id, code):
        return {"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "run_python", "arguments": {"code": code}}}
    server = subprocess.Popen([BELLJAR, "mcp", "--workspace", workspace, "--python", PYTHON,
                               "--isolation", ISOLATION], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = server.communicate(mcp_session_lines(
        run(2, "rows = [1, 2, 3]"), keep, run(3, "rows.clear()"), back, run(4, "rows")),
        timeout=120)
    assert server.returncode == 0, err
    replies = {m["id"]: m for m in map(json.loads, out.splitlines())}
    kept = replies[keep["id"]]["result"]["structuredContent"]
    assert kept["name"] == "loaded" and kept["checkpoint"].startswith("ckpt_")
    assert replies[back["id"]]["result"]["structuredContent"]["checkpoint"] == kept["checkpoint"]
    assert replies[4]["result"]["content"] == [{"type": "text", "text": "Out[2]: [1, 2, 3]"}]
