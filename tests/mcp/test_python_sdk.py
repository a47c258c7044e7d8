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
import re
import subprocess
import time

import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from conftest import (
    BELLJAR,
    ISOLATION,
    SANDBOX_PYTHON,
    audit_records,
    call_refused,
    server_args,
    text_of,
)


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
    assert set(tools) == {"run_python", "reset_session", "list_files", "read_file", "write_file",
                          "checkpoint", "rollback", "list_checkpoints", "drop_checkpoint",
                          "open_session", "close_session", "list_sessions"}
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


def raw_exchange(workspace, messages, flags=()):
    """Each message sent on one line, stdin then closed; the server's replies by id."""
    lines = "".join(json.dumps(message) + "\n" for message in messages)
    done = subprocess.run([BELLJAR, *server_args(workspace), *flags], input=lines,
                          capture_output=True,
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


def high_water_mb(pid):
    status = pathlib.Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024


def test_a_client_that_reads_slowly_holds_the_server_to_a_bound(workspace):
    """20 answers of 11 MB each, asked for at once by a client that stops reading for five
    seconds after the first: neither the router nor the session piles them up (16 MiB queued at
    most, beside the answer at hand). Before, the router read them all and held them."""
    (workspace / "big.bin").write_bytes(os.urandom(8 << 20))
    server = subprocess.Popen([BELLJAR, *server_args(workspace)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        asks = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "slow", "version": "0"}}}]
        asks += [{"jsonrpc": "2.0", "id": 2 + i, "method": "tools/call",
                  "params": {"name": "read_file",
                             "arguments": {"path": "big.bin", "max_bytes": 8 << 20}}}
                 for i in range(20)]
        server.stdin.write("".join(json.dumps(a) + "\n" for a in asks).encode())
        server.stdin.flush()
        session = None
        answered = 0
        while answered < 21:
            line = server.stdout.readline()
            assert line, "the server ended early"
            answered += "id" in json.loads(line)
            if session is None:
                children = pathlib.Path(f"/proc/{server.pid}/task/{server.pid}/children")
                session = int(children.read_text().split()[0])
            if answered == 2:
                time.sleep(5)  # the slow client's pause, not a synchronisation
        router_mb, session_mb = high_water_mb(server.pid), high_water_mb(session)
    finally:
        server.communicate(timeout=120)  # stdin closed, what is left read: the server ends
    assert router_mb < 150 and session_mb < 150, (router_mb, session_mb)


# -- sessions as handles ----------------------------------------------------------------------


