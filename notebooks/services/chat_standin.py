"""A small OpenAI-compatible chat-completions stand-in for the walkthrough.

It answers POST /v1/chat/completions in the same shape as the real API (model, messages,
temperature in; choices[0].message.content out, with a usage object) from a few grounded facts
about sandboxing, so the learner's notebook can call "the model" without the internet.

Like the real API it wants a key: when OPENAI_API_KEY is set in its environment, every request
must carry `Authorization: Bearer <that key>` or gets 401. The walkthrough's sandbox only ever
holds a placeholder, so the call answers only because the kernel's egress proxy puts the real key
into the request on its way out. GET or POST /v1/echo answers with the request's own headers
(like httpbin's /anything): the exercise sends the key there to try to get it back.

Serves HTTPS with --tls-cert/--tls-key (scripts/demo-ca.sh makes them: the proxy only injects a
key over TLS it verified), plain HTTP otherwise. Loopback only:
    python3 chat_standin.py --port 8765 --tls-cert localhost.crt --tls-key localhost-key.txt
"""
import argparse
import hmac
import json
import os
import random
import ssl
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FACTS = [
    ("sandbox", "Code execution sandboxing runs untrusted code behind walls: no network unless a "
                "host is allowlisted, no secrets in the environment, capped CPU, time and memory, "
                "and one writable workspace."),
    ("network", "Egress is denied by default; an allowlisted host is reached through a proxy that "
                "logs every decision."),
    ("secret", "Secrets are stripped: the sandbox's environment is built from an allowlist and "
               "secret files in the workspace are masked. A key the code needs is bound to its one "
               "host: the sandbox holds a placeholder, and the egress proxy puts the real key into "
               "requests to that host only."),
    ("limit", "Limits stop runaway code: a cell that passes its time limit is interrupted and the "
              "session keeps its variables."),
    ("monitor", "In production, monitor each execution's wall time, CPU time, peak memory, which "
                "limit was hit and which hosts were denied: the audit log records all of them."),
]


def answer(messages, temperature, model):
    question = " ".join(m.get("content", "") for m in messages if m.get("role") == "user").lower()
    grounded = [text for key, text in FACTS if key in question] or [FACTS[0][1]]
    if temperature and temperature > 0:
        # A higher temperature samples more of the facts, in a different order each time.
        rng = random.Random()
        extra = [text for _, text in FACTS if text not in grounded]
        grounded += rng.sample(extra, k=min(len(extra), int(round(temperature * 2))))
        rng.shuffle(grounded)
    return " ".join(grounded) + f" (answered by {model})"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the real API
    api_key = None  # the key requests must carry, when the stand-in has one

    def setup(self):
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(30)
            self.request.do_handshake()  # here, in the connection's thread: a stalled client holds up no one
        super().setup()

    def authorized(self):
        if self.api_key is None:
            return True
        given = self.headers.get("Authorization", "").encode()
        if hmac.compare_digest(given, b"Bearer " + self.api_key.encode()):
            return True
        self._send(401, {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error",
                                   "code": "invalid_api_key"}})
        return False

    def do_POST(self):
        length = min(int(self.headers.get("Content-Length", "0") or 0), 1 << 20)
        raw = self.rfile.read(length)
        if not self.authorized():
            return
        if self.path.rstrip("/") == "/v1/echo":
            return self._echo()
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._send(404, {"error": {"message": f"no route {self.path}"}})
        try:
            body = json.loads(raw or b"{}")
            messages = body["messages"]
        except (ValueError, KeyError) as error:
            return self._send(400, {"error": {"message": f"bad request: {error}"}})
        model = body.get("model", "stand-in")
        content = answer(messages, float(body.get("temperature", 0) or 0), model)
        self._send(200, {
            "id": f"chatcmpl-{int(time.time() * 1000)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": sum(len(m.get("content", "").split()) for m in messages),
                      "completion_tokens": len(content.split())},
        })

    def do_GET(self):
        if not self.authorized():
            return
        if self.path.rstrip("/") == "/v1/echo":
            return self._echo()
        self._send(200, {"status": "ok"})

    def _echo(self):
        self._send(200, {"method": self.command, "path": self.path,
                         "headers": {name.lower(): value for name, value in self.headers.items()}})

    def _send(self, status, payload):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format, *args):
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    context = None

    def get_request(self):
        sock, address = self.socket.accept()
        if self.context:
            sock = self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def handle_error(self, request, client_address):
        pass  # a client that left or refused our certificate: nothing to serve


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--tls-cert", help="serve HTTPS with this certificate (PEM)")
    parser.add_argument("--tls-key", help="the certificate's private key (PEM)")
    args = parser.parse_args()
    Handler.api_key = os.environ.get("OPENAI_API_KEY") or None
    server = Server((args.host, args.port), Handler)
    scheme = "http"
    if args.tls_cert:
        server.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.context.load_cert_chain(args.tls_cert, args.tls_key or args.tls_cert)
        scheme = "https"
    print(f"chat stand-in on {scheme}://{args.host}:{server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
