"""Secrets bound to a host (--secret NAME@HOST[:PORT]): the sandbox holds a placeholder, the
egress proxy terminates TLS for the bound host and puts the real value into the requests that
go there, and nothing that comes back carries the value into the sandbox.

Real TLS and real clients only: a CA made for the run (scripts/demo-ca.sh) signs the stand-ins'
certificates for `localhost`, and the kernel trusts it through SSL_CERT_FILE in its own
environment, as a user points it at a company CA. Inside the sandbox requests, httpx, urllib,
http.client, raw sockets and curl talk through the proxy as users' code does. The stand-ins
(tests/standins.py) record what they received, so each test checks both sides: what the real
service got (the value, only on its own host) and what the sandbox got (never the value).

The cells never hold a real value: they look for one by its first half and the SHA-256 of the
whole, and print their findings hex-encoded, so the supervisor's redaction of real values in
output cannot hide a value that did reach the sandbox."""
import base64
import hashlib
import json
import os
import pathlib
import re
import secrets
import shutil
import tempfile

import pytest
from jupyter_client.connect import write_connection_file
from standins import CHAT_USAGE, STREAM_USAGE, StandIn, make_ca, server_context

from belljar_testing import (
    HOSTILE_OPENSSL_CONF,
    ISOLATION,
    PYTHON,
    VALUE_SCAN_CELL,
    belljar,
    execute,
    loopback_certificate,
    of_type,
    running_kernel,
    sandbox_writable_dir,
    stderr_of,
    stdout_of,
)

pytestmark = pytest.mark.skipif(ISOLATION != "strict",
                                reason="the egress proxy needs the full jail's network namespace")

KEY, OTHER = "BELLJAR_TEST_API_KEY", "BELLJAR_TEST_OTHER_KEY"
VALUE = "sk-belljar-test-" + secrets.token_hex(16)
OTHER_VALUE = "sk-belljar-other-" + secrets.token_hex(16)
PLACEHOLDER = re.compile(r"belljar-secret-(?P<name>[A-Z_]+)-[0-9a-f]{32}")
SESSION_CA = "belljar session CA"
PROXY = "127.0.0.1:3128"