async def sessions_as_handles(workspace, audit_dir, mode):
    params = StdioServerParameters(
        command=BELLJAR,
        args=[*server_args(workspace), "--max-sessions", "3", "--audit-log",
              str(audit_dir / "audit.jsonl")])
    seen = {}
    async with Client(params, mode=mode) as client:
        seen["tools"] = {tool.name: tool for tool in (await client.list_tools()).tools}
        opened = []
        for _ in range(2):
            result = await client.call_tool("open_session", {})
            assert not result.is_error, text_of(result)
            opened.append(result.structured_content["session"])
        a, b = opened
        # Three interpreters: each keeps its own state.
        await client.call_tool("run_python", {"code": "x = 'own'"})
        await client.call_tool("run_python", {"code": "x = 'a'", "session": a})
        await client.call_tool("run_python", {"code": "x = 'b'", "session": b})
        seen["values"] = [
            (await client.call_tool("run_python", {"code": "print(x)", **named})).content[0].text
            for named in ({}, {"session": a}, {"session": b})]
        # Each its own sandbox: its own private temporary folder, the same workspace.
        tmp = "import os, tempfile; mine = os.path.join(tempfile.gettempdir(), 'mine.txt')\n"
        await client.call_tool("run_python", {"code": tmp + "open(mine, 'w').write('a')",
                                              "session": a})
        seen["tmp"] = [text_of(await client.call_tool(
            "run_python", {"code": tmp + "print(os.path.exists(mine))", **named}))
            for named in ({}, {"session": a}, {"session": b})]
        await client.call_tool("write_file", {"path": "shared.txt", "content": "from a",
                                              "session": a})
        seen["shared"] = text_of(await client.call_tool(
            "run_python", {"code": "print(open('shared.txt').read())", "session": b}))
        listed = await client.call_tool("list_sessions", {})
        seen["listed"] = listed.structured_content["sessions"]
        seen["full"] = await call_refused(client, "open_session", {})
        guess = a[:-1] + ("1" if a.endswith("0") else "0")  # one digit off a real handle
        seen["guessed"] = await call_refused(client, "run_python", {"code": "1", "session": guess})
        seen["own_close"] = await call_refused(
            client, "close_session",
            {"session": next(s["session"] for s in seen["listed"] if s["own"])})
        closed = await client.call_tool("close_session", {"session": a})
        seen["closed"] = closed.structured_content["closed"]
        seen["after_close"] = await call_refused(client, "run_python", {"code": "x", "session": a})
        seen["b_after"] = text_of(await client.call_tool("run_python",
                                                         {"code": "print(x)", "session": b}))
        seen["listed_after"] = (await client.call_tool("list_sessions", {})
                                ).structured_content["sessions"]
        seen["a"], seen["b"] = a, b
    return seen


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_sessions_are_handles_each_its_own_sandbox(workspace, audit_dir, mode):
    seen = asyncio.run(sessions_as_handles(workspace, audit_dir, mode))
    tools = seen["tools"]
    assert {"open_session", "close_session", "list_sessions"} <= set(tools)
    assert "session" in tools["run_python"].input_schema["properties"]
    assert seen["values"] == ["own\n", "a\n", "b\n"]
    assert seen["tmp"] == ["False\n", "True\n", "False\n"]
    assert seen["shared"] == "from a\n"
    assert len(seen["listed"]) == 3
    assert sum(1 for s in seen["listed"] if s["own"]) == 1
    assert {seen["a"], seen["b"]} <= {s["session"] for s in seen["listed"]}
    assert "--max-sessions 3" in seen["full"]
    assert "unknown session" in seen["guessed"]
    assert "ends with the connection" in seen["own_close"]
    assert seen["closed"] == seen["a"]
    assert "unknown session" in seen["after_close"]
    assert seen["b_after"] == "b\n"
    assert {s["session"] for s in seen["listed_after"]} == (
        {s["session"] for s in seen["listed"]} - {seen["a"]})
    # The audit log: the router's records name each session's kernel, whose own records follow.
    records = audit_records(audit_dir)
    own = [r["session_kernel"] for r in records
           if r["event"] == "mcp_session_open" and r.get("own")]
    opened = [r["session_kernel"] for r in records
              if r["event"] == "mcp_session_open" and not r.get("own")]
    assert len(own) == 1 and len(opened) == 2
    started = {r["kernel"] for r in records if r["event"] == "kernel_start"}
    assert set(own + opened) == started
    closes = [r for r in records if r["event"] == "mcp_session_close"]
    assert [r["reason"] for r in closes if r["session_kernel"] == opened[0]] == ["asked"]
    # The others closed when the client left.
    assert {r["reason"] for r in closes if r["session_kernel"] != opened[0]} == {
        "the client closed its input"}


async def session_folders(workspace):
    params = StdioServerParameters(command=BELLJAR,
                                   args=[*server_args(workspace), "--session-folders"])
    async with Client(params, mode="legacy") as client:
        await client.call_tool("run_python", {"code": "open('mine.txt', 'w').write('own')"})
        handle = (await client.call_tool("open_session", {})).structured_content["session"]
        await client.call_tool("write_file", {"path": "theirs.txt", "content": "opened",
                                              "session": handle})
        folders = sorted((workspace / ".belljar-sessions").iterdir())
        reach = await client.call_tool("run_python", {"session": handle, "code": (
            "import os\n"
            "def attempt(path):\n"
            "    try:\n"
            "        return open(path).read()\n"
            "    except OSError as error:\n"
            "        return type(error).__name__\n"
            f"[sorted(os.listdir('.')), attempt({str(workspace / '.env')!r})] + "
            f"[attempt(os.path.join(f, 'mine.txt')) for f in {[str(f) for f in folders]!r}]")})
        listed = await client.call_tool("list_files", {})
        return folders, reach, listed


def test_session_folders_keep_each_sessions_files_its_own(workspace):
    folders, reach, listed = asyncio.run(asyncio.wait_for(session_folders(workspace), 120))
    # Two sessions, two folders below the workspace; the files each wrote are in its own.
    assert len(folders) == 2
    assert sorted(p.name for f in folders for p in f.iterdir()) == ["mine.txt", "theirs.txt"]
    # The opened session sees its own file only: not the workspace's, not the other folder's.
    seen = reach.structured_content["outputs"][0]["data"]["text/plain"]
    assert "'theirs.txt'" in seen and "'mine.txt'" not in seen and "'own'" not in seen, seen
    assert seen.count("FileNotFoundError") == 3, seen  # the workspace's .env, both folders' file
    assert "mine.txt" in text_of(listed) and "theirs.txt" not in text_of(listed)


