"""What the MCP suites share: a workspace with a secret in it, where audit records go, the
server's flags, and how a result and a refusal read."""
import json
import os
import pathlib
import shutil
import tempfile

import pytest

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


@pytest.fixture
def audit_dir():
    """Where the router and each session write their audit records (outside the workspace)."""
    path = pathlib.Path(tempfile.mkdtemp(prefix="belljar-mcp-audit-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def audit_records(audit_dir):
    return [json.loads(line) for line in (audit_dir / "audit.jsonl").read_text().splitlines()]


async def call_refused(client, name, arguments):
    """The JSON-RPC error a call got (the SDK raises it), as its text."""
    try:
        result = await client.call_tool(name, arguments)
    except Exception as error:  # noqa: BLE001 - the SDK's own error type varies by revision
        return str(error)
    raise AssertionError(f"{name} was not refused: {result}")


