"""What the allowlist judged is what leaves: no forged Host, no smuggled request, no fronted TLS.

A shared front end (a CDN) routes by the Host header of a plain request and by the SNI of a TLS
ClientHello. Allowing one site on it must not open the others: the proxy sends upstream the
request line's host in place of whatever Host the client wrote, refuses two Host headers, two
Content-Lengths and a chunked body over plain HTTP, forwards nothing after the declared body,
and refuses a CONNECT tunnel to a name whose ClientHello names another server (or none). Real
servers on 127.0.0.1 stand for the front end: an HTTP server that records every Host it is sent,
and an HTTPS server with a certificate this test makes with openssl; `localhost` is the
allowlisted name (with --allow-local-net, since it resolves to loopback)."""
import json
import os
import shutil
import threading
from http.server import BaseHTTPRequestHandler

import pytest

from belljar_testing import (
    ISOLATION,
    loopback_certificate,
    printed_json,
    running_kernel,
    sandbox_writable_dir,
    serve_on_loopback,
)

pytestmark = pytest.mark.skipif(ISOLATION != "strict",
                                reason="the egress proxy needs the full jail's network namespace")

BODY = b"front end says hello\n"


class FrontEnd(BaseHTTPRequestHandler):
    """Answers every path; remembers the Host headers of every request it parsed."""
    protocol_version = "HTTP/1.1"
    hosts = []
    lock = threading.Lock()

    def do_GET(self):
        with FrontEnd.lock:
            FrontEnd.hosts.append(self.headers.get_all("Host") or [])
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    do_POST = do_GET

    def log_message(self, *args):
        pass


def serve(context=None):
    return serve_on_loopback(FrontEnd, context)


@pytest.fixture(scope="module")
def kernel():
    tmp = sandbox_writable_dir("belljar-fronting-")
    context, cert = loopback_certificate(tmp)
    http, https = serve(), serve(context)
    workspace = tmp / "ws"
    workspace.mkdir()
    os.chmod(workspace, 0o777)
    shutil.copy(cert, workspace / "server.crt")
    os.chmod(workspace / "server.crt", 0o644)
    audit = tmp / "audit.jsonl"
    flags = ["--timeout", "60", "--audit-log", str(audit),
             "--allow-net", f"127.0.0.1:{http.server_port}",
             "--allow-local-net", f"localhost:{http.server_port}",
             "--allow-local-net", f"localhost:{https.server_port}"]
    with running_kernel(flags=flags, workspace=str(workspace), name="belljar-fronting") as (km, kc):
        km.http, km.https, km.audit = http.server_port, https.server_port, audit
        yield km, kc
    http.shutdown()
    https.shutdown()
    shutil.rmtree(tmp, ignore_errors=True)


def run(kc, code):
    return printed_json(kc, code, timeout=60)


# Inside the sandbox: one raw request to the proxy, the response's status line and the
# X-Belljar-Denied header (or None).
RAW = """
import json, socket
def raw(request):
    s = socket.create_connection(('127.0.0.1', 3128), timeout=10)
    s.sendall(request.encode())
    got = b''
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    s.close()
    head = got.split(b'\\r\\n\\r\\n')[0].decode()
    lines = head.split('\\r\\n')
    denied = [l.split(':', 1)[1].strip() for l in lines if l.lower().startswith('x-belljar-denied:')]
    return [lines[0], denied[0] if denied else None, got.split(b'\\r\\n\\r\\n', 1)[-1].decode()]
"""


def audit(km):
    """The egress records so far. Read after a cell's reply, they hold its requests': the proxy
    posts each decision before it answers or closes, and the supervisor records a cell's
    decisions before its reply (kernel/session/egress_link.cpp)."""
    return [json.loads(line) for line in km.audit.read_text().splitlines()
            if '"egress"' in line]


def test_a_forged_host_header_never_reaches_upstream(kernel):
    km, kc = kernel
    FrontEnd.hosts.clear()
    target = f"127.0.0.1:{km.http}"
    got, _ = run(kc, RAW + "import requests\n"
                 f"forged = raw('GET http://{target}/ HTTP/1.1\\r\\nHost: evil.example\\r\\n\\r\\n')\n"
                 f"twice = raw('GET http://{target}/ HTTP/1.1\\r\\nHost: {target}\\r\\nHost: evil.example\\r\\n\\r\\n')\n"
                 f"r = requests.get('http://{target}/', headers={{'Host': 'evil.example'}}, timeout=10)\n"
                 "print(json.dumps([forged, twice, [r.status_code, r.text]]))")
    forged, twice, from_requests = got
    # Replaced: the request goes to the host the allowlist judged, under that host's name.
    assert forged[0] == "HTTP/1.1 200 OK" and forged[2] == BODY.decode()
    assert from_requests == [200, BODY.decode()]
    assert FrontEnd.hosts == [[target], [target]], "only the allowlisted host reached the server"
    assert twice[0] == "HTTP/1.1 400 Bad Request" and twice[1] == "bad-request"
    assert "more than one Host" in twice[2]


