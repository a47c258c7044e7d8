"""A small OpenAI-compatible chat-completions stand-in for the walkthrough.

It answers POST /v1/chat/completions in the same shape as the real API (model, messages,
temperature in; choices[0].message.content out) from a few grounded facts about sandboxing,
so the learner's notebook can call "the model" without a real key or the internet.
Runs on loopback only: python3 chat_standin.py --port 8765
"""
import argparse
import json
import random
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FACTS = [
    ("sandbox", "Code execution sandboxing runs untrusted code behind walls: no network unless a "
                "host is allowlisted, no secrets in the environment, capped CPU, time and memory, "
                "and one writable workspace."),
    ("network", "Egress is denied by default; an allowlisted host is reached through a proxy that "
                "logs every decision."),
    ("secret", "Secrets are stripped: the sandbox's environment is built from an allowlist and "
               "secret files in the workspace are masked."),
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
    def do_POST(self):
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._send(404, {"error": {"message": f"no route {self.path}"}})
        try:
            length = min(int(self.headers.get("Content-Length", "0")), 1 << 20)
            body = json.loads(self.rfile.read(length) or b"{}")
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
        self._send(200, {"status": "ok"})

    def _send(self, status, payload):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format, *args):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(f"chat stand-in on http://{args.host}:{server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
