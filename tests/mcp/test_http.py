"""`belljar mcp --http`: MCP's Streamable HTTP transport, driven by the official MCP Python SDK
(PyPI's `mcp`) in each of its connection modes, and by a raw HTTP client for what the SDK would
never send: no token, another page's Origin, bodies too large or of the wrong kind, unknown MCP
sessions, a stateless request whose headers disagree with its body. Each is refused with a
status and a sentence, and the server serves on."""
import asyncio
import http.client
import json
import os
import pathlib
import re
import secrets
import select
import signal
import socket
import subprocess
import threading

import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import BELLJAR, audit_records, call_refused, server_args, text_of

TOKEN = "belljar-test-" + secrets.token_hex(16)
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class HttpServer:
    """`belljar mcp --http 127.0.0.1:0`, its URL read from what it prints."""

    def __init__(self, workspace, *flags):
        self.process = subprocess.Popen(
            [BELLJAR, *server_args(workspace), "--http", "127.0.0.1:0", *flags],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, env={**os.environ, "BELLJAR_MCP_TOKEN": TOKEN})
        self.log = []
        for line in self.process.stderr:
            self.log.append(line)
            found = re.search(r"serving MCP \(Streamable HTTP\) at (http://\S+)", line)
            if found:
                self.url = found.group(1)
                break
        else:
            raise AssertionError("the server printed no URL:\n" + "".join(self.log))
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])
        self.drain = threading.Thread(target=lambda: self.log.extend(self.process.stderr),
                                      daemon=True)
        self.drain.start()

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        status = self.process.wait(60)
        self.drain.join(10)
        return status

    def request(self, method, body=None, headers=None, raw_body=None):
        """One raw HTTP request: (status, headers, body text)."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        sent = {"Content-Type": "application/json",
                "Accept": "application/json, text/event-stream", **AUTH, **(headers or {})}
        sent = {k: v for k, v in sent.items() if v is not None}
        data = raw_body if raw_body is not None else (
            json.dumps(body).encode() if body is not None else None)
        connection.request(method, "/mcp", body=data, headers=sent)
        response = connection.getresponse()
        text = response.read().decode()
        connection.close()
        return response.status, dict(response.getheaders()), text


@pytest.fixture
def server(workspace, audit_dir, request):
    flags = getattr(request, "param", ())
    running = HttpServer(workspace, "--audit-log", str(audit_dir / "audit.jsonl"), *flags)
    try:
        yield running
    finally:
        assert running.stop() == 0, "".join(running.log)


def initialize_body(id_=1):
    return {"jsonrpc": "2.0", "id": id_, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "0"}}}


async def drive(url, mode):
    async with create_mcp_http_client(headers=AUTH) as http_client:
        async with Client(streamable_http_client(url, http_client=http_client),
                          mode=mode) as client:
            seen = {"protocol": client.protocol_version}
            seen["tools"] = {tool.name for tool in (await client.list_tools()).tools}
            await client.call_tool("run_python", {"code": "x = 20"})
            seen["answer"] = await client.call_tool("run_python", {"code": "x * 2 + 2"})
            progress = []

            async def on_progress(done, total, message):
                progress.append(message)

            # Output while the cell runs comes as progress, over the call's event stream.
            seen["streamed"] = await client.call_tool(
                "run_python",
                {"code": "import time\nfor i in range(3):\n    print('tick', i, flush=True)\n"
                         "    time.sleep(0.8)"},
                progress_callback=on_progress)
            seen["progress"] = progress
            handle = (await client.call_tool("open_session", {})).structured_content["session"]
            seen["elsewhere"] = await client.call_tool("run_python",
                                                       {"code": "x", "session": handle})
            seen["listed"] = (await client.call_tool("list_sessions", {})).structured_content
            await client.call_tool("close_session", {"session": handle})
            seen["closed"] = await call_refused(client, "run_python",
                                                {"code": "1", "session": handle})
            return seen


@pytest.mark.parametrize("mode", ["legacy", "auto", "2026-07-28"])
def test_the_sdk_runs_code_and_sessions_over_http(server, mode):
    seen = asyncio.run(asyncio.wait_for(drive(server.url, mode), 180))
    assert seen["protocol"] == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert {"run_python", "open_session", "close_session", "list_sessions"} <= seen["tools"]
    assert seen["answer"].structured_content["outputs"][0]["data"]["text/plain"] == "42"
    assert "tick 2" in text_of(seen["streamed"])
    assert any(message and "tick" in message for message in seen["progress"]), seen["progress"]
    # An opened session is its own interpreter.
    assert seen["elsewhere"].is_error and "NameError" in text_of(seen["elsewhere"])
    assert len(seen["listed"]["sessions"]) == 2
    assert "unknown session" in seen["closed"]


async def two_clients(url):
    async with create_mcp_http_client(headers=AUTH) as http_client:
        async with Client(streamable_http_client(url, http_client=http_client),
                          mode="legacy") as first, \
                Client(streamable_http_client(url, http_client=http_client),
                       mode="legacy") as second:
            await first.call_tool("run_python", {"code": "mine = 'first'"})
            theirs = await second.call_tool("run_python", {"code": "mine"})
            own = [s for s in (await first.call_tool("list_sessions", {})
                               ).structured_content["sessions"] if s["own"]]
            reached = await call_refused(second, "run_python",
                                         {"code": "mine", "session": own[0]["session"]})
            return theirs, reached


def test_each_mcp_session_has_its_own_sandbox_no_other_client_reaches(server):
    theirs, reached = asyncio.run(asyncio.wait_for(two_clients(server.url), 180))
    assert theirs.is_error and "NameError" in text_of(theirs)
    assert "unknown session" in reached


def test_what_the_door_refuses_and_the_server_serves_on(server):
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    # No token, a wrong one, another scheme: 401 before anything else is read.
    for auth in (None, "Bearer " + TOKEN[:-1], "Basic " + TOKEN, TOKEN):
        status, headers, _ = server.request("POST", ping, {"Authorization": auth})
        assert status == 401 and headers.get("WWW-Authenticate") == "Bearer", auth
    # A page of another origin, a Host of another name (DNS rebinding).
    status, _, _ = server.request("POST", ping, {"Origin": "http://evil.example"})
    assert status == 403
    status, _, _ = server.request("POST", ping, {"Host": "evil.example:%d" % server.port})
    assert status == 403
    status, _, body = server.request("POST", ping,
                                     {"Origin": "http://localhost:%d" % server.port})
    assert status == 200, body  # through the door: ping is the server's own
    # A body larger than 64 MiB is refused from its Content-Length, unread.
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    connection.putrequest("POST", "/mcp")
    for name, value in {**AUTH, "Content-Type": "application/json",
                        "Content-Length": str(65 << 20)}.items():
        connection.putheader(name, value)
    connection.endheaders()
    assert connection.getresponse().status == 413
    connection.close()
    assert server.request("POST", raw_body=b"x", headers={"Content-Type": "text/plain"})[0] == 415
    assert server.request("PUT", ping)[0] == 405
    assert server.request("GET")[0] == 405  # a stream needs an MCP session
    assert server.request("DELETE")[0] == 400
    unknown = {"Mcp-Session-Id": "00000000-0000-4000-8000-000000000000"}
    assert server.request("DELETE", headers=unknown)[0] == 404
    status, _, body = server.request("POST", ping, unknown)
    assert status == 404 and json.loads(body)["error"]["code"] == -32600
    status, _, body = server.request("POST", raw_body=b"{not json")
    assert status == 400 and json.loads(body)["error"]["code"] == -32700
    status, _, body = server.request("POST", [ping])
    assert status == 400 and "batches" in json.loads(body)["error"]["message"]
    # A stateless request whose headers disagree with its body.
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "run_python", "arguments": {"code": "6 * 7"}, "_meta": meta}}
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
               "Mcp-Name": "read_file"}
    status, _, body = server.request("POST", call, headers)
    assert status == 400 and json.loads(body)["error"]["code"] == -32020
    # The same request told truly is answered: the server served on through all of the above.
    headers["Mcp-Name"] = "run_python"
    status, _, body = server.request("POST", call, {**headers, "Accept": "application/json"})
    assert status == 200, body
    answer = json.loads(body)
    assert answer["result"]["structuredContent"]["outputs"][0]["data"]["text/plain"] == "42"
    # An MCP session made and ended by hand: its id works until DELETE, then is unknown.
    status, headers, body = server.request("POST", initialize_body())
    assert status == 200, body
    session = {"Mcp-Session-Id": headers["Mcp-Session-Id"]}
    assert server.request("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"},
                          session)[0] == 202
    assert server.request("POST", ping, {**session, "MCP-Protocol-Version": "1999-01-01"}
                          )[0] == 400
    assert server.request("POST", ping, session)[0] == 200
    assert server.request("DELETE", headers=session)[0] == 204
    assert server.request("POST", ping, session)[0] == 404


@pytest.mark.parametrize("server", [("--max-sessions", "2")], indirect=True)
def test_one_mcp_session_past_max_sessions_is_a_clear_error(server):
    # The server's own session and one client's: the bound. A third gets no MCP session.
    status, headers, _ = server.request("POST", initialize_body())
    assert status == 200 and "Mcp-Session-Id" in headers
    # Its own session starts with its first call.
    session = {"Mcp-Session-Id": headers["Mcp-Session-Id"]}
    status, _, body = server.request(
        "POST", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session)
    assert status == 200, body
    status, headers, body = server.request("POST", initialize_body())
    answer = json.loads(body)
    assert status == 200 and "Mcp-Session-Id" not in headers
    assert answer["error"]["code"] == -32000 and "--max-sessions 2" in answer["error"]["message"]
    assert server.request("DELETE", headers=session)[0] == 204


async def cancel_by_closing(url):
    """A stateless call whose client goes away is cancelled: the session is free at once."""
    async with create_mcp_http_client(headers=AUTH) as http_client:
        async with Client(streamable_http_client(url, http_client=http_client),
                          mode="2026-07-28") as client:
            started = asyncio.Event()

            async def on_progress(done, total, message):
                started.set()

            call = asyncio.ensure_future(client.call_tool(
                "run_python", {"code": "import time\nprint('in', flush=True)\ntime.sleep(600)"},
                progress_callback=on_progress))
            await asyncio.wait_for(started.wait(), 60)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            after = await client.call_tool("run_python", {"code": "'free'"},
                                           read_timeout_seconds=120)
            return after


def test_closing_a_stateless_calls_stream_cancels_its_cell(server):
    after = asyncio.run(asyncio.wait_for(cancel_by_closing(server.url), 240))
    assert after.structured_content["outputs"][0]["data"]["text/plain"] == "'free'"


@pytest.mark.parametrize("server", [("--idle-timeout", "1")], indirect=True)
def test_an_idle_mcp_session_ends_and_its_id_is_unknown(server, audit_dir):
    status, headers, _ = server.request("POST", initialize_body())
    session = {"Mcp-Session-Id": headers["Mcp-Session-Id"]}
    assert server.request("POST", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                          session)[0] == 200
    # Watched until it is gone (a poll's pace, not a synchronisation).
    for _ in range(600):
        if server.request("POST", {"jsonrpc": "2.0", "id": 3, "method": "ping"},
                          session)[0] == 404:
            break
        threading.Event().wait(0.1)
    else:
        raise AssertionError("the idle MCP session never ended")
    opened = [r for r in audit_records(audit_dir)
              if r["event"] == "mcp_session_open" and r.get("own")]
    closed = [r for r in audit_records(audit_dir)
              if r["event"] == "mcp_session_close" and r["reason"] == "idle"]
    # The server's own session (the stateless requests') never idles; the client's did.
    assert len(opened) == 2 and [r["session_kernel"] for r in closed] == [
        opened[1]["session_kernel"]]


def test_a_client_that_does_not_read_is_cut_off_and_the_server_serves_on(server, workspace):
    """Three large answers asked for on one connection whose client reads nothing: past 16 MiB
    queued the server closes it (one answer larger than that is let through alone)."""
    (workspace / "big.bin").write_bytes(os.urandom(8 << 20))
    status, headers, _ = server.request("POST", initialize_body())
    session = headers["Mcp-Session-Id"]
    requests = b""
    for i in range(3):
        body = json.dumps({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call", "params": {
            "name": "read_file", "arguments": {"path": "big.bin", "max_bytes": 8 << 20}}})
        requests += (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                     f"Authorization: Bearer {TOKEN}\r\nMcp-Session-Id: {session}\r\n"
                     f"Content-Type: application/json\r\nAccept: application/json\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n{body}").encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=120) as raw:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        raw.sendall(requests)
        # Nothing is read: the server hangs up once the second answer would pass the bound (a
        # write that makes no progress would take a minute to time out).
        watch = select.poll()
        watch.register(raw, select.POLLRDHUP | select.POLLHUP | select.POLLERR)
        assert watch.poll(30_000), "the server kept a client that reads nothing"
    status, _, body = server.request(
        "POST", {"jsonrpc": "2.0", "id": 2, "method": "ping"}, {"Mcp-Session-Id": session})
    assert status == 200, body


def test_the_token_reaches_no_session_and_no_sandbox(server):
    status, headers, _ = server.request("POST", initialize_body())
    session = {"Mcp-Session-Id": headers["Mcp-Session-Id"]}
    status, _, body = server.request("POST", {
        "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "run_python", "arguments": {"code": (
                "import os, pathlib\n"
                f"seen = [k for k, v in os.environ.items() if 'MCP' in k or {TOKEN!r} in v]\n"
                "for p in pathlib.Path('/proc').glob('[0-9]*/environ'):\n"
                "    try:\n"
                f"        seen += [str(p)] if {TOKEN!r}.encode() in p.read_bytes() else []\n"
                "    except OSError:\n"
                "        pass\n"
                "seen")}}}, session)
    assert status == 200, body
    assert json.loads(body)["result"]["structuredContent"]["outputs"][0]["data"][
        "text/plain"] == "[]"
    # On the host: the server was given it (its own exec-time block still shows it) and dropped
    # it before any session's process started.
    children = pathlib.Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children")
    sessions = children.read_text().split()
    assert len(sessions) == 2  # the server's own and this client's
    for pid in sessions:
        environ = pathlib.Path(f"/proc/{pid}/environ")
        if os.geteuid() != 0:  # a session's process is not dumpable: not even its user reads it
            with pytest.raises(PermissionError):
                environ.read_bytes()
            continue
        assert TOKEN.encode() not in environ.read_bytes()


def raw_post(port, body, headers=None):
    """One POST's bytes, as a client writes them (for pipelining and malformed headers)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    head = {"Host": f"127.0.0.1:{port}", **AUTH, "Content-Type": "application/json",
            "Accept": "application/json", **(headers or {})}
    return (b"POST /mcp HTTP/1.1\r\n" + b"".join(
        k.encode() + b": " + (v if isinstance(v, bytes) else v.encode()) + b"\r\n"
        for k, v in head.items()) + b"Content-Length: %d\r\n\r\n" % len(data) + data)