def test_smuggling_prone_framing_is_refused(kernel):
    km, kc = kernel
    FrontEnd.hosts.clear()
    target = f"127.0.0.1:{km.http}"
    head = f"POST http://{target}/ HTTP/1.1\\r\\nHost: {target}\\r\\n"
    got, _ = run(kc, RAW +
                 f"two_lengths = raw('{head}Content-Length: 5\\r\\nContent-Length: 40\\r\\n\\r\\nhello')\n"
                 f"both = raw('{head}Content-Length: 5\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\nhello')\n"
                 f"chunked = raw('{head}Transfer-Encoding: chunked\\r\\n\\r\\n5\\r\\nhello\\r\\n0\\r\\n\\r\\n')\n"
                 # A body that declares 5 bytes, then a second request hoping to ride along.
                 f"piggyback = raw('{head}Content-Length: 5\\r\\n\\r\\nhello'\n"
                 f"                'GET /admin HTTP/1.1\\r\\nHost: evil.example\\r\\n\\r\\n')\n"
                 "print(json.dumps([two_lengths, both, chunked, piggyback]))")
    two_lengths, both, chunked, piggyback = got
    assert two_lengths[:2] == ["HTTP/1.1 400 Bad Request", "bad-request"]
    assert "more than one Content-Length" in two_lengths[2]
    assert both[:2] == ["HTTP/1.1 400 Bad Request", "bad-request"]
    assert chunked[:2] == ["HTTP/1.1 411 Length Required", "bad-request"]
    assert piggyback[0] == "HTTP/1.1 200 OK"
    assert FrontEnd.hosts == [[target]], "the piggybacked request never reached the server"


TLS = """
import json, socket, ssl
def tunnel(host, port, server_hostname, payload=None):
    s = socket.create_connection(('127.0.0.1', 3128), timeout=10)
    s.sendall(f'CONNECT {host}:{port} HTTP/1.1\\r\\nHost: {host}:{port}\\r\\n\\r\\n'.encode())
    head = b''
    while b'\\r\\n\\r\\n' not in head:
        head += s.recv(1)
    if not head.startswith(b'HTTP/1.1 200'):
        return ['no tunnel', head.decode()]
    if payload is not None:
        s.sendall(payload)
        return ['closed' if s.recv(100) in (b'', b'\\x15\\x03\\x01\\x00\\x02\\x02\\x31') else 'open', '']
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the stand-in's certificate is not what is tested here
    try:
        t = ctx.wrap_socket(s, server_hostname=server_hostname)
        t.sendall(f'GET / HTTP/1.1\\r\\nHost: {server_hostname}\\r\\nConnection: close\\r\\n\\r\\n'.encode())
        return ['served', t.recv(65536).decode(errors='replace')]
    except (ssl.SSLError, OSError) as e:
        return ['refused', str(e)]
"""


def test_a_tunnel_whose_sni_names_another_host_is_refused(kernel):
    km, kc = kernel
    FrontEnd.hosts.clear()
    got, reply = run(kc, TLS +
                     f"print(json.dumps(tunnel('localhost', {km.https}, 'fronted.example')))")
    assert got[0] == "refused", got
    assert "ACCESS_DENIED" in got[1].upper() or "EOF" in got[1].upper() or "reset" in got[1].lower()
    assert FrontEnd.hosts == [], "the fronted request never reached the server"
    records = [r for r in audit(km) if r["reason"] == "sni-mismatch"]
    assert records and records[-1]["decision"] == "denied" and records[-1]["host"] == "localhost"
    assert "fronted.example" in records[-1]["detail"]
    assert f"localhost:{km.https}" in reply["metadata"]["belljar"]["egress_denied"]


def test_a_tunnel_to_a_name_without_sni_or_without_tls_is_refused(kernel):
    km, kc = kernel
    FrontEnd.hosts.clear()
    got, _ = run(kc, TLS +
                 f"print(json.dumps([tunnel('localhost', {km.https}, None),\n"
                 f"                  tunnel('localhost', {km.http}, None, b'GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')]))")
    no_sni, not_tls = got
    assert no_sni[0] == "refused", no_sni
    assert not_tls[0] == "closed", not_tls
    assert FrontEnd.hosts == []
    reasons = [r["reason"] for r in audit(km) if r["decision"] == "denied"]
    assert reasons[-2:] == ["sni-missing", "sni-missing"]


def test_https_with_the_allowlisted_sni_still_works(kernel):
    km, kc = kernel
    got, _ = run(kc, TLS + "import requests\n"
                 f"r = requests.get('https://localhost:{km.https}/', verify='server.crt', timeout=10)\n"
                 f"print(json.dumps([r.text, tunnel('localhost', {km.https}, 'localhost')[0]]))")
    assert got == [BODY.decode(), "served"]
    allowed = [r for r in audit(km) if r["decision"] == "allowed" and r["port"] == km.https]
    assert allowed and allowed[-1]["method"] == "CONNECT"