def needle(value):
    """How a cell looks for a value without holding it: its first half, its length, its hash."""
    return {"head": value[: len(value) // 2], "length": len(value),
            "sha256": hashlib.sha256(value.encode()).hexdigest()}


# What every cell of these tests can use inside the sandbox.
PRELUDE = VALUE_SCAN_CELL + r'''
import hashlib, http.client, json, os, socket, ssl, subprocess, time, urllib.error, urllib.request
import httpx, requests

def emit(result):
    # Hex: what reached the sandbox is reported as it was, whatever the output redaction masks.
    print(json.dumps(result).encode().hex())


def fence():
    """A request the proxy refuses (403) before it answers. Its one thread posts decisions in
    order, so once this is answered every decision it made before is posted, and the cell's
    reply carries them into the audit log: a refusal inside a brokered tunnel is posted only
    after its answer went out."""
    return requests.get('http://fence.invalid/', timeout=20).status_code


def tunnel(port, host="localhost", alpn=None, cafile=None):
    """A CONNECT through the proxy, then TLS: (CONNECT status, its head, the TLS socket or None)."""
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        data = s.recv(4096)
        if not data:
            break
        head += data
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0
    if status != 200:
        s.close()
        return status, head.decode(errors="replace"), None
    context = ssl.create_default_context(cafile=cafile)
    if alpn:
        context.set_alpn_protocols(alpn)
    return status, head.decode(errors="replace"), context.wrap_socket(s, server_hostname=host)

class _Kept:
    """One buffered reader shared by successive responses (pipelined or kept alive)."""
    def __init__(self, f):
        self._f = f
    def __getattr__(self, name):
        return getattr(self._f, name)
    def close(self):
        pass

def responses(tls, count, method="GET"):
    """Up to `count` responses read off one TLS socket: status, headers (lower-case), body."""
    reader = _Kept(tls.makefile("rb"))
    class _Source:
        def makefile(self, *args, **kwargs):
            return reader
    got = []
    for _ in range(count):
        try:
            r = http.client.HTTPResponse(_Source(), method=method)
            r.begin()
        except (http.client.HTTPException, OSError) as error:
            got.append({"error": type(error).__name__})
            break
        headers = {}
        for name, value in r.getheaders():
            headers.setdefault(name.lower(), []).append(value)
        body = r.read()
        got.append({"status": r.status, "headers": {k: ", ".join(v) for k, v in headers.items()},
                    "body": body.decode(errors="replace"), "raw": body.hex()})
        if r.will_close:
            break
    return got
'''


def run(kc, code, timeout=120):
    """Runs code that emits (see PRELUDE); returns what it emitted, decoded."""
    reply, outputs = execute(kc, code, timeout=timeout)
    assert reply["content"]["status"] == "ok", (reply["content"], stderr_of(outputs))
    lines = stdout_of(outputs).strip().splitlines()
    assert lines, stderr_of(outputs)
    return json.loads(bytes.fromhex(lines[-1])), reply


def bearer(value):
    return f"Bearer {value}"


def private_dir(prefix):
    """A fresh directory for this test's own files (the sandbox sees none of it)."""
    path = pathlib.Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(path, 0o755)
    return path


@pytest.fixture(scope="module")
def world():
    """The outside world: the CA, the stand-ins, the values the kernel holds."""
    tmp = private_dir("belljar-secrets-")
    tls = make_ca(tmp / "tls", "localhost", "other.invalid")
    cert, key = tls / "localhost.crt", tls / "localhost-key.txt"
    known = {KEY: VALUE, OTHER: OTHER_VALUE}
    servers = {
        "api": StandIn(server_context(cert, key), known),         # KEY bound here
        "api2": StandIn(server_context(cert, key), known),        # KEY and OTHER bound here
        "unbound": StandIn(server_context(cert, key), known),     # allowlisted, no secret
        "plain": StandIn(None, known),                            # KEY bound, plain HTTP only
        "untrusted": StandIn(loopback_certificate(tmp)[0], known),  # KEY bound, not our CA
        "misnamed": StandIn(server_context(tls / "other.invalid.crt", tls / "other.invalid-key.txt"),
                            known),                               # KEY bound, another name
    }
    ports = {name: server.port for name, server in servers.items()}
    yield {"tmp": tmp, "ca": tls / "ca.crt", "servers": servers, "ports": ports}
    for server in servers.values():
        server.shutdown()
    shutil.rmtree(tmp, ignore_errors=True)


def binding_flags(ports):
    """The policy of these tests: each binding, and --allow-local-net since localhost is loopback."""
    bindings = [(KEY, "api"), (KEY, "api2"), (OTHER, "api2"), (KEY, "plain"), (KEY, "untrusted"),
                (KEY, "misnamed")]
    flags = []
    for name, server in bindings:
        flags += ["--secret", f"{name}@localhost:{ports[server]}"]
    for server in ports:
        flags += ["--allow-local-net", f"localhost:{ports[server]}"]
    return flags


def kernel_env(world):
    return {KEY: VALUE, OTHER: OTHER_VALUE}


def constants(world):
    """The cell-side names: ports, the secrets' names and needles (never a value)."""
    lines = [f"{name.upper()} = {port}" for name, port in world["ports"].items()]
    lines += [f"KEY, OTHER = {KEY!r}, {OTHER!r}",
              f"VALUE = {needle(VALUE)!r}", f"OTHER_VALUE = {needle(OTHER_VALUE)!r}",
              "PH, OTHER_PH = os.environ.get(KEY), os.environ.get(OTHER)",
              "AUTH = {'Authorization': 'Bearer ' + str(PH)}"]
    return "\n".join(lines) + "\n"


def start_kernel(world, name, extra_flags=(), files=()):
    """A kernel with this module's policy, its workspace holding the test CA (test-ca.crt: the
    unbound host's end-to-end TLS is checked against it) and `files` {name: text}."""
    workspace = sandbox_writable_dir("belljar-secrets-ws-")
    shutil.copy(world["ca"], workspace / "test-ca.crt")  # *.pem would be masked
    os.chmod(workspace / "test-ca.crt", 0o644)
    for filename, text in dict(files).items():
        (workspace / filename).write_text(text)
        os.chmod(workspace / filename, 0o644)
    logs = private_dir("belljar-secrets-logs-")
    audit, metrics = logs / "audit.jsonl", logs / "metrics.prom"
    # --pids: unprivileged, RLIMIT_NPROC counts every thread of the uid, the stand-ins' included.
    flags = ["--timeout", "60", "--pids", "1024", "--audit-log", str(audit), "--metrics", str(metrics),
             "--upstream-ca", str(world["ca"]), *binding_flags(world["ports"]), *extra_flags]
    context = running_kernel(flags=flags, workspace=str(workspace), env=kernel_env(world), name=name)
    started = False

    def stop():
        if started:
            context.__exit__(None, None, None)
        shutil.rmtree(workspace, ignore_errors=True)
        shutil.rmtree(logs, ignore_errors=True)
    try:
        km, kc = context.__enter__()
        started = True
        km.audit, km.metrics, km.workspace = audit, metrics, workspace
        reply, outputs = execute(kc, PRELUDE + constants(world))
        assert reply["content"]["status"] == "ok", (reply["content"], stderr_of(outputs))
    except BaseException:
        stop()
        raise
    return km, kc, stop


@pytest.fixture(scope="module")
def bound(world):
    km, kc, stop = start_kernel(world, "belljar-secrets")
    yield km, kc
    stop()


@pytest.fixture(scope="module")
def placeholders(bound):
    _, kc = bound
    got, _ = run(kc, "emit([PH, OTHER_PH])")
    return {KEY: got[0], OTHER: got[1]}


def received(world, server, case):
    return world["servers"][server].received.case(case)


def only(world, server, case):
    """The one request the stand-in got for `case`."""
    got = received(world, server, case)
    assert len(got) == 1, (server, case, [r["target"] for r in got])
    return got[0]


def egress_records(km):
    return [json.loads(line) for line in km.audit.read_text().splitlines()
            if line.strip() and json.loads(line).get("event") == "egress"]


def metric(text, name, **labels):
    """The value of one Prometheus sample, whatever the order of its labels (None if absent)."""
    for line in text.splitlines():
        match = re.fullmatch(r"(\w+)(?:\{(.*)\})? (\S+)", line.strip())
        if match and match[1] == name and dict(re.findall(r'(\w+)="([^"]*)"', match[2] or "")) == labels:
            return float(match[3])
    return None


# --- what the sandbox holds ------------------------------------------------------------------

def test_the_sandbox_holds_a_recognisable_placeholder_and_the_session_bundle(bound, placeholders):
    km, kc = bound
    got, _ = run(kc, "names = ['SSL_CERT_FILE', 'REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE', 'NODE_EXTRA_CA_CERTS']\n"
                     "bundle = open('/etc/belljar/ca-bundle.pem').read()\n"
                     "emit({'ca_env': {n: os.environ.get(n) for n in names},\n"
                     "      'certificates': bundle.count('BEGIN CERTIFICATE'),\n"
                     "      'private': 'PRIVATE KEY' in bundle,\n"
                     "      'proxy': os.environ.get('HTTPS_PROXY'),\n"
                     "      'value_in_env': any(holds(v, VALUE) or holds(v, OTHER_VALUE) for v in os.environ.values())})")
    for name, placeholder in placeholders.items():
        match = PLACEHOLDER.fullmatch(placeholder or "")
        assert match and match["name"] == name, placeholder
    assert placeholders[KEY] != placeholders[OTHER]
    assert set(got["ca_env"].values()) == {"/etc/belljar/ca-bundle.pem"}
    assert got["certificates"] >= 2, "the system CAs and the session CA"
    assert not got["private"]
    assert got["proxy"] == f"http://{PROXY}"
    assert not got["value_in_env"]


def test_a_kernel_without_secrets_sets_no_ca_variables(world):
    with running_kernel(flags=["--timeout", "30", "--allow-local-net", f"localhost:{world['ports']['unbound']}"],
                        env=kernel_env(world), name="belljar-no-secret") as (km, kc):
        got, _ = run(kc, "import os, json\n"
                         "print(json.dumps([os.environ.get(n) for n in ('SSL_CERT_FILE', 'REQUESTS_CA_BUNDLE',"
                         " 'CURL_CA_BUNDLE', 'NODE_EXTRA_CA_CERTS', 'BELLJAR_TEST_API_KEY')]).encode().hex())")
    assert got == [None] * 5


# --- injection --------------------------------------------------------------------------------

def test_requests_httpx_and_urllib_reach_the_bound_host_with_the_value(bound, world, placeholders):
    km, kc = bound
    got, _ = run(kc, "url = f'https://localhost:{API}/v1/chat/completions?case='\n"
                     "payload = {'model': 'gpt-4o-mini', 'temperature': 0,\n"
                     "           'messages': [{'role': 'user', 'content': 'What is sandboxing?'}]}\n"
                     "out = {}\n"
                     "r = requests.post(url + 'requests', headers=AUTH, json=payload, timeout=20)\n"
                     "out['requests'] = [r.status_code, r.json()['choices'][0]['message']['content']]\n"
                     "r = httpx.post(url + 'httpx', headers=AUTH, json=payload, timeout=20)\n"
                     "out['httpx'] = [r.status_code, r.json()['choices'][0]['message']['content']]\n"
                     "q = urllib.request.Request(url + 'urllib', data=json.dumps(payload).encode(),\n"
                     "                           headers=dict(AUTH, **{'Content-Type': 'application/json'}))\n"
                     "with urllib.request.urlopen(q, timeout=20) as r:\n"
                     "    out['urllib'] = [r.status, json.loads(r.read())['choices'][0]['message']['content']]\n"
                     "emit(out)")
    assert got == {client: [200, "answered"] for client in ("requests", "httpx", "urllib")}
    port = world["ports"]["api"]
    for client in ("requests", "httpx", "urllib"):
        request = only(world, "api", client)
        assert request["headers"]["authorization"] == bearer(VALUE), client
        assert request["headers"]["host"] in (f"localhost:{port}", "localhost"), client
        assert request["headers"]["accept-encoding"] == "identity", client
        assert json.loads(request["body"])["model"] == "gpt-4o-mini"


def test_every_header_gets_the_value_but_the_target_and_the_body_keep_the_placeholder(bound, world, placeholders):
    km, kc = bound
    run(kc, "r = requests.post(f'https://localhost:{API}/anything?case=everywhere&key={PH}',\n"
            "                  headers={'x-api-key': PH, 'api-key': PH, 'X-Custom': f'a-{PH}-b-{PH}-c',\n"
            "                           'Authorization': 'Bearer ' + PH},\n"
            "                  data=f'body holds {PH}'.encode(), timeout=20)\n"
            "emit(r.status_code)")
    request = only(world, "api", "everywhere")
    headers = request["headers"]
    assert headers["x-api-key"] == VALUE and headers["api-key"] == VALUE
    assert headers["x-custom"] == f"a-{VALUE}-b-{VALUE}-c"
    assert headers["authorization"] == bearer(VALUE)
    # The target is what a host stores and shows (names, searches, logs others read): a value
    # put there could be published by the host itself, so only headers carry it.
    assert f"key={placeholders[KEY]}" in request["target"] and VALUE not in request["target"]
    assert request["body"] == f"body holds {placeholders[KEY]}".encode()


def test_a_placeholder_reaches_only_the_hosts_its_secret_is_bound_to(bound, world, placeholders):
    km, kc = bound
    got, _ = run(kc, "both = {'Authorization': 'Bearer ' + PH, 'x-api-key': OTHER_PH}\n"
                     "issuer = {}\n"
                     "for name, port in (('api', API), ('api2', API2), ('unbound', UNBOUND)):\n"
                     "    verify = 'test-ca.crt' if name == 'unbound' else True\n"
                     "    r = requests.get(f'https://localhost:{port}/x?case=scope', headers=both, verify=verify, timeout=20)\n"
                     "    assert r.status_code == 200, (name, r.status_code, r.text)\n"
                     "    status, head, tls = tunnel(port, cafile='test-ca.crt' if name == 'unbound' else None)\n"
                     "    issuer[name] = dict(x[0] for x in tls.getpeercert()['issuer'])['commonName']\n"
                     "    tls.close()\n"
                     "emit(issuer)")
    # KEY is bound to api and api2, OTHER to api2 only; unbound gets placeholders only.
    api, api2, unbound = (only(world, s, "scope")["headers"] for s in ("api", "api2", "unbound"))
    assert api["authorization"] == bearer(VALUE) and api["x-api-key"] == placeholders[OTHER]
    assert api2["authorization"] == bearer(VALUE) and api2["x-api-key"] == OTHER_VALUE
    assert unbound["authorization"] == bearer(placeholders[KEY]) and unbound["x-api-key"] == placeholders[OTHER]
    # The proxy terminates TLS for bound hosts only: the unbound host's certificate is its own.
    assert got == {"api": SESSION_CA, "api2": SESSION_CA, "unbound": "belljar demo CA"}


def test_curl_inside_reaches_the_bound_host_with_the_value(bound, world):
    if not os.path.exists("/usr/bin/curl"):
        pytest.skip("no /usr/bin/curl (scripts/install-deps.sh installs it)")
    km, kc = bound
    got, _ = run(kc, "done = subprocess.run(['curl', '-sS', '-H', 'Authorization: Bearer ' + PH,\n"
                     "                       f'https://localhost:{API}/v1/chat/completions?case=curl', '-d', '{}'],\n"
                     "                      capture_output=True, timeout=30)\n"
                     "emit([done.returncode, done.stderr.decode(), json.loads(done.stdout or b'{}').get('usage')])")
    assert got[0] == 0, got[1]
    assert got[2]["prompt_tokens"] == CHAT_USAGE["prompt_tokens"]
    assert only(world, "api", "curl")["headers"]["authorization"] == bearer(VALUE)


# --- nothing comes back -----------------------------------------------------------------------

def test_an_echo_gives_back_only_the_placeholder(bound, world, placeholders):
    km, kc = bound
    got, _ = run(kc, "r = requests.get(f'https://localhost:{API}/echo?case=echo&key={PH}',\n"
                     "                 headers={'Authorization': 'Bearer ' + PH, 'x-api-key': PH}, timeout=20)\n"
                     "headers = {k.lower(): v for k, v in r.headers.items()}\n"
                     "raw = r.content + json.dumps(headers).encode()\n"
                     "emit({'status': r.status_code, 'echo': r.json(), 'headers': headers,\n"
                     "      'value_seen': holds(raw, VALUE)})")
    request = only(world, "api", "echo")
    assert request["headers"]["authorization"] == bearer(VALUE)  # the value did go upstream
    assert got["status"] == 200 and not got["value_seen"]
    assert VALUE not in json.dumps(got)
    assert got["echo"]["headers"]["authorization"] == bearer(placeholders[KEY])
    assert got["echo"]["headers"]["x-api-key"] == placeholders[KEY]
    assert f"key={placeholders[KEY]}" in got["echo"]["target"]
    assert got["headers"]["x-echo-authorization"] == bearer(placeholders[KEY])
    assert got["headers"]["x-echo-api-key"] == placeholders[KEY]


def test_a_redirect_quoting_the_value_gives_back_the_placeholder(bound, world, placeholders):
    km, kc = bound
    got, _ = run(kc, "r = requests.get(f'https://localhost:{API}/redirect?case=redirect', headers=AUTH,\n"
                     "                 allow_redirects=False, timeout=20)\n"
                     "emit([r.status_code, r.headers.get('Location'), holds(r.headers.get('Location', ''), VALUE)])")
    status, location, value_seen = got
    assert only(world, "api", "redirect")["headers"]["authorization"] == bearer(VALUE)
    assert status == 302 and not value_seen and VALUE not in location
    assert f"auth=Bearer%20{placeholders[KEY]}" in location


def test_the_value_split_across_reads_is_replaced_and_bodies_are_rechunked(bound, world, placeholders):
    km, kc = bound
    got, _ = run(kc, "out = {}\n"
                     "for case, which, big in (('split', KEY, ''), ('split-big', KEY, '&big=1'),\n"
                     "                         ('split-other', OTHER, '')):\n"
                     "    r = requests.get(f'https://localhost:{API}/leak?case={case}&which={which}{big}', timeout=30)\n"
                     "    body = r.content\n"
                     "    at = body.find(b'the key is ')\n"
                     "    out[case] = {'status': r.status_code, 'length': len(body), 'at': at,\n"
                     "                 'around': body[at:at + 120].decode(errors='replace'),\n"
                     "                 'before': body.count(b'='), 'after': body.count(b'~'),\n"
                     "                 'value_seen': holds(body, VALUE) or holds(body, OTHER_VALUE),\n"
                     "                 'te': r.headers.get('Transfer-Encoding'), 'cl': r.headers.get('Content-Length')}\n"
                     "emit(out)")
    ph, other_ph = placeholders[KEY], placeholders[OTHER]
    tail = " and that was it\n"
    assert got["split"]["around"] == f"the key is {ph}{tail}"
    assert got["split-other"]["around"] == f"the key is {other_ph}{tail}"  # any bound value, any host
    big = got["split-big"]
    assert big["at"] == 512 * 1024 + 3 and big["around"].startswith(f"the key is {ph}{tail}")
    assert big["before"] == 512 * 1024 + 3 and big["after"] == 512 * 1024 - 5
    assert big["length"] == 1024 * 1024 - 2 + len("the key is ") + len(ph) + len(tail)
    for case in got.values():
        assert case["status"] == 200 and not case["value_seen"]
        assert case["te"] == "chunked" and case["cl"] is None  # re-framed
    assert VALUE not in json.dumps(got) and OTHER_VALUE not in json.dumps(got)


def test_a_streamed_reply_arrives_as_it_is_sent_with_the_final_usage(bound, world):
    # Streamed, not held to the end: the stand-in sends the first event and holds the rest
    # until the cell, having read that event, asks for them.
    km, kc = bound
    got, _ = run(kc, "events = []\n"
                     "headers = {'x-api-key': PH, 'anthropic-version': '2023-06-01'}\n"
                     "body = {'model': 'claude', 'max_tokens': 64, 'stream': True,\n"
                     "        'messages': [{'role': 'user', 'content': 'hi'}]}\n"
                     "with httpx.stream('POST', f'https://localhost:{API}/v1/messages?case=sse&hold=1', headers=headers,\n"
                     "                  json=body, timeout=30) as r:\n"
                     "    for line in r.iter_lines():\n"
                     "        if line.startswith('data: '):\n"
                     "            events.append(json.loads(line[6:]))\n"
                     "            if len(events) == 1:\n"
                     "                requests.get(f'https://localhost:{API}/release?stream=sse&case=sse-release', timeout=20)\n"
                     "emit({'types': [e['type'] for e in events],\n"
                     "      'usage': [e.get('usage') for e in events if e['type'] == 'message_delta'],\n"
                     "      'text': ''.join(e['delta'].get('text', '') for e in events if e['type'] == 'content_block_delta')})")
    assert only(world, "api", "sse")["headers"]["x-api-key"] == VALUE
    assert got["types"] == ["message_start", "content_block_delta", "content_block_delta",
                            "message_delta", "message_stop"]
    assert got["usage"] == [STREAM_USAGE]
    assert got["text"] == "streamed " * 40 + "answer " * 40
    assert world["servers"]["api"].received.streams["sse"] == "released", \
        "the first event reached the cell only once the stream had ended"


# --- what is refused --------------------------------------------------------------------------

def test_plain_http_to_a_bound_host_is_refused_and_sends_nothing(bound, world):
    km, kc = bound
    port = world["ports"]["plain"]
    got, _ = run(kc, "r = requests.get(f'http://localhost:{PLAIN}/x?case=plain', headers=AUTH, timeout=20)\n"
                     "emit([r.status_code, r.headers.get('X-Belljar-Denied'), r.text])")
    status, denied, body = got
    assert status == 403 and denied == "secret-needs-tls"
    assert f"--secret {KEY}@localhost:{port}" in body
    assert world["servers"]["plain"].received.requests == []
    assert world["servers"]["plain"].received.connections == 0


def test_http2_only_clients_fail_the_handshake_and_http11_is_chosen(bound, world):
    km, kc = bound
    got, _ = run(kc, "out = {}\n"
                     "try:\n"
                     "    tunnel(API, alpn=['h2'])\n"
                     "    out['h2'] = 'handshake completed'\n"
                     "except ssl.SSLError as error:\n"
                     "    out['h2'] = 'refused'\n"
                     "status, head, tls = tunnel(API, alpn=['h2', 'http/1.1'])\n"
                     "out['both'] = tls.selected_alpn_protocol()\n"
                     "tls.close()\n"
                     "emit(out)")
    assert got == {"h2": "refused", "both": "http/1.1"}


def test_http10_and_websocket_upgrades_are_refused(bound, world):
    km, kc = bound
    got, _ = run(kc, "out = {}\n"
                     "for case, request in (\n"
                     "        ('http10', f'GET /echo?case=http10 HTTP/1.0\\r\\nHost: localhost:{API}\\r\\n'\n"
                     "                   f'Authorization: Bearer {PH}\\r\\n\\r\\n'),\n"
                     "        ('websocket', f'GET /echo?case=websocket HTTP/1.1\\r\\nHost: localhost:{API}\\r\\n'\n"
                     "                      'Upgrade: websocket\\r\\nConnection: Upgrade\\r\\n'\n"
                     "                      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\\r\\nSec-WebSocket-Version: 13\\r\\n'\n"
                     "                      f'Authorization: Bearer {PH}\\r\\n\\r\\n')):\n"
                     "    status, head, tls = tunnel(API)\n"
                     "    tls.sendall(request.encode())\n"
                     "    r = responses(tls, 1)[0]\n"
                     "    out[case] = [r.get('status'), r.get('headers', {}).get('x-belljar-denied')]\n"
                     "    tls.close()\n"
                     "emit(out)")
    for case in ("http10", "websocket"):
        status, denied = got[case]
        assert status in (400, 426, 501, 505) and denied == "secret-unsupported-request", (case, got[case])
        assert received(world, "api", case) == []


def test_a_compressed_reply_is_refused_and_identity_was_asked(bound, world):
    km, kc = bound
    got, _ = run(kc, "r = requests.get(f'https://localhost:{API}/gzip?case=gzip', headers=AUTH, timeout=20)\n"
                     "emit([r.status_code, r.headers.get('X-Belljar-Error')])")
    assert got == [502, "compressed-response"]
    assert only(world, "api", "gzip")["headers"]["accept-encoding"] == "identity"


@pytest.mark.parametrize("into", ["Transfer-Encoding", "Content-Encoding"])
def test_a_refusal_never_quotes_the_value_the_host_reflected(bound, world, into):
    # The host puts the X-Api-Key it received (the real value) into the header the proxy refuses.
    km, kc = bound
    case = "reflect-" + into.lower()
    got, _ = run(kc, f"r = requests.get(f'https://localhost:{{API}}/reflect?into={into}&case={case}',\n"
                     "                 headers={'X-Api-Key': PH}, timeout=20)\n"
                     "seen = r.text + json.dumps(dict(r.headers))\n"
                     "emit([r.status_code, r.headers.get('X-Belljar-Error'), VALUE['head'] in seen,\n"
                     "      VALUE['head'][:12] in seen, fence()])")
    assert only(world, "api", case)["headers"]["x-api-key"] == VALUE  # the attack was live
    status, error, leaked, leaked_part, fenced = got
    assert status == 502 and error in ("upstream-response", "compressed-response"), got
    assert not leaked and not leaked_part, got
    assert fenced == 403
    assert any(r.get("reason") == error and r.get("port") == world["ports"]["api"]
               for r in egress_records(km))
    logged = km.audit.read_text()
    assert VALUE not in logged and VALUE[: len(VALUE) // 2] not in logged


def test_range_requests_to_a_bound_host_are_refused_and_never_sent(bound, world):
    # Slices of a reflected header, each shorter than the value, would each pass the scrubber.
    km, kc = bound
    got, _ = run(kc, "url = f'https://localhost:{API}/slice?case=range'\n"
                     "pieces, answers = b'', []\n"
                     "for at in range(0, 80, 4):\n"
                     "    r = requests.get(url, headers={**AUTH, 'Range': f'bytes={at}-{at + 3}'}, timeout=20)\n"
                     "    answers.append([r.status_code, r.headers.get('X-Belljar-Denied')])\n"
                     "    pieces += r.content if r.status_code == 206 else b''\n"
                     "r = requests.get(url, headers={**AUTH, 'If-Range': 'x'}, timeout=20)\n"
                     "answers.append([r.status_code, r.headers.get('X-Belljar-Denied')])\n"
                     "emit({'answers': answers, 'rebuilt': VALUE['head'] in pieces.decode(errors='replace')})")
    assert not got["rebuilt"], got
    assert all(answer == [403, "secret-unsupported-request"] for answer in got["answers"]), got
    assert received(world, "api", "range") == []


def test_a_bodiless_response_gives_no_length_of_what_the_host_echoed(bound, world):
    # HEAD (and a 204 or 304 with a length) would measure an echo of the value.
    km, kc = bound
    got, _ = run(kc, "base = f'https://localhost:{API}/slice'\n"
                     "h = requests.head(base + '?case=head', headers=AUTH, timeout=20)\n"
                     "n = requests.get(base + '?status=204&case=s204', headers=AUTH, timeout=20)\n"
                     "m = requests.get(base + '?status=304&case=s304', headers=AUTH, timeout=20)\n"
                     "emit([[r.status_code, r.headers.get('Content-Length'), r.headers.get('Content-Range')]\n"
                     "      for r in (h, n, m)])")
    assert got == [[200, None, None], [204, None, None], [304, None, None]], got
    for case in ("head", "s204", "s304"):
        assert only(world, "api", case)["headers"]["authorization"] == bearer(VALUE)


@pytest.mark.parametrize("server", ["untrusted", "misnamed"])
def test_a_bound_host_whose_certificate_fails_verification_gets_nothing(bound, world, server):
    km, kc = bound
    got, _ = run(kc, f"status, head, tls = tunnel({server.upper()})\n"
                     "if tls is None:\n"
                     "    emit(['connect', status, head])\n"
                     "else:\n"
                     f"    tls.sendall(f'GET /x?case=cert HTTP/1.1\\r\\nHost: localhost:{{{server.upper()}}}\\r\\n'\n"
                     "                f'Authorization: Bearer {PH}\\r\\nConnection: close\\r\\n\\r\\n'.encode())\n"
                     "    r = responses(tls, 1)[0]\n"
                     "    emit(['request', r.get('status'), r.get('headers', {}).get('x-belljar-error', '')])")
    # Refused either as the CONNECT's answer or as the answer to the request inside the tunnel.
    where, status, detail = got
    assert status == 502 and "upstream-certificate" in detail, got
    assert world["servers"][server].received.requests == []


def test_a_client_pinned_to_its_own_ca_bundle_fails_closed(bound, world):
    km, kc = bound
    got, _ = run(kc, "try:\n"
                     "    requests.get(f'https://localhost:{API}/x?case=pinned', headers=AUTH, verify='test-ca.crt', timeout=20)\n"
                     "    emit('reached')\n"
                     "except requests.exceptions.SSLError as error:\n"
                     "    emit('certificate refused')")
    assert got == "certificate refused"
    assert received(world, "api", "pinned") == []


# --- HTTP/1.1 framing -------------------------------------------------------------------------

def test_keep_alive_and_chunked_request_bodies(bound, world, placeholders):
    km, kc = bound
    got, _ = run(kc, "conn = http.client.HTTPSConnection('127.0.0.1', 3128, timeout=20,\n"
                     "                                   context=ssl.create_default_context())\n"
                     "conn.set_tunnel('localhost', API)\n"
                     "kept, statuses = [], []\n"
                     "def parts():\n"
                     "    yield b'{\"first\": '\n"
                     "    yield f'\"{PH}\"'.encode()\n"
                     "    yield b'}'\n"
                     "for case, body in (('keep-1', b'{\"n\": 1}'), ('keep-chunked', parts()), ('keep-3', None)):\n"
                     "    headers = dict(AUTH)\n"
                     "    conn.request('POST', f'/echo?case={case}', body=body, headers=headers,\n"
                     "                 encode_chunked=not isinstance(body, (bytes, type(None))))\n"
                     "    r = conn.getresponse()\n"
                     "    r.read()\n"
                     "    statuses.append(r.status)\n"
                     "    kept.append(conn.sock)  # the socket object itself: a new one can't reuse its id\n"
                     "with requests.Session() as s:\n"
                     "    statuses += [s.get(f'https://localhost:{API}/x?case=session', headers=AUTH, timeout=20).status_code\n"
                     "                 for _ in range(2)]\n"
                     "    statuses.append(s.post(f'https://localhost:{API}/x?case=requests-chunked', headers=AUTH,\n"
                     "                           data=iter([b'abc', b'def']), timeout=20).status_code)\n"
                     "with httpx.Client() as c:\n"
                     "    statuses += [c.get(f'https://localhost:{API}/x?case=httpx-client', headers=AUTH, timeout=20).status_code\n"
                     "                 for _ in range(2)]\n"
                     "emit({'statuses': statuses, 'one_connection': kept[0] is not None and all(s is kept[0] for s in kept)})")
    assert got == {"statuses": [200] * 8, "one_connection": True}
    assert only(world, "api", "keep-1")["body"] == b'{"n": 1}'
    chunked = only(world, "api", "keep-chunked")
    assert chunked["body"] == b'{"first": "%s"}' % placeholders[KEY].encode()  # bodies are not rewritten
    assert only(world, "api", "requests-chunked")["body"] == b"abcdef"
    for case, count in (("keep-1", 1), ("keep-chunked", 1), ("keep-3", 1), ("session", 2),
                        ("requests-chunked", 1), ("httpx-client", 2)):
        got_case = received(world, "api", case)
        assert len(got_case) == count, case
        assert all(r["headers"]["authorization"] == bearer(VALUE) for r in got_case), case


def test_pipelined_requests_are_each_injected_with_the_host_forced(bound, world, placeholders):
    km, kc = bound
    got, _ = run(kc, "status, head, tls = tunnel(API)\n"
                     "tls.sendall((f'GET /echo?case=pipe-1 HTTP/1.1\\r\\nHost: evil.example\\r\\n'\n"
                     "             f'Authorization: Bearer {PH}\\r\\n\\r\\n'\n"
                     "             f'POST /echo?case=pipe-2 HTTP/1.1\\r\\nHost: localhost:{API}\\r\\n'\n"
                     "             f'x-api-key: {PH}\\r\\nContent-Length: 5\\r\\n\\r\\nhello'\n"
                     "             f'GET /echo?case=pipe-3 HTTP/1.1\\r\\nHost: localhost:{API}\\r\\n'\n"
                     "             f'Authorization: Bearer {PH}\\r\\nConnection: close\\r\\n\\r\\n').encode())\n"
                     "got = responses(tls, 3)\n"
                     "emit([[r.get('status'), json.loads(r['body'])['target'] if r.get('status') == 200 else r,\n"
                     "       holds(bytes.fromhex(r.get('raw', '')), VALUE)] for r in got])")
    assert [r[0] for r in got] == [200, 200, 200], got
    assert [r[1].split("case=")[1] for r in got] == ["pipe-1", "pipe-2", "pipe-3"]
    assert not any(r[2] for r in got)
    port = world["ports"]["api"]
    first, second, third = (only(world, "api", f"pipe-{n}") for n in (1, 2, 3))
    assert first["headers"]["host"] in (f"localhost:{port}", "localhost")  # never evil.example
    assert first["headers"]["authorization"] == bearer(VALUE)
    assert second["headers"]["x-api-key"] == VALUE and second["body"] == b"hello"
    assert third["headers"]["authorization"] == bearer(VALUE)


def test_a_request_hidden_behind_ambiguous_framing_never_reaches_the_host(bound, world):
    km, kc = bound
    api = world["servers"]["api"].received
    with api.lock:
        before = api.connections
    run(kc, "hidden = f'GET /echo?case=smuggled HTTP/1.1\\r\\nHost: evil.example\\r\\n\\r\\n'\n"
            "body = '0\\r\\n\\r\\n' + hidden\n"
            "status, head, tls = tunnel(API)\n"
            "tls.sendall((f'POST /echo?case=smuggle HTTP/1.1\\r\\nHost: localhost:{API}\\r\\n'\n"
            "             f'Authorization: Bearer {PH}\\r\\nContent-Length: {len(body)}\\r\\n'\n"
            "             'Transfer-Encoding: chunked\\r\\n\\r\\n' + body).encode())\n"
            "tls.settimeout(5)\n"
            "try:\n"
            "    emit([r.get('status') for r in responses(tls, 2)])\n"
            "except OSError:\n"
            "    emit('closed')\n"
            "tls.close()")
    # The fence: the end of every connection the host got meanwhile (the tunnel's, closed by
    # now). The proxy forwards nothing before its upstream TLS handshake, so that connection was
    # accepted before the cell had its answer, and a handler reads and records every request
    # that came on its connection before it sees the end.
    with api.lock:
        meanwhile = range(before + 1, api.connections + 1)
    assert api.wait_finished(meanwhile), "the tunnel's connection to the host never ended"
    assert received(world, "api", "smuggled") == []
    for request in world["servers"]["api"].received.requests:
        assert request["headers"].get("host") != "evil.example", request["target"]
        assert not ("content-length" in request["headers"] and "transfer-encoding" in request["headers"])


# --- the session --------------------------------------------------------------------------------

def test_nothing_the_sandbox_can_read_holds_the_value(bound, world):
    """After every test above: environments, command lines, the memory of every process the
    sandbox can open, and the files in /tmp, /dev/shm, /etc, the home and the workspace -- after
    the cell itself wrote the key to files, as a thief would."""
    km, kc = bound
    got, _ = run(kc, r'''
for path in ('/tmp/stolen.txt', 'stolen.txt', os.path.expanduser('~/stolen.txt')):
    with open(path, 'w') as f:
        f.write(f'{PH}\n{OTHER_PH}\n')
needles = [VALUE, OTHER_VALUE]
def dirty(data):
    return any(holds(data, n) for n in needles)
hits, unreadable, scanned = [], [], {'files': 0, 'memory_bytes': 0, 'processes': 0}
pids = [p for p in os.listdir('/proc') if p.isdigit()]
for pid in pids:
    for leaf in ('environ', 'cmdline'):
        try:
            if dirty(open(f'/proc/{pid}/{leaf}', 'rb').read()):
                hits.append(f'/proc/{pid}/{leaf}')
        except OSError:
            pass
    try:
        maps = open(f'/proc/{pid}/maps').read().splitlines()
        mem = open(f'/proc/{pid}/mem', 'rb', buffering=0)
    except OSError as error:
        unreadable.append(f'{pid}: {error.strerror}')
        continue
    scanned['processes'] += 1
    for line in maps:
        fields = line.split()
        name = fields[5] if len(fields) > 5 else ''
        if 'r' not in fields[1] or (name and not name.startswith('[')) or name in ('[vvar]', '[vsyscall]'):
            continue  # file-backed mappings: the files are scanned below
        start, end = (int(x, 16) for x in fields[0].split('-'))
        at, previous = start, b''
        while at < end and scanned['memory_bytes'] < (2 << 30):
            try:
                mem.seek(at)
                block = mem.read(min(8 << 20, end - at))
            except OSError:
                break
            if not block:
                break
            scanned['memory_bytes'] += len(block)
            if dirty(previous[-128:] + block):
                hits.append(f'/proc/{pid}/mem {fields[0]} {name}')
                break
            previous, at = block, at + len(block)
    mem.close()
for path in regular_files(['/tmp', '/dev/shm', '/etc', os.path.expanduser('~'), os.getcwd(), '/run', '/var']):
    scanned['files'] += 1
    try:
        if dirty(open(path, 'rb').read()):
            hits.append(path)
    except OSError:
        pass
emit({'hits': hits, 'unreadable': unreadable, 'scanned': scanned})
''', timeout=300)
    assert got["hits"] == [], got
    assert got["scanned"]["files"] > 10, got
    # Memory the sandbox can open was read (its own at least), or none can be opened at all.
    assert got["scanned"]["memory_bytes"] > 1 << 20 or got["scanned"]["processes"] == 0, got
    assert got["scanned"]["processes"] + len(got["unreadable"]) >= 2, got  # the worker and the jail's init


def test_the_audit_log_and_metrics_name_the_secret_never_the_value(bound, world):
    km, kc = bound
    run(kc, "emit(requests.get(f'https://localhost:{API}/x?case=last', headers=AUTH, timeout=20).status_code)")
    # An exchange's record goes out before the end of its response: the reply is its fence.
    assert any(r.get("secrets") == [KEY] and r.get("port") == world["ports"]["api"]
               for r in egress_records(km))
    for path in (km.audit, km.metrics):
        data = path.read_bytes()
        for value in (VALUE, OTHER_VALUE):
            for form in (value.encode(), value.encode().hex().encode(), base64.b64encode(value.encode())):
                assert form not in data, (path.name, form[:12])
    assert metric(km.metrics.read_text(), "belljar_secret_requests_total", secret=KEY, injected="true") >= 1


def test_the_placeholder_survives_a_worker_restart_and_injection_goes_on(bound, world, placeholders):
    km, kc = bound
    reply, _ = execute(kc, "import os; os._exit(3)")
    assert reply["content"]["status"] == "error"
    reply, outputs = execute(kc, PRELUDE + constants(world))  # a fresh worker: names again
    assert reply["content"]["status"] == "ok", stderr_of(outputs)
    got, _ = run(kc, "r = requests.get(f'https://localhost:{API}/x?case=restarted', headers=AUTH, timeout=20)\n"
                     "emit([PH, OTHER_PH, r.status_code])")
    assert got == [placeholders[KEY], placeholders[OTHER], 200]
    assert only(world, "api", "restarted")["headers"]["authorization"] == bearer(VALUE)


# --- the records: one kernel of their own, so that each request of a cell is on the record --------

@pytest.fixture(scope="module")
def recorded(world):
    km, kc, stop = start_kernel(world, "belljar-secrets-records")
    yield km, kc
    stop()


def test_each_request_is_recorded_and_the_cell_sums_tokens_and_latency(recorded, world):
    km, kc = recorded
    port = world["ports"]["api"]
    got, reply = run(kc, "r1 = requests.post(f'https://localhost:{API}/v1/chat/completions?case=rec-chat', headers=AUTH,\n"
                         "                   json={'model': 'gpt-4o-mini', 'messages': []}, timeout=20)\n"
                         "with httpx.stream('POST', f'https://localhost:{API}/v1/messages?case=rec-sse',\n"
                         "                  headers={'x-api-key': PH}, json={'stream': True}, timeout=30) as r2:\n"
                         "    r2.read()\n"
                         "r3 = requests.get(f'https://localhost:{API}/x?case=rec-plain', timeout=20)\n"
                         "emit([r1.status_code, r2.status_code, r3.status_code])")
    assert got == [200, 200, 200]
    count = reply["content"]["execution_count"]
    facts = reply["metadata"]["belljar"]["secrets"]
    assert facts["requests"] == 3 and facts["injected"] == 2
    assert facts["input_tokens"] == CHAT_USAGE["prompt_tokens"] + STREAM_USAGE["input_tokens"]
    assert facts["output_tokens"] == CHAT_USAGE["completion_tokens"] + STREAM_USAGE["output_tokens"]
    assert facts["latency_ms"] >= 50  # the chat stand-in answers after 50 ms

    def requests_of_the_cell():
        return [r for r in egress_records(km)
                if "injected" in r and r.get("execution_count") == count and r.get("port") == port]
    # Recorded with the facts above, before the reply (kernel/session/egress_link.cpp).
    assert len(requests_of_the_cell()) == 3, requests_of_the_cell()
    by_method = sorted(requests_of_the_cell(), key=lambda r: (r["method"], r["injected"], (r.get("tokens") or {}).get("input", 0)))
    plain, chat, sse = by_method[0], by_method[1], by_method[2]
    for record in (plain, chat, sse):
        assert record["decision"] == "allowed" and record["host"] == "localhost"
        assert record["secrets"] == [KEY] and record["status"] == 200
        assert isinstance(record["latency_ms"], (int, float)) and record["latency_ms"] >= 0
    assert plain["method"] == "GET" and plain["injected"] is False and not plain.get("tokens")
    assert chat["method"] == "POST" and chat["injected"] is True
    assert chat["tokens"] == {"input": CHAT_USAGE["prompt_tokens"], "output": CHAT_USAGE["completion_tokens"]}
    assert chat["latency_ms"] >= 50
    assert sse["method"] == "POST" and sse["injected"] is True
    assert sse["tokens"] == {"input": STREAM_USAGE["input_tokens"], "output": STREAM_USAGE["output_tokens"]}

    # The cell's own record (written before its reply), and %audit, carry the same sums.
    cell = [json.loads(line) for line in km.audit.read_text().splitlines()
            if json.loads(line).get("event") == "cell" and json.loads(line).get("execution_count") == count][-1]
    assert cell["secrets"] == facts
    _, outputs = execute(kc, "%audit 3")
    shown = [m["content"]["data"] for m in of_type(outputs, "display_data")]
    assert shown and [r for r in shown[0]["application/vnd.belljar.audit+json"]["records"]
                      if r["execution_count"] == count][0]["secrets"] == facts
    assert "API calls" in shown[0]["text/plain"]
    assert "3 (%d+%d tokens" % (facts["input_tokens"], facts["output_tokens"]) in shown[0]["text/plain"]

    metrics = km.metrics.read_text()  # rewritten at the end of each cell, before its reply
    assert metric(metrics, "belljar_secret_requests_total", secret=KEY, injected="true") == 2, metrics
    assert metric(metrics, "belljar_secret_requests_total", secret=KEY, injected="false") == 1, metrics
    assert metric(metrics, "belljar_model_tokens_total", kind="input") == facts["input_tokens"], metrics
    assert metric(metrics, "belljar_model_tokens_total", kind="output") == facts["output_tokens"], metrics


def test_a_cell_without_requests_to_a_bound_host_has_no_secrets_facts(recorded, world):
    km, kc = recorded
    _, reply = run(kc, "r = requests.get(f'https://localhost:{UNBOUND}/x?case=rec-unbound', headers=AUTH,\n"
                       "                 verify='test-ca.crt', timeout=20)\n"
                       "emit(r.status_code)")
    assert "secrets" not in reply["metadata"]["belljar"]
    _, reply = run(kc, "emit(1 + 1)")
    assert "secrets" not in reply["metadata"]["belljar"]


# --- the output redaction knows the real values ---------------------------------------------------

@pytest.fixture(scope="module")
def redacting(world):
    # The value reaches the sandbox only because the user put it in a workspace file: the
    # supervisor still keeps it out of what the client sees.
    km, kc, stop = start_kernel(world, "belljar-secrets-redaction",
                                files={"notes.txt": f"my key is {VALUE}\n"})
    yield km, kc
    stop()


def test_a_real_value_printed_from_a_workspace_file_is_redacted(redacting):
    km, kc = redacting
    reply, outputs = execute(kc, "text = open('notes.txt').read()\nprint(text)\ntext")
    assert reply["content"]["status"] == "ok"
    shown = json.dumps([m["content"] for m in outputs])
    assert VALUE not in shown
    assert "[redacted]" in stdout_of(outputs)
    assert VALUE.encode() not in km.audit.read_bytes()


def test_redaction_of_a_bound_value_is_no_oracle(redacting):
    # The start of the real value, then more after a pause, is cut into stream messages exactly
    # like a wrong guess: a redactor holding back a matching prefix would answer guesses.
    km, kc = redacting
    code = ("import sys, time\n"
            "sys.stdout.write({!r}); sys.stdout.flush(); time.sleep(0.3)\n"
            "sys.stdout.write('!'); sys.stdout.flush(); time.sleep(0.3)\n")

    def streams(guess):
        _, outputs = execute(kc, code.format(guess))
        return [m["content"]["text"] for m in of_type(outputs, "stream")]
    matching = streams(VALUE[:20])
    wrong = streams(VALUE[:16] + "zzzz")
    assert [len(t) for t in matching] == [len(t) for t in wrong], (matching, wrong)


# --- refusals at start, belljar run, --secret-file and the policy file ------------------------------

def connection_file(directory):
    path = str(directory / "kernel.json")
    write_connection_file(path, ip="127.0.0.1", key=secrets.token_hex(16).encode())
    return path


def refusal(front_door, flags, env, tmp_path):
    environment = {k: v for k, v in os.environ.items() if not k.startswith("BELLJAR_REFUSAL_")}
    environment.update(env)
    common = ["--python", PYTHON, "--isolation", ISOLATION, "--timeout", "20", *flags]
    if front_door == "kernel":
        os.chmod(tmp_path, 0o755)
        args = ["kernel", "-f", connection_file(tmp_path), *common]
    else:
        args = ["run", "--workspace", str(tmp_path), *common, "-c", "print('ran')"]
    return belljar(*args, env=environment, timeout=60)


@pytest.mark.parametrize("front_door", ["kernel", "run"])
def test_a_missing_variable_refuses_to_start_with_one_line(front_door, tmp_path):
    done = refusal(front_door, ["--secret", "BELLJAR_REFUSAL_MISSING@localhost:8443"], {}, tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("belljar: --secret BELLJAR_REFUSAL_MISSING@localhost")
    assert "BELLJAR_REFUSAL_MISSING is not set in the kernel's environment" in lines[0]


@pytest.mark.parametrize("value", ["", "k3y-5x", "line1xyz\r\nX-Injected: yes", "tab\there-and-more"],
                         ids=["empty", "shorter than 8 bytes", "CR LF", "control character"])
def test_a_value_that_cannot_be_a_header_value_is_refused(value, tmp_path):
    done = refusal("run", ["--secret", "BELLJAR_REFUSAL_BAD@localhost:8443"],
                   {"BELLJAR_REFUSAL_BAD": value}, tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("belljar: --secret BELLJAR_REFUSAL_BAD@localhost"), lines
    assert value == "" or value not in done.stderr  # a refusal never quotes the value


def test_an_unreadable_secret_file_refuses_to_start(tmp_path):
    missing = tmp_path / "no-such-key.txt"
    done = refusal("run", ["--secret-file", f"BELLJAR_REFUSAL_FILE={missing}@localhost:8443"], {}, tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("belljar: --secret-file BELLJAR_REFUSAL_FILE="), lines
    assert f"cannot read {missing}" in lines[0] and "No such file or directory" in lines[0]


def run_once(world, workspace, flags, code, env=None, trust=True):
    """`belljar run -c` with this module's prelude, trusting the test CA (--upstream-ca) unless
    told not to; returns (what the code emitted, stderr)."""
    environment = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    environment.update(env or {})
    trusted = ["--upstream-ca", str(world["ca"])] if trust else []
    done = belljar("run", "--python", PYTHON, "--isolation", ISOLATION, "--timeout", "60",
                   "--pids", "1024", "--workspace", str(workspace), *trusted, *flags,
                   "-c", PRELUDE + code, env=environment, cwd=workspace, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(bytes.fromhex(done.stdout.strip().splitlines()[-1])), done.stderr


def test_belljar_run_takes_a_secret_file_and_strips_one_trailing_newline(world, tmp_path):
    file_value = "sk-belljar-file-" + secrets.token_hex(16)
    key_file = tmp_path / "key.txt"
    key_file.write_text(file_value + "\n")
    workspace = sandbox_writable_dir("belljar-secrets-run-")
    try:
        port = world["ports"]["api"]
        got, stderr = run_once(world, workspace,
                               ["--secret-file", f"FILE_KEY={key_file}@localhost:{port}",
                                "--allow-local-net", f"localhost:{port}"],
                               f"ph = os.environ['FILE_KEY']\n"
                               f"r = requests.get('https://localhost:{port}/echo?case=secret-file',\n"
                               "                 headers={'Authorization': 'Bearer ' + ph}, timeout=20)\n"
                               "emit([ph, r.json()['headers']['authorization']])")
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    placeholder, echoed = got
    assert PLACEHOLDER.fullmatch(placeholder) and PLACEHOLDER.fullmatch(placeholder)["name"] == "FILE_KEY"
    assert echoed == bearer(placeholder)
    assert only(world, "api", "secret-file")["headers"]["authorization"] == bearer(file_value)
    assert file_value not in stderr


def test_the_policy_file_binds_a_secret_as_the_flag_does(world, tmp_path):
    port = world["ports"]["api"]
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"secret": [f"{KEY}@localhost:{port}"],
                                  "allow-local-net": [f"localhost:{port}"]}))
    workspace = sandbox_writable_dir("belljar-secrets-run-")
    try:
        got, _ = run_once(world, workspace, ["--policy", str(policy)],
                          f"r = requests.get('https://localhost:{port}/x?case=policy-file',\n"
                          f"                 headers={{'Authorization': 'Bearer ' + os.environ['{KEY}']}}, timeout=20)\n"
                          f"emit([os.environ['{KEY}'], r.status_code])",
                          env={KEY: VALUE})
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    assert PLACEHOLDER.fullmatch(got[0]) and got[1] == 200
    assert only(world, "api", "policy-file")["headers"]["authorization"] == bearer(VALUE)


# The outside attack on round three: the proxy verified a bound host against OpenSSL's default
# paths, so SSL_CERT_FILE in the kernel's environment (a server's or a spawner's configuration,
# not the kernelspec) decided whom a --secret-file's value was sent to. The host's store is read
# by its built-in path now, a CA of one's own is the flag --upstream-ca, and no OpenSSL
# configuration file is loaded (OPENSSL_CONF below would make every fetch ask for a FIPS provider
# this host does not have, so TLS would fail were it read).


def test_ssl_cert_file_in_the_kernels_environment_decides_nothing(world, tmp_path):
    port = world["ports"]["api"]
    key_file = tmp_path / "key.txt"
    key_file.write_text(VALUE + "\n")
    conf = tmp_path / "openssl.cnf"
    conf.write_text(HOSTILE_OPENSSL_CONF)
    flags = ["--secret-file", f"{KEY}={key_file}@localhost:{port}", "--allow-local-net", f"localhost:{port}"]
    code = (f"r = requests.get('https://localhost:{port}/x?case=CASE',\n"
            f"                 headers={{'Authorization': 'Bearer ' + os.environ['{KEY}']}}, timeout=20)\n"
            "emit([r.status_code, r.headers.get('x-belljar-error', '')])")
    workspace = sandbox_writable_dir("belljar-secrets-run-")
    try:
        env = {"SSL_CERT_FILE": str(world["ca"]), "SSL_CERT_DIR": str(world["ca"].parent),
               "OPENSSL_CONF": str(conf)}
        refused, _ = run_once(world, workspace, flags, code.replace("CASE", "env-ca"), env=env, trust=False)
        control, _ = run_once(world, workspace, flags, code.replace("CASE", "flag-ca"), env=env)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    assert refused[0] == 502 and "upstream-certificate" in refused[1], refused
    assert received(world, "api", "env-ca") == []
    assert control == [200, ""], control
    assert only(world, "api", "flag-ca")["headers"]["authorization"] == bearer(VALUE)


def test_an_upstream_ca_with_a_second_name_is_refused(world, tmp_path):
    """A hard link gives the CA file a second name, which may lie in a workspace the sandbox
    writes through (the outside attack on round three rewrote the file in place that way)."""
    (tmp_path / "ca").mkdir()
    (tmp_path / "ws").mkdir()
    ca = tmp_path / "ca" / "ca.crt"
    ca.write_bytes(world["ca"].read_bytes())
    os.link(ca, tmp_path / "ws" / "second-name.crt")
    port = world["ports"]["api"]
    done = belljar("run", "--python", PYTHON, "--isolation", ISOLATION, "--upstream-ca", str(ca),
                   "--workspace", str(tmp_path / "ws"),
                   "--secret", f"{KEY}@localhost:{port}", "--allow-local-net", f"localhost:{port}",
                   "-c", "print(1)", env=dict(os.environ, **{KEY: VALUE}), cwd=tmp_path, timeout=60)
    assert done.returncode != 0 and "has another name (a hard link)" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