def exchange_raw(port, data, responses):
    """Sends `data` on one connection and reads `responses` answers: their status lines."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as raw:
        raw.sendall(data)
        stream = raw.makefile("rb")
        statuses = []
        for _ in range(responses):
            statuses.append(stream.readline().decode().strip())
            length = 0
            while (line := stream.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            stream.read(length)
        return statuses


def test_what_the_outside_review_sent_is_refused_and_the_server_serves_on(server):
    """The outside review of the HTTP server killed it four ways and lost answers two more:
    each is answered now, and the server serves on."""
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    ok = exchange_raw(server.port, raw_post(server.port, ping), 1)
    assert ok == ["HTTP/1.1 200 OK"]
    # A progress token of 17 MiB (a double free); a body nested 100000 deep (the stack); a
    # protocol version header that is not UTF-8 (an exception on the HTTP thread).
    _, headers, _ = server.request("POST", initialize_body())
    session = {"Mcp-Session-Id": headers["Mcp-Session-Id"]}
    status, _, body = server.request("POST", {
        "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "run_python", "arguments": {"code": "1"},
            "_meta": {"progressToken": "A" * (17 << 20)}}}, session)
    assert json.loads(body)["error"]["code"] == -32602, body
    deep = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":' + b"[" * 100000 + \
        b"]" * 100000 + b"}}"
    status, _, body = server.request("POST", raw_body=deep)
    assert status == 400 and json.loads(body)["error"]["code"] == -32700
    assert exchange_raw(server.port, raw_post(
        server.port, ping, {"MCP-Protocol-Version": b"\xff\xfe" + "é".encode() * 30}), 1) == [
        "HTTP/1.1 400 Bad Request"]
    # Pipelined: a call and a notification written at once are each answered, in order; a
    # header too large behind a call waits for the call's answer.
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert exchange_raw(server.port, raw_post(server.port, ping, session) + raw_post(
        server.port, note, session), 2) == ["HTTP/1.1 200 OK", "HTTP/1.1 202 Accepted"]
    assert exchange_raw(server.port, raw_post(server.port, ping) + raw_post(
        server.port, ping, {"X-Filler": "x" * (20 << 10)}), 2) == [
        "HTTP/1.1 200 OK", "HTTP/1.1 431 Request Header Fields Too Large"]
    # Every slot held by connections that never finish a header: the token's holder still
    # gets in (the oldest of them makes room).
    held = [socket.create_connection(("127.0.0.1", server.port), timeout=60)
            for _ in range(300)]
    try:
        for raw in held:
            raw.sendall(b"POST /mcp HTTP/1.1\r\n")
        assert exchange_raw(server.port, raw_post(server.port, ping), 1) == ["HTTP/1.1 200 OK"]
    finally:
        for raw in held:
            raw.close()
    assert server.process.poll() is None


def closed_by_server(raw, seconds=60):
    """True once the server ended the connection (what it sent before is read and dropped)."""
    raw.settimeout(seconds)
    try:
        while raw.recv(1 << 16):
            pass
    except ConnectionResetError:
        pass
    return True


def test_what_the_second_review_sent_is_refused_and_the_server_serves_on(server, audit_dir):
    _, headers, _ = server.request("POST", initialize_body())
    a = {"Mcp-Session-Id": headers["Mcp-Session-Id"]}
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    # A refused request's body is never read as the next request (request smuggling).
    inner = raw_post(server.port, ping)
    smuggled = (b"POST /nope HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % (server.port, len(inner))) + inner
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as raw:
        raw.sendall(smuggled)
        stream = raw.makefile("rb")
        assert stream.readline().startswith(b"HTTP/1.1 404")
        rest = stream.read()  # to the end the server made: no second answer
        assert b"HTTP/1.1 200" not in rest
    # A stream a session started after it opened still ends when the server ends it: here a
    # GET stream of an MCP session that is then deleted (no session holds the connection).
    stream = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    stream.sendall((f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                    f"Authorization: Bearer {TOKEN}\r\nAccept: text/event-stream\r\n"
                    f"Mcp-Session-Id: {a['Mcp-Session-Id']}\r\n\r\n").encode())
    assert stream.recv(15) == b"HTTP/1.1 200 OK"
    _, headers, _ = server.request("POST", initialize_body())
    b = {"Mcp-Session-Id": headers["Mcp-Session-Id"]}
    assert server.request("POST", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, b)[0] == 200
    assert server.request("DELETE", headers=a)[0] == 204
    assert closed_by_server(stream)
    stream.close()
    # A call with a request pipelined behind it is still cancelled when its client leaves: its
    # cell is interrupted, or dropped before it started (the audit log says which), never run
    # to the policy's timeout while the next call waits.
    long_call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "run_python", "arguments": {"code": "import time; time.sleep(600)"}}}
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as raw:
        raw.sendall(raw_post(server.port, long_call, b) + raw_post(server.port, ping, b))
    status, _, body = server.request("POST", {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                                              "params": {"name": "run_python",
                                                         "arguments": {"code": "'next'"}}}, b)
    assert status == 200 and "'next'" in body, body
    cells = [r for r in audit_records(audit_dir) if r["event"] == "cell"]
    assert [c["status"] for c in cells] in (["ok"], ["interrupted", "ok"]), cells
    # A call the client cancels (legacy: notifications/cancelled) ends its request's stream.
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as raw:
        raw.sendall(raw_post(server.port, {**long_call, "id": 5}, b))
        assert server.request("POST", {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                       "params": {"requestId": 5}}, b)[0] == 202
        assert closed_by_server(raw)
    # A chunk extension that never ends is cut off, not held.
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as raw:
        raw.sendall((f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                     f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n2;x=").encode())
        try:
            for _ in range(8):
                raw.sendall(b"a" * (1 << 20))
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert closed_by_server(raw)
    assert server.request("POST", ping, b)[0] == 200


@pytest.mark.parametrize("server", [("--http-host", "mcp.example.org")], indirect=True)
def test_behind_a_tls_proxy_its_name_passes_and_a_large_body_is_asked_for(server):
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    # The name the proxy forwards as Host, and a page served under it.
    assert exchange_raw(server.port, raw_post(server.port, ping, {
        "Host": "mcp.example.org", "Origin": "https://mcp.example.org"}), 1) == [
        "HTTP/1.1 200 OK"]
    assert exchange_raw(server.port, raw_post(server.port, ping, {
        "Host": "mcp.example.org", "Origin": "https://evil.example"}), 1) == [
        "HTTP/1.1 403 Forbidden"]
    # A client that waits to be asked for its body (curl, past 1 MB) is asked once it passed.
    body = json.dumps(ping).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as raw:
        head = raw_post(server.port, ping, {"Expect": "100-continue"})
        raw.sendall(head[:-len(body)])
        stream = raw.makefile("rb")
        assert stream.readline() == b"HTTP/1.1 100 Continue\r\n" and stream.readline() == b"\r\n"
        raw.sendall(body)
        assert stream.readline().startswith(b"HTTP/1.1 200")
