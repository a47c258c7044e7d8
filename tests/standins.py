"""HTTPS stand-ins for the services a bound secret (--secret NAME@HOST) is meant for, on loopback.

The threat they help test: the real value of a secret must reach only its own host, over TLS the
kernel verified, and nothing the host answers may carry it back into the sandbox. So each
stand-in records exactly what it received (to prove the value was injected, or that only a
placeholder arrived, or that nothing arrived at all) and offers the answers a real API can give
that would carry the value back: an echo of the request's headers, a redirect quoting it, an
error page, the value split across two writes, a streamed (server-sent events) reply, a
compressed body. Certificates come from scripts/demo-ca.sh, a CA made for the run.

Routes (any method; `?case=NAME` tags what a test sent, so each test reads its own records):
  /v1/chat/completions  OpenAI-style JSON with usage {prompt_tokens 11, completion_tokens 7}
  /v1/messages          Anthropic-style server-sent events; the usage is in the message_delta.
                        With &hold=1 it sends the first event, then holds the rest until
                        /release?stream=CASE (a client that got the first event asks for the
                        rest: the proxy streamed it), 20 s at most
  /release?stream=CASE  lets the held stream of that case go on
  /echo                 the request's headers and target, as JSON and in X-Echo-* headers
  /redirect             302 to a Location that quotes the Authorization header received
  /leak?which=N         a body holding the value of the stand-in's secret N, split across two
                        writes 0.3 s apart, in a 1 MiB body when &big=1
  /gzip                 a gzip-compressed body, whatever the request asked for
  /reflect?into=NAME    the X-Api-Key header received, put into the response's NAME header
                        (Transfer-Encoding, Content-Encoding: what the proxy refuses)
  /slice                "the key is " and the Authorization received, honouring Range (206);
                        &status=204 or 304: that status, with the Content-Length the body
                        would have had (as HEAD always gives)
  anything else         {"ok": true}
"""
import gzip
import json
import pathlib
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

from belljar_testing import SOURCE, LoopbackServer

CHAT_USAGE = {"prompt_tokens": 11, "completion_tokens": 7}
STREAM_USAGE = {"input_tokens": 25, "output_tokens": 15}


def make_ca(directory, *names):
    """A CA made for this run (scripts/demo-ca.sh) and a certificate for each name (localhost
    when none); returns the directory. The CA's key is already gone."""
    subprocess.run([str(SOURCE / "scripts" / "demo-ca.sh"), str(directory), *names], check=True,
                   capture_output=True)
    return pathlib.Path(directory)


def server_context(certificate, key):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    return context


class Received:
    """What one stand-in was sent, request by request, the TLS handshakes that failed, its
    connections (numbered from 1 as accepted) and which of them are over, and its held streams.
    `lock` is a condition, notified when a connection ends or a stream is released."""

    def __init__(self):
        self.lock = threading.Condition()
        self.requests = []
        self.failed_handshakes = 0
        self.connections = 0
        self._open = {}        # client address -> connection number
        self.finished = set()  # numbers of the connections whose handler is done
        self.released = set()  # cases of the streams a client asked to go on
        self.streams = {}      # case -> "released" or "never released" (a held stream)

    def add(self, record):
        with self.lock:
            self.requests.append(record)

    def case(self, name):
        with self.lock:
            return [r for r in self.requests if r["case"] == name]

    def opened(self, address):
        with self.lock:
            self.connections += 1
            self._open[address] = self.connections

    def closed(self, address):
        with self.lock:
            number = self._open.pop(address, None)
            if number is not None:
                self.finished.add(number)
                self.lock.notify_all()

    def wait_finished(self, numbers, timeout=30):
        """Whether the connections `numbers` are all over (their handlers saw the end of what
        the client sent, and recorded every request in it) within `timeout`."""
        with self.lock:
            return self.lock.wait_for(lambda: set(numbers) <= self.finished, timeout)


class StandIn(LoopbackServer):
    """A stand-in on 127.0.0.1: HTTPS when given a context (the handshake runs in the
    connection's own thread, so a client that stalls it holds up no one), plain HTTP otherwise.
    `secrets` are the values this stand-in knows as the real service would: NAME -> value."""

    def __init__(self, context=None, secrets=None):
        super().__init__(("127.0.0.1", 0), StandInHandler)
        self.context = context
        self.secrets = dict(secrets or {})
        self.received = Received()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self):
        return self.server_address[1]

    def get_request(self):
        sock, address = self.socket.accept()
        self.received.opened(address)
        if self.context:
            sock = self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def handle_error(self, request, client_address):
        pass  # a refused handshake or a client gone: counted in setup, never printed

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.received.closed(client_address)


def read_chunked(rfile):
    """A chunked request body, decoded (trailers read and dropped)."""
    body = b""
    while True:
        size = int(rfile.readline(1024).split(b";")[0].strip(), 16)
        if size == 0:
            while rfile.readline(8192).strip():
                pass
            return body
        body += rfile.read(size)
        rfile.readline(8)


class StandInHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        if self.server.context:
            self.request.settimeout(15)
            try:
                self.request.do_handshake()
            except (ssl.SSLError, OSError):
                with self.server.received.lock:
                    self.server.received.failed_handshakes += 1
                raise
        super().setup()

    def handle_one_request(self):
        try:
            super().handle_one_request()
        except (ConnectionError, ssl.SSLError, socket.timeout):
            self.close_connection = True

    def do_request(self):
        target = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(target.query))
        headers = {}
        for name, value in self.headers.items():
            headers.setdefault(name.lower(), []).append(value)
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            body = read_chunked(self.rfile)
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.received.add({"case": query.get("case"), "method": self.command,
                                  "target": self.path, "version": self.request_version,
                                  "headers": {k: v[0] for k, v in headers.items()},
                                  "all_headers": headers, "body": body})
        route = getattr(self, "route_" + target.path.strip("/").replace("/", "_"), self.route_default)
        route(query, headers, body)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_request

    def send(self, status, body, content_type="application/json", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def route_default(self, query, headers, body):
        self.send(200, b'{"ok": true}')

    def route_v1_chat_completions(self, query, headers, body):
        time.sleep(0.05)  # a latency the audit record must show
        self.send(200, json.dumps({
            "id": "chatcmpl-standin", "object": "chat.completion", "model": "gpt-4o-mini",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "answered"}}],
            "usage": dict(CHAT_USAGE, total_tokens=sum(CHAT_USAGE.values()))}).encode())

    def route_v1_messages(self, query, headers, body):
        # Anthropic's streaming shape: the input count in message_start, the final counts in
        # message_delta, then message_stop (which carries no usage).
        events = [
            ("message_start", {"type": "message_start", "message": {
                "id": "msg_standin", "role": "assistant", "content": [],
                "usage": {"input_tokens": STREAM_USAGE["input_tokens"], "output_tokens": 1}}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": "streamed " * 40}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": "answer " * 40}}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                               "usage": dict(STREAM_USAGE)}),
            ("message_stop", {"type": "message_stop"}),
        ]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        received, case = self.server.received, query.get("case")
        for i, (name, data) in enumerate(events):
            event = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
            if i == 0 and query.get("hold"):
                with received.lock:
                    went_on = received.lock.wait_for(lambda: case in received.released, timeout=20)
                    received.streams[case] = "released" if went_on else "never released"
        self.wfile.write(b"0\r\n\r\n")

    def route_release(self, query, headers, body):
        with self.server.received.lock:
            self.server.received.released.add(query["stream"])
            self.server.received.lock.notify_all()
        self.send(200, b'{"released": true}')

    def route_echo(self, query, headers, body):
        echoed = {"target": self.path, "headers": {k: v[0] for k, v in headers.items()},
                  "body": body.decode(errors="replace")}
        extra = [("X-Echo-Authorization", headers.get("authorization", [""])[0]),
                 ("X-Echo-Api-Key", headers.get("x-api-key", [""])[0])]
        self.send(200, json.dumps(echoed).encode(), extra=extra)

    def route_redirect(self, query, headers, body):
        quoted = urllib.parse.quote(headers.get("authorization", [""])[0])
        location = f"https://localhost:{self.server.port}/landing?auth={quoted}"
        self.send(302, b"", extra=[("Location", location)])

    def route_leak(self, query, headers, body):
        value = self.server.secrets[query["which"]].encode()
        head, tail = b"the key is ", b" and that was it\n"
        if query.get("big"):
            head = b"=" * (512 * 1024 + 3) + head
            tail = tail + b"~" * (512 * 1024 - 5)
        cut = len(head) + len(value) // 2
        whole = head + value + tail
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(whole)))
        self.end_headers()
        self.wfile.write(whole[:cut])
        self.wfile.flush()
        time.sleep(0.3)  # the proxy reads the value in two pieces
        self.wfile.write(whole[cut:])

    def route_gzip(self, query, headers, body):
        self.send(200, gzip.compress(b'{"compressed": true}'), extra=[("Content-Encoding", "gzip")])

    def route_reflect(self, query, headers, body):
        reflected = headers.get("x-api-key", [""])[0]
        self.send(200, b"reflected", extra=[(query["into"], reflected)])

    def route_slice(self, query, headers, body):
        whole = ("the key is " + headers.get("authorization", [""])[0]).encode()
        status = int(query.get("status", 200))
        if status in (204, 304):
            self.send_response(status)
            self.send_header("Content-Length", str(len(whole)))
            self.end_headers()
            return
        ranged = headers.get("range", [""])[0]
        if ranged.startswith("bytes=") and self.command != "HEAD":
            first, last = (int(n) for n in ranged[len("bytes="):].split("-"))
            part = whole[first:last + 1]
            self.send(206, part, content_type="text/plain",
                      extra=[("Content-Range", f"bytes {first}-{first + len(part) - 1}/{len(whole)}")])
            return
        self.send(200, whole, content_type="text/plain")

    def log_message(self, *args):
        pass
