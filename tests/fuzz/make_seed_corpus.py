#!/usr/bin/python3
"""Writes the seed corpora under corpus/ (see the input layouts at the top of each fuzz_*.cpp)."""
import json
import os
import ssl
import struct

from jupyter_client.session import Session

HERE = os.path.dirname(os.path.abspath(__file__))
SEP = b"\xff"


def write(target, name, data):
    os.makedirs(os.path.join(HERE, "corpus", target), exist_ok=True)
    with open(os.path.join(HERE, "corpus", target, name), "wb") as f:
        f.write(data)


# Wire messages. Mode 0: raw frames (signed by jupyter_client with the harness key).
session = Session(key=b"belljar-fuzz-key", username="fuzz", session="fuzz-session")
msg = session.msg("execute_request", {"code": "1+1", "silent": False})
write("wire_message", "jupyter_client_execute_request", b"\x00" + SEP.join(session.serialize(msg, ident=[b"router"])))
write("wire_message", "raw_too_few_frames", b"\x00" + SEP.join([b"<IDS|MSG>", b"0" * 64, b"{}"]))
write("wire_message", "raw_no_delimiter", b"\x00" + SEP.join([b"id", b"{}", b"{}"]))

# Mode 1: the harness signs; bits 1-2 give the number of routing ids.
header = json.dumps({"msg_id": "m1", "msg_type": "kernel_info_request", "session": "s", "username": "u",
                     "date": "2026-01-01T00:00:00.000000Z", "version": "5.3"}).encode()
parent = json.dumps({"msg_id": "p", "msg_type": "execute_request", "session": "s"}).encode()
content = json.dumps({"code": "print('é ∑ 🙂')", "silent": False, "user_expressions": {"a": "1"},
                      "n": [1, 2.5, -3e10, None, True]}).encode()
write("wire_message", "signed_one_id", b"\x03" + SEP.join([b"router", header, parent, b"{}", content]))
write("wire_message", "signed_buffers", b"\x01" + SEP.join([header, b"{}", b"{}", b"{}", b"\x00\x01buf", b""]))
write("wire_message", "signed_no_session", b"\x01" + SEP.join([b'{"msg_id":"m","msg_type":"x"}', b"{}", b"{}", b"{}"]))
write("wire_message", "signed_deep", b"\x01" + SEP.join([header, b"{}", b"{}", b'{"x":' + b"[" * 120 + b"]" * 120 + b"}"]))
write("wire_message", "signed_escapes", b"\x05" + SEP.join([b"a", b"b", header, b"{}", b"{}",
                                                           b'{"s":"\\u00e9\\ud83d\\ude42\\"\\\\[{"}']))


# Worker frames: one byte (feed size - 1), then length-prefixed JSON frames.
def frame(value):
    body = value if isinstance(value, bytes) else json.dumps(value).encode()
    return struct.pack(">I", len(body)) + body


stream = b"".join(frame(v) for v in [{"type": "stream", "name": "stdout", "text": "hé\n"},
                                     {"type": "display_data", "data": {"text/plain": "1"}, "metadata": {}},
                                     {"type": "execute_result", "execution_count": 3, "n": [1, 2.5, None]}])
write("worker_frames", "three_frames", b"\x00" + stream)
write("worker_frames", "three_frames_in_pieces", b"\x06" + stream)
write("worker_frames", "partial_tail", b"\x02" + frame({"type": "ok"}) + frame({"type": "cut"})[:7])
write("worker_frames", "oversize", b"\x00" + b"\xff\xff\xff\xff" + b"{}")
write("worker_frames", "not_json", b"\x00" + frame(b"{not json"))
write("worker_frames", "no_type", b"\x00" + frame({"kind": "x"}) + frame({"type": "later"}))
write("worker_frames", "deep", b"\x00" + frame(b'{"type":"t","v":' + b"[" * 120 + b"]" * 120 + b"}"))


# TLS ClientHellos as Python's ssl sends them: with a name, without one (no SNI), and the one
# with a name cut into small records.


def client_hello(server_hostname):
    context = ssl.create_default_context()
    context.check_hostname = False
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=server_hostname)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


named = client_hello("api.example.com")
write("tls_client_hello", "python_sni", named)
write("tls_client_hello", "python_no_sni", client_hello(None))
body = named[5:]
write("tls_client_hello", "python_sni_fragmented",
      b"".join(b"\x16\x03\x01" + struct.pack(">H", len(body[i:i + 40])) + body[i:i + 40]
               for i in range(0, len(body), 40)))


# HTTP heads as the egress proxy reads them: requests as pip/requests/curl send them to a proxy
# (CONNECT and absolute-form), the smuggling shapes it refuses, and responses from upstream.
http = {
    "connect": b"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\nUser-Agent: pip/23.0\r\n\r\n",
    "connect_v6": b"CONNECT [::1]:8443 HTTP/1.1\r\nHost: [::1]:8443\r\nProxy-Connection: keep-alive\r\n\r\n",
    "get_absolute": b"GET http://example.com/simple/?q=1#frag HTTP/1.1\r\nHost: example.com\r\n"
                    b"Accept-Encoding: identity\r\nConnection: keep-alive, X-Drop\r\nX-Drop: 1\r\n\r\n",
    "post_length": b"POST http://127.0.0.1:8080/upload HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
                   b"Content-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello",
    "post_chunked": b"POST http://h/ HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "smuggle_two_lengths": b"POST http://h/ HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
    "smuggle_length_and_chunked": b"POST http://h/ HTTP/1.1\r\nContent-Length: 4\r\n"
                                  b"Transfer-Encoding: chunked\r\n\r\n",
    "two_hosts": b"GET http://a/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    "folded": b"GET http://a/ HTTP/1.1\r\nX: 1\r\n  2\r\n\r\n",
    "userinfo": b"GET http://user:pw@a:81/ HTTP/1.0\r\n\r\n",
    "response_ok": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n"
                   b"Keep-Alive: timeout=5\r\n\r\nok",
    "response_no_reason": b"HTTP/1.0 204 \r\nServer: t\r\n\r\n",
    # Found by this target on 2026-12-01: a status with a leading zero is accepted, then written
    # to the client as "99", a head the proxy itself refuses.
    "response_status_099": b"HTTP/1.1 099 OK\r\nContent-Length: 0\r\n\r\n",
}
for name, data in http.items():
    write("http_head", name, data)


