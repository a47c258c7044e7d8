#!/usr/bin/python3
"""Writes the seed corpora under corpus/ (see the input layouts at the top of each fuzz_*.cpp)."""
import hashlib
import hmac
import json
import os
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
import ssl


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
