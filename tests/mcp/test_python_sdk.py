"""`belljar mcp` driven by the official MCP Python SDK (PyPI's `mcp`, pinned in
requirements/mcp-sdk.txt), in each of its connection modes: `legacy` (the initialize handshake,
2025-11-25), `auto` (server/discover first, the SDK's default) and pinned to the stateless
2026-07-28 revision. Each mode runs code in one persistent sandboxed session, reads its
structured results and errors, and uses the file tools. A raw client checks what the SDK would
not send: a revision the server does not speak."""
import asyncio
import json
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

SOURCE = pathlib.Path(os.environ.get("BELLJAR_SOURCE", pathlib.Path(__file__).parents[2]))
BELLJAR = os.environ.get("BELLJAR", str(SOURCE / "build" / "belljar"))
SANDBOX_PYTHON = os.environ["BELLJAR_SANDBOX_VENV_PYTHON"]
ISOLATION = os.environ.get("BELLJAR_TEST_ISOLATION", "strict")


@pytest.fixture
def workspace():
    """A fresh workspace the sandbox's user may write (it is nobody when the tests run as root),
    with a secret the agent must never read."""
    path = pathlib.Path(tempfile.mkdtemp(prefix="belljar-mcp-sdk-"))
    os.chmod(path, 0o777)
    (path / ".env").write_text("API_TOKEN=hunter2-not-for-the-agent\n")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def server_args(workspace):
    return ["mcp", "--workspace", str(workspace), "--python", SANDBOX_PYTHON, "--isolation",
            ISOLATION, "--timeout", "30"]


def text_of(result):
    return "".join(block.text for block in result.content if block.type == "text")


async def drive(workspace, mode):
    params = StdioServerParameters(command=BELLJAR, args=server_args(workspace))
    async with Client(params, mode=mode) as client:
        session = client.session
        seen = {"protocol": client.protocol_version,
                "initialized": session.initialize_result is not None,
                "discovered": session.discover_result is not None,
                "server": client.server_info}
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        seen["tools"] = tools
        first = await client.call_tool("run_python", {"code": "x = 20\nprint('hello')"})
        second = await client.call_tool("run_python", {"code": "x * 2 + 2"})
        failed = await client.call_tool("run_python", {"code": "1 / 0"})
        wrote = await client.call_tool("write_file", {"path": "notes.txt", "content": "from sdk\n"})
        read = await client.call_tool("run_python",
                                      {"code": "print(open('notes.txt').read(), end='')"})
        secret = await client.call_tool("read_file", {"path": ".env"})
        seen.update(first=first, second=second, failed=failed, wrote=wrote, read=read,
                    secret=secret)
    return seen


@pytest.mark.parametrize("mode", ["legacy", "auto", "2026-07-28"])
def test_each_connection_mode_runs_code_in_one_sandboxed_session(workspace, mode):
    seen = asyncio.run(drive(workspace, mode))
    if mode == "legacy":
        assert seen["initialized"] and not seen["discovered"]
        assert seen["protocol"] == "2025-11-25"
    else:
        # auto probes server/discover first: belljar answers it, so the session is stateless.
        assert seen["discovered"] and not seen["initialized"]
        assert seen["protocol"] == "2026-07-28"
    if mode != "2026-07-28":  # pinned, the SDK asks nothing before its first request
        assert seen["server"].name == "belljar"
        assert seen["server"].icons and seen["server"].icons[0].mime_type == "image/svg+xml"
    assert seen["tools"]["run_python"].icons[0].mime_type == "image/svg+xml"
    tools = seen["tools"]
    assert set(tools) == {"run_python", "reset_session", "list_files", "read_file", "write_file"}
    assert tools["run_python"].title == "Run Python"
    assert tools["run_python"].output_schema["required"] == [
        "status", "execution_count", "outputs", "error", "facts"]
    assert tools["read_file"].annotations.read_only_hint is True

    first, second = seen["first"], seen["second"]
    assert not first.is_error and text_of(first) == "hello\n"
    assert first.structured_content["status"] == "ok"
    assert not second.is_error
    assert second.structured_content["outputs"] == [{"type": "result",
                                                     "data": {"text/plain": "42"}}]
    assert (second.structured_content["execution_count"]
            == first.structured_content["execution_count"] + 1)
    failed = seen["failed"]
    assert failed.is_error and "ZeroDivisionError" in text_of(failed)
    assert failed.structured_content["error"]["ename"] == "ZeroDivisionError"
    assert not seen["wrote"].is_error
    assert text_of(seen["read"]) == "from sdk\n"
    assert seen["secret"].is_error and "hunter2" not in text_of(seen["secret"])
    assert (workspace / "notes.txt").read_text() == "from sdk\n"


def raw_exchange(workspace, messages):
    """Each message sent on one line, stdin then closed; the server's replies by id."""
    lines = "".join(json.dumps(message) + "\n" for message in messages)
    done = subprocess.run([BELLJAR, *server_args(workspace)], input=lines, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return {reply["id"]: reply for reply in map(json.loads, done.stdout.splitlines())}


def test_a_revision_not_spoken_is_refused_with_those_that_are_and_the_server_serves_on(workspace):
    meta = "io.modelcontextprotocol/protocolVersion"
    replies = raw_exchange(workspace, [
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover",
         "params": {"_meta": {meta: "2099-01-01"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": {meta: 20260728}}},
        {"jsonrpc": "2.0", "id": 3, "method": "server/discover",
         "params": {"_meta": {meta: "2026-07-28"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
         "params": {"name": "run_python", "arguments": {"code": "print(6 * 7)"},
                    "_meta": {meta: "2026-07-28"}}},
    ])
    spoken = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
    assert replies[1]["error"]["code"] == -32022
    assert replies[1]["error"]["data"] == {"supported": spoken, "requested": "2099-01-01"}
    assert replies[2]["error"]["code"] == -32022
    assert replies[2]["error"]["data"]["requested"] == "20260728"
    discovered = replies[3]["result"]
    assert discovered["supportedVersions"] == spoken
    assert discovered["resultType"] == "complete"
    assert discovered["ttlMs"] == 0 and discovered["cacheScope"] == "private"
    assert discovered["capabilities"] == {"tools": {"listChanged": False}}
    ran = replies[4]["result"]
    assert ran["resultType"] == "complete" and ran["isError"] is False
    assert ran["structuredContent"]["outputs"] == [{"type": "stream", "name": "stdout",
                                                    "text": "42\n"}]