# JSON-RPC lines as an MCP client (the TypeScript SDK) sends them, and the shapes it must refuse.
def rpc(value):
    return json.dumps(value, separators=(",", ":")).encode()


json_rpc = {
    "initialize": rpc({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                       "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                  "clientInfo": {"name": "fuzz", "version": "1"}}}),
    "initialized": rpc({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    "run_python": rpc({"jsonrpc": "2.0", "id": "call-1", "method": "tools/call",
                       "params": {"name": "run_python", "arguments": {"code": "print('é 🙂')"},
                                  "_meta": {"progressToken": 7}}}),
    "cancelled": rpc({"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": "call-1", "reason": "user"}}),
    "response": rpc({"jsonrpc": "2.0", "id": 3, "result": {}}),
    "batch": rpc([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]),
    "positional_params": rpc({"jsonrpc": "2.0", "id": 2, "method": "ping", "params": [1]}),
    "float_id": b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}',
    "bad_utf8": b'{"jsonrpc":"2.0","id":"\xff\xfe","method":"p\xc3"}',
    "deep": b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":' + b"[" * 120 + b"]" * 120 + b"}}",
    "not_json": b'{"jsonrpc":"2.0",',
}
for name, data in json_rpc.items():
    write("json_rpc", name, data)

# The secret broker: byte 0 the read size, the client's stream, 0xff 0xfe, the upstream's.
PLACEHOLDER = b"belljar-secret-KEY-00000000000000000000000000000000"
VALUE = b"sk-fuzz-value-0123456789"
requests = (b"POST /v1/chat HTTP/1.1\r\nAuthorization: Bearer " + PLACEHOLDER +
            b"\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
            b"GET /b HTTP/1.1\r\nx-api-key: " + PLACEHOLDER + b"\r\nContent-Length: 2\r\n\r\nhi")
responses = (b"HTTP/1.1 200 OK\r\nX-Echo: " + VALUE + b"\r\nTransfer-Encoding: chunked\r\n\r\n"
             b"4\r\nsk-f\r\n14\r\nuzz-value-0123456789\r\n0\r\n\r\n"
             b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 60\r\n\r\n"
             b'{"usage": {"prompt_tokens": 1}, "k": "sk-fuzz-value-0123456789"}')
write("brokered_http", "keep_alive_echo", b"\x06" + requests + b"\xff\xfe" + responses)
write("brokered_http", "head_then_close", b"\x00GET / HTTP/1.1\r\n\r\n\xff\xfeHTTP/1.0 200 OK\r\n\r\n" + VALUE)
write("brokered_http", "interim", b"\x02HEAD / HTTP/1.1\r\n\r\n\xff\xfeHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No\r\n\r\n")

# Jail records (sandbox/jail_protocol/record.hpp): name length, name, 4-byte value length, value.
def record(*fields):
    out = b""
    for name, value in fields:
        name, value = name.encode(), value if isinstance(value, bytes) else str(value).encode()
        out += bytes([len(name)]) + name + struct.pack(">I", len(value)) + value
    return out


write("jail_records", "ready", record(("event", "ready"), ("worker_pid", 42), ("cgroup_v2", "/sys/fs/cgroup/b"),
                                      ("note", "memory: rlimits")))
write("jail_records", "exit", record(("event", "exit"), ("code", -1), ("signal", 9), ("memory_limit", 1),
                                     ("cpu_ns", 1500000)))
write("jail_records", "survey", record(("event", "survey"),
                                       ("guarded", record(("path", ".git"), ("guard", "read-only"), ("reason", ".git"))),
                                       ("bytes", 10), ("entries", 3), ("micros", 70)))
write("jail_records", "request", record(("op", "survey"), ("measure", 1), ("baseline", 4096)))
write("jail_records", "spec", record(("protocol", 1), ("mode", "namespaces"), ("strict", 1), ("host_root", 0),
                                     ("host_uid", 1000), ("host_gid", 1000), ("workspace", "/w"),
                                     ("bind", record(("source", "/usr"), ("target", "/usr"), ("kind", "ro"))),
                                     ("link", record(("path", "/lib"), ("points_to", "usr/lib"))),
                                     ("hide", ".env"), ("protect", ".git"), ("workspace_quota_bytes", 0),
                                     ("exec_path", "/usr/bin/python3"), ("argv", "python3"), ("env", "A=b"),
                                     ("memory_bytes", 1 << 30), ("pids", 256), ("file_size_bytes", 1 << 30),
                                     ("tmp_size_bytes", 1 << 28), ("open_files", 4096), ("egress_port", 0)))
