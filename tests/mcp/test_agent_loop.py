"""One agent's loop, end to end, against `belljar mcp --http` with the official MCP Python SDK:
two sessions of its own, data loaded, a checkpoint, the state wrecked and rolled back, a long
call cancelled, a third session left to idle out, and the audit records of it all. Each answer
is checked as an agent would read it (structuredContent), and each session stays its own.
(fork_session is not built: see the README's "Going back".)"""
import asyncio

from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from test_http import AUTH, HttpServer

from conftest import audit_records, call_refused, text_of


def printed(result):
    assert not result.is_error, text_of(result)
    return "".join(o.get("text", "") for o in result.structured_content["outputs"]
                   if o["type"] == "stream")


async def agent(url):
    seen = {}
    async with create_mcp_http_client(headers=AUTH) as http_client:
        async with Client(streamable_http_client(url, http_client=http_client),
                          mode="legacy") as client:
            call = client.call_tool
            a = (await call("open_session", {})).structured_content["session"]
            b = (await call("open_session", {})).structured_content["session"]
            # Load data in each.
            await call("run_python", {"session": a, "code": (
                "import numpy as np\nprices = np.linspace(1, 100, 1_000_000)\n"
                "summary = {'n': len(prices), 'mean': round(float(prices.mean()), 3)}")})
            await call("run_python", {"session": b, "code": "rows = list(range(10))"})
            kept = (await call("checkpoint", {"session": a, "name": "loaded"})
                    ).structured_content
            seen["kept"] = kept
            # A bad step wrecks the state.
            await call("run_python", {"session": a, "code": (
                "prices[:] = float('nan')\nsummary.clear()\ndel np\n"
                "open('scratch.csv', 'w').write('x')")})
            seen["wrecked"] = printed(await call("run_python", {"session": a, "code": (
                "print(summary, 'np' in dir())")}))
            rolled = await call("rollback", {"session": a, "checkpoint": kept["checkpoint"]})
            seen["rolled"] = rolled.structured_content
            seen["after"] = printed(await call("run_python", {"session": a, "code": (
                "print(summary, round(float(prices.mean()), 3), 'np' in dir())")}))
            # The other session is untouched, and a's checkpoint means nothing there.
            seen["b_rows"] = printed(await call("run_python", {"session": b,
                                                               "code": "print(len(rows))"}))
            seen["b_rollback"] = await call("rollback", {"session": b,
                                                         "checkpoint": kept["checkpoint"]})
            seen["guessed"] = await call_refused(client, "rollback", {
                "session": "not-a-session", "checkpoint": kept["checkpoint"]})
            # A long call, cancelled once it runs: the session lives on.
            running = asyncio.Event()

            async def on_progress(done, total, message):
                running.set()

            long_call = asyncio.ensure_future(call(
                "run_python", {"session": b, "code": (
                    "import time\nfor i in range(600):\n    print('step', i, flush=True)\n"
                    "    time.sleep(0.1)")}, progress_callback=on_progress))
            await asyncio.wait_for(running.wait(), 60)
            long_call.cancel()
            try:
                await long_call
            except asyncio.CancelledError:
                seen["cancelled"] = True
            seen["b_after_cancel"] = printed(await call("run_python", {
                "session": b, "code": "print(sum(rows))"}))
            # A third session, left alone, idles out while the agent works in the other two.
            c = (await call("open_session", {})).structured_content["session"]
            listed = [c]
            while c in listed:
                for working in (a, b):
                    await call("run_python", {"session": working, "code": "pass"})
                result = await call("list_sessions", {})
                listed = [s["session"] for s in result.structured_content["sessions"]]
                if c in listed:
                    await asyncio.sleep(0.2)  # a poll's pace, not a synchronisation
            seen["c_gone"] = await call_refused(client, "run_python", {"code": "1", "session": c})
            seen["a_still"] = printed(await call("run_python", {"session": a,
                                                                "code": "print(summary['n'])"}))
            seen["sessions"] = (a, b, c)
    return seen


def test_an_agent_loads_checkpoints_wrecks_rolls_back_cancels_and_idles_out(workspace, audit_dir):
    server = HttpServer(workspace, "--audit-log", str(audit_dir / "audit.jsonl"),
                        "--idle-timeout", "3")
    try:
        seen = asyncio.run(asyncio.wait_for(agent(server.url), 240))
    finally:
        assert server.stop() == 0, "".join(server.log)
    assert seen["kept"]["name"] == "loaded" and seen["kept"]["checkpoint"].startswith("ckpt_")
    assert seen["wrecked"] == "{} False\n"
    assert seen["rolled"]["checkpoint"] == seen["kept"]["checkpoint"]
    assert seen["rolled"]["workspace"]["made"] == ["scratch.csv"]
    assert seen["after"] == "{'n': 1000000, 'mean': 50.5} 50.5 True\n"
    assert seen["b_rows"] == "10\n"
    assert seen["b_rollback"].is_error and "no checkpoint" in text_of(seen["b_rollback"])
    assert "unknown session" in seen["guessed"]
    assert seen["cancelled"]
    assert seen["b_after_cancel"] == "45\n"
    assert "unknown session" in seen["c_gone"]
    assert seen["a_still"] == "1000000\n"
    # The audit log: the router's records of the three sessions, the idle one's close, and in
    # session a's own records the checkpoint and the rollback.
    records = audit_records(audit_dir)
    opened = [r["session_kernel"] for r in records
              if r["event"] == "mcp_session_open" and not r.get("own")]
    assert len(opened) == 3
    idle = [r["session_kernel"] for r in records
            if r["event"] == "mcp_session_close" and r["reason"] == "idle"]
    assert idle == [opened[2]]
    checkpoints = [(r["op"], r["ok"], r["name"]) for r in records
                   if r["event"] == "checkpoint" and r["kernel"] == opened[0]]
    assert checkpoints == [("make", True, "loaded"), ("rollback", True, "loaded")]
    assert not [r for r in records if r["event"] == "checkpoint" and r["kernel"] != opened[0]
                and r.get("op") == "rollback" and r["ok"]]