def test_session_folders_refuse_a_root_that_is_not_the_servers_own_folder(workspace, audit_dir):
    """A link where the sessions' folders go (the sandbox cannot make a dot-name, but a user
    can): said once at start, and nothing starts."""
    (workspace / ".belljar-sessions").symlink_to(audit_dir)
    done = subprocess.run([BELLJAR, *server_args(workspace), "--session-folders"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "not a folder of this user's" in done.stderr and done.stderr.count("\n") == 1
    assert list(audit_dir.iterdir()) == []


async def idle_session(workspace, audit_dir):
    params = StdioServerParameters(
        command=BELLJAR,
        args=[*server_args(workspace), "--idle-timeout", "1", "--audit-log",
              str(audit_dir / "audit.jsonl")])
    async with Client(params, mode="legacy") as client:
        handle = (await client.call_tool("open_session", {})).structured_content["session"]
        busy = await client.call_tool("run_python", {"code": "import time; time.sleep(2); 'done'",
                                                     "session": handle})
        # Watched until it is gone: list_sessions itself is no activity of that session.
        listed = [handle]
        while handle in listed:
            result = await client.call_tool("list_sessions", {})
            listed = [s["session"] for s in result.structured_content["sessions"]]
            if handle in listed:
                await asyncio.sleep(0.2)  # a poll's pace, not a synchronisation
        gone = await call_refused(client, "run_python", {"code": "1", "session": handle})
    return busy, gone


def test_an_opened_session_idle_past_the_timeout_ends_with_a_record(workspace, audit_dir):
    busy, gone = asyncio.run(asyncio.wait_for(idle_session(workspace, audit_dir), 120))
    # A call running longer than --idle-timeout is no idleness.
    assert not busy.is_error and busy.structured_content["outputs"][0]["data"]["text/plain"] \
        == "'done'"
    assert "unknown session" in gone
    records = audit_records(audit_dir)
    closes = [r for r in records if r["event"] == "mcp_session_close" and r["reason"] == "idle"]
    assert len(closes) == 1
    ended = [r for r in records if r["event"] == "shutdown" and r["kernel"] == closes[0]["session_kernel"]]
    assert len(ended) == 1


def test_a_policy_file_the_sandbox_could_rewrite_is_refused(workspace, audit_dir):
    # The outside review of the router: each session's process read --policy again, so a cell
    # that rewrote a policy file in the workspace gave the next open_session --isolation none.
    # A policy file is read again by every restart: never where the sandbox can write, nor
    # with another name (a hard link) that could lie there.
    inside = workspace / "policy.json"
    inside.write_text(json.dumps({"timeout": "30s"}))
    outside = audit_dir / "policy.json"
    outside.write_text(json.dumps({"timeout": "30s"}))
    linked = audit_dir / "linked.json"
    linked.symlink_to(inside)  # its name outside, the file it leads to inside
    for policy, why in ((inside, "the workspace"), (linked, "symbolic link"),
                        (outside, "hard link")):
        if policy == outside:
            os.link(outside, workspace / "linked-policy.json")
        done = subprocess.run([BELLJAR, *server_args(workspace), "--policy", str(policy)],
                              input="", capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 2, done.stderr
        assert f"--policy {policy}" in done.stderr and why in done.stderr, done.stderr
        assert done.stdout == ""
    (workspace / "linked-policy.json").unlink()
    served = raw_exchange(workspace, [{"jsonrpc": "2.0", "id": 1, "method": "ping"}],
                          ["--policy", str(outside)])
    assert served[1]["result"] == {}


async def renamed_working_folder(workspace, policy):
    run = workspace / "run"
    run.mkdir()
    os.chmod(run, 0o777)
    relative = os.path.relpath(policy, run)  # ../../<its folder>/policy.json
    params = StdioServerParameters(
        command=BELLJAR, cwd=str(run),
        args=["mcp", "--workspace", "..", "--python", SANDBOX_PYTHON, "--isolation", ISOLATION,
              "--policy", relative])
    # Moved to a/b/run, the same relative path names a/<its folder>/policy.json: the cell's.
    planted = os.path.normpath(os.path.join("a/b/run", relative))
    async with Client(params, mode="legacy") as client:
        moved = await client.call_tool("run_python", {"code": (
            "import os, json\n"
            f"os.makedirs(os.path.dirname({planted!r})); os.makedirs('a/b')\n"
            f"open({planted!r}, 'w').write(json.dumps({{'timeout': '600s'}}))\n"
            "os.rename('run', 'a/b/run')\n")})
        handle = (await client.call_tool("open_session", {})).structured_content["session"]
        ran = await client.call_tool("run_python", {"code": "import os\nos.getcwd()",
                                                    "session": handle})
    return moved, ran


def test_a_session_reads_no_policy_the_sandbox_moved_or_wrote(workspace, audit_dir):
    # The seventh outside pass: the router's working folder lay inside the workspace and its
    # --policy was relative. A cell renamed that folder, so the relative path named a file the
    # cell wrote, and the next open_session ran with it (--isolation none). Each session now
    # gets the router's policy as it stood at start: absolute paths, the policy file inlined.
    policy = audit_dir / "policy.json"
    policy.write_text(json.dumps({"timeout": "30s"}))
    moved, ran = asyncio.run(renamed_working_folder(workspace, policy))
    assert not moved.is_error, text_of(moved)
    assert (workspace / "a" / "b" / "run").is_dir()
    assert not ran.is_error, text_of(ran)
    assert ran.structured_content["facts"]["limits"]["timeout_seconds"] == 30
    assert f"'{workspace}'" in text_of(ran)


async def checkpoints_through_the_tools(workspace, mode):
    params = StdioServerParameters(command=BELLJAR, args=[*server_args(workspace),
                                                          "--checkpoints", "2"])
    seen = {}
    async with Client(params, mode=mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        seen["tools"] = tools
        await client.call_tool("run_python", {"code": "data = list(range(5))"})
        kept = await client.call_tool("checkpoint", {"name": "loaded"})
        seen["kept"] = kept.structured_content
        await client.call_tool("run_python", {"code": "data.clear()\nopen('made.txt', 'w')"})
        rolled = await client.call_tool("rollback", {"checkpoint": kept.structured_content[
            "checkpoint"]})
        seen["rolled"] = rolled
        seen["data"] = text_of(await client.call_tool("run_python", {"code": "print(data)"}))
        # A second session's checkpoints are its own: the first's handle means nothing there.
        other = (await client.call_tool("open_session", {})).structured_content["session"]
        seen["other_rollback"] = await client.call_tool(
            "rollback", {"checkpoint": kept.structured_content["checkpoint"], "session": other})
        seen["other_list"] = (await client.call_tool(
            "list_checkpoints", {"session": other})).structured_content
        await client.call_tool("checkpoint", {"name": "second"})
        third = await client.call_tool("checkpoint", {})
        seen["third"] = third
        seen["listed"] = (await client.call_tool("list_checkpoints", {})).structured_content
        seen["dropped"] = (await client.call_tool("drop_checkpoint", {"checkpoint": "second"})
                           ).structured_content
        seen["bad_name"] = await call_refused(client, "checkpoint", {"name": "x\nimport os"})
        seen["bad_ref"] = await call_refused(client, "rollback", {"checkpoint": "a b"})
        seen["missing"] = await call_refused(client, "rollback", {})
        seen["alive"] = text_of(await client.call_tool("run_python", {"code": "print(len(data))"}))
    return seen


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_checkpoint_tools_keep_and_return_to_a_sessions_state(workspace, mode):
    seen = asyncio.run(checkpoints_through_the_tools(workspace, mode))
    tools = seen["tools"]
    assert {"checkpoint", "rollback", "list_checkpoints", "drop_checkpoint"} <= set(tools)
    assert "session" in tools["rollback"].input_schema["properties"]
    handle = seen["kept"]["checkpoint"]
    assert re.fullmatch(r"ckpt_[0-9a-f]{32}", handle)
    assert seen["kept"]["name"] == "loaded"
    rolled = seen["rolled"]
    assert not rolled.is_error, text_of(rolled)
    assert rolled.structured_content["checkpoint"] == handle
    assert rolled.structured_content["workspace"] == {"made": ["made.txt"], "removed": [],
                                                      "renamed": []}
    assert "rolled back to 'loaded'" in text_of(rolled)
    assert seen["data"] == "[0, 1, 2, 3, 4]\n"
    assert seen["other_rollback"].is_error
    assert "no checkpoint" in text_of(seen["other_rollback"])
    assert seen["other_list"] == {"checkpoints": []}
    # --checkpoints 2: the third dropped the oldest, with a notice.
    assert "the oldest, 'loaded', was dropped" in text_of(seen["third"])
    assert [c["name"] for c in seen["listed"]["checkpoints"]] == ["second", "cp1"]
    assert seen["dropped"]["name"] == "second"
    assert "name must be 1 to 64" in seen["bad_name"]
    assert "checkpoint must be a handle" in seen["bad_ref"]
    assert "missing required argument checkpoint" in seen["missing"]
    assert seen["alive"] == "5\n"
