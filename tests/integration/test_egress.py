"""Egress through the kernel's proxy, from inside the sandbox, as users' code does it: urllib,
requests and httpx reach allowlisted hosts through HTTP_PROXY; everything else gets a 403 that
names the host and why; nothing bypasses the proxy. Local HTTP and HTTPS servers on 127.0.0.1
stand for the outside world (the sandbox's own 127.0.0.1 is its own: the proxy is the only way
to the host's). Names are tested with `localhost` (it resolves to loopback, which only
--allow-local-net may reach) and `*.example.invalid` (allowed by a wildcard, never resolvable)."""
import json
import os
import pathlib
import select
import shutil
import socket
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

import pytest

from belljar_testing import (
    ISOLATION,
    execute,
    loopback_certificate,
    printed_json,
    running_kernel,
    sandbox_writable_dir,
    serve_on_loopback,
)

pytestmark = pytest.mark.skipif(ISOLATION != "strict",
                                reason="the egress proxy needs the full jail's network namespace")

PROXY_PORT = 3128
BODY = b"hello from the host\n"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    stalls = threading.Condition()  # guards held and let_go; notified when either changes
    held = set()    # tags of the /stall requests the server got (and holds, or held)
    let_go = set()  # tags of those whose connection the proxy closed

    def do_GET(self):
        path, _, query = self.path.partition("?")
        tag = urllib.parse.parse_qs(query).get("tag", [""])[0]
        if path == "/hello":
            return self.reply(BODY)
        if path.startswith("/bytes/"):
            return self.reply(b"x" * int(path.split("/")[2]))
        if path == "/stall":
            # Answers nothing; notes when the proxy lets go of the connection.
            with Handler.stalls:
                Handler.held.add(tag)
                Handler.stalls.notify_all()
            self.connection.settimeout(None)
            while True:
                readable, _, _ = select.select([self.connection], [], [], 30)
                if not readable or not self.connection.recv(1024):
                    break
            with Handler.stalls:
                Handler.let_go.add(tag)
                Handler.stalls.notify_all()
            self.close_connection = True
            return
        if path == "/held":
            # Answers once the server holds the /stall request of this tag: a cell waits for it.
            with Handler.stalls:
                held = Handler.stalls.wait_for(lambda: tag in Handler.held, timeout=30)
            return self.reply(b"held\n" if held else b"not held\n", 200 if held else 504)
        self.reply(b"no such page\n", 404)

    def reply(self, body, status=200):
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def serve(context=None):
    return serve_on_loopback(Handler, context)


@pytest.fixture(scope="module")
def world():
    """The outside world: HTTP and HTTPS servers, a port nobody allowlists, a certificate."""
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="belljar-egress-"))
    os.chmod(tmp, 0o755)
    context, cert = loopback_certificate(tmp)
    http, https, other = serve(), serve(context), serve()
    yield {"http": http.server_port, "https": https.server_port, "other": other.server_port,
           "cert": cert, "tmp": tmp}
    for server in (http, https, other):
        server.shutdown()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def kernel(world):
    workspace = sandbox_writable_dir("belljar-egress-ws-")
    shutil.copy(world["cert"], workspace / "server.crt")  # *.pem would be masked as a secret
    os.chmod(workspace / "server.crt", 0o644)
    audit = world["tmp"] / "audit.jsonl"
    metrics = world["tmp"] / "metrics.prom"
    # --pids: unprivileged, RLIMIT_NPROC stands in for the pids cgroup and counts every thread of
    # the host uid, this test's hundred server threads included.
    flags = ["--timeout", "120", "--pids", "1024", "--audit-log", str(audit), "--metrics", str(metrics),
             "--allow-net", f"127.0.0.1:{world['http']}",
             "--allow-net", f"127.0.0.1:{world['https']}",
             "--allow-net", f"localhost:{world['http']}",         # resolves to loopback: refused
             "--allow-local-net", f"localhost:{world['https']}",  # the same, marked local: allowed
             "--allow-net", "*.example.invalid"]
    with running_kernel(flags=flags, workspace=str(workspace), name="belljar-egress") as (km, kc):
        km.world = world
        km.audit, km.metrics = audit, metrics
        yield km, kc
    shutil.rmtree(workspace, ignore_errors=True)


def run(kc, code, timeout=120):
    """Runs code in the sandbox; returns (the JSON its last printed line holds, the reply)."""
    return printed_json(kc, code, timeout)


def kernel_fds(kc):
    """The supervisor's open descriptors, from its usage_reply (it is not dumpable: an
    unprivileged test can't list /proc/PID/fd itself)."""
    msg = kc.session.msg("usage_request", {})
    kc.control_channel.send(msg)
    reply = kc.get_control_msg(timeout=10)
    while reply["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
        reply = kc.get_control_msg(timeout=10)
    return reply["content"]["kernel_open_fds"]


def audit_records(km, event="egress"):
    records = []
    for line in km.audit.read_text().splitlines():
        record = json.loads(line)
        if record.get("event") == event:
            records.append(record)
    return records


def test_the_environment_points_every_client_at_the_proxy(kernel):
    km, kc = kernel
    got, _ = run(kc, "import os, json, urllib.request\n"
                     "names = ['HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'http_proxy', 'https_proxy', 'all_proxy']\n"
                     "print(json.dumps({'env': {n: os.environ.get(n) for n in names},\n"
                     "                  'no_proxy': [n for n in os.environ if n.lower() == 'no_proxy'],\n"
                     "                  'urllib': urllib.request.getproxies()}))")
    proxy = f"http://127.0.0.1:{PROXY_PORT}"
    assert set(got["env"].values()) == {proxy}
    assert got["no_proxy"] == []
    assert got["urllib"]["http"] == proxy and got["urllib"]["https"] == proxy


def test_an_allowlisted_host_works_from_urllib_requests_and_httpx(kernel):
    km, kc = kernel
    url = f"http://127.0.0.1:{km.world['http']}/hello"
    got, _ = run(kc, "import json, urllib.request, requests, httpx\n"
                     f"url = {url!r}\n"
                     "print(json.dumps([urllib.request.urlopen(url, timeout=10).read().decode(),\n"
                     "                  requests.get(url, timeout=10).text,\n"
                     "                  httpx.get(url, timeout=10).text]))")
    assert got == [BODY.decode()] * 3


def test_https_goes_through_connect_with_the_servers_own_certificate(kernel):
    km, kc = kernel
    port = km.world["https"]
    got, _ = run(kc, "import json, ssl, urllib.request, requests, httpx\n"
                     "ctx = ssl.create_default_context(cafile='server.crt')\n"
                     f"by_ip = 'https://127.0.0.1:{port}/hello'\n"
                     f"by_name = 'https://localhost:{port}/hello'\n"
                     "print(json.dumps([urllib.request.urlopen(by_ip, context=ctx, timeout=10).read().decode(),\n"
                     "                  requests.get(by_ip, verify='server.crt', timeout=10).text,\n"
                     "                  httpx.get(by_ip, verify='server.crt', timeout=10).text,\n"
                     "                  requests.get(by_name, verify='server.crt', timeout=10).text]))")
    assert got == [BODY.decode()] * 4


def test_a_host_not_on_the_allowlist_gets_403_naming_it(kernel):
    km, kc = kernel
    got, reply = run(kc, "import json, requests\n"
                         "r = requests.get('http://example.com/', timeout=10)\n"
                         "try:\n"
                         "    requests.get('https://example.com/', timeout=10)\n"
                         "    tls = 'reached'\n"
                         "except requests.exceptions.ProxyError as e:\n"
                         "    tls = str(e)\n"
                         "print(json.dumps([r.status_code, r.headers.get('X-Belljar-Denied'), r.text, tls]))")
    status, header, body, tls = got
    assert status == 403
    assert header == "not-allowlisted"
    assert "example.com:80" in body and "not on this kernel's allowlist" in body
    assert "403" in tls
    denied = reply["metadata"]["belljar"]["egress_denied"]
    assert "example.com:80" in denied and "example.com:443" in denied


def test_a_port_the_rule_does_not_give_is_refused(kernel):
    km, kc = kernel
    got, _ = run(kc, "import json, requests\n"
                     f"r = requests.get('http://127.0.0.1:{km.world['other']}/hello', timeout=10)\n"
                     "print(json.dumps([r.status_code, r.headers.get('X-Belljar-Denied'), r.text]))")
    assert got[0] == 403 and got[1] == "port-not-allowed"
    assert f"port {km.world['other']} is not allowed for 127.0.0.1" in got[2]


def test_a_wildcard_allows_subdomains_only(kernel):
    km, kc = kernel
    got, _ = run(kc, "import json, requests\n"
                     "out = {}\n"
                     "for host in ['api.example.invalid', 'a.b.example.invalid', 'example.invalid']:\n"
                     "    r = requests.get(f'http://{host}/', timeout=30)\n"
                     "    out[host] = [r.status_code, r.headers.get('X-Belljar-Denied'), r.headers.get('X-Belljar-Error')]\n"
                     "print(json.dumps(out))", timeout=90)
    # Allowed by the rule, then unresolvable (.invalid never resolves): 502 (or 504), not 403.
    for host in ("api.example.invalid", "a.b.example.invalid"):
        status, denied, error = got[host]
        assert status in (502, 504) and denied is None and error in ("resolve-failed", "timeout"), (host, got[host])
    assert got["example.invalid"][:2] == [403, "not-allowlisted"]


def test_a_name_that_resolves_to_loopback_is_refused_unless_local(kernel):
    km, kc = kernel
    got, _ = run(kc, "import json, requests\n"
                     f"r = requests.get('http://localhost:{km.world['http']}/hello', timeout=10)\n"
                     f"local = requests.get('https://localhost:{km.world['https']}/hello', verify='server.crt', timeout=10)\n"
                     "print(json.dumps([r.status_code, r.headers.get('X-Belljar-Denied'), r.text, local.text]))")
    status, header, body, local = got
    assert status == 403 and header == "private-address"
    assert "resolves to 127.0.0.1, a loopback address" in body and "--allow-local-net" in body
    assert local == BODY.decode()


def test_nothing_bypasses_the_proxy(kernel):
    km, kc = kernel
    # The host's own address on a real interface, if it has one (the sandbox must not reach it).
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))
        host_ip = probe.getsockname()[0]
    except OSError:
        host_ip = "192.0.2.1"
    finally:
        probe.close()
    got, _ = run(kc, "import json, socket, errno\n"
                     "def tcp(host, port, family=socket.AF_INET):\n"
                     "    s = socket.socket(family); s.settimeout(3)\n"
                     "    try:\n"
                     "        s.connect((host, port)); return 'connected'\n"
                     "    except OSError as e:\n"
                     "        return errno.errorcode.get(e.errno, str(e))\n"
                     "    finally:\n"
                     "        s.close()\n"
                     "def udp(host, port):\n"
                     "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                     "    try:\n"
                     "        s.sendto(b'x', (host, port)); return 'sent'\n"
                     "    except OSError as e:\n"
                     "        return errno.errorcode.get(e.errno, str(e))\n"
                     "listening = set()\n"
                     "for table in ('/proc/net/tcp', '/proc/net/tcp6'):\n"
                     "    for line in open(table).read().splitlines()[1:]:\n"
                     "        fields = line.split()\n"
                     "        if fields[3] == '0A': listening.add(int(fields[1].split(':')[1], 16))\n"
                     "print(json.dumps({\n"
                     f"    'allowed server, directly': tcp('127.0.0.1', {km.world['http']}),\n"
                     f"    'host address': tcp({host_ip!r}, {km.world['http']}),\n"
                     "    'public address': tcp('93.184.216.34', 80),\n"
                     "    'udp dns': udp('8.8.8.8', 53),\n"
                     f"    'proxy': tcp('127.0.0.1', {PROXY_PORT}),\n"
                     f"    'proxy v6': tcp('::1', {PROXY_PORT}, socket.AF_INET6),\n"
                     "    'listening': sorted(listening)}))")
    assert got["allowed server, directly"] == "ECONNREFUSED"  # the sandbox's 127.0.0.1 is its own
    assert got["host address"] == "ENETUNREACH"
    assert got["public address"] == "ENETUNREACH"
    assert got["udp dns"] == "ENETUNREACH"
    assert got["proxy"] == "connected" and got["proxy v6"] == "connected"
    assert got["listening"] == [PROXY_PORT]  # the proxy's port is the only one there is
    got, _ = run(kc, "import json, socket\n"
                     "try:\n"
                     "    socket.getaddrinfo('example.com', 80); print(json.dumps('resolved'))\n"
                     "except socket.gaierror as e:\n"
                     "    print(json.dumps('no resolver'))")
    assert got == "no resolver"


def test_every_decision_is_audited_and_counted(kernel):
    km, kc = kernel
    run(kc, "import requests\n"
            f"requests.get('http://127.0.0.1:{km.world['http']}/hello', timeout=10)\n"
            "requests.get('http://audited.example.com:8080/x', timeout=10)\n"
            "print('null')")
    # The proxy posts a decision before the response it decides, and the supervisor records the
    # cell's decisions before its reply (kernel/session/egress_link.cpp): they are on record.
    records = audit_records(km)
    hosts = {(r["host"], r["port"], r["decision"]) for r in records}
    assert ("audited.example.com", 8080, "denied") in hosts
    assert ("127.0.0.1", km.world["http"], "allowed") in hosts
    denied = [r for r in records if r["host"] == "audited.example.com"][-1]
    assert denied["reason"] == "not-allowlisted" and denied["method"] == "GET"
    assert "rule" in denied and "execution_count" in denied
    allowed = [r for r in records if r["decision"] == "allowed"][-1]
    assert allowed["rule"] == f"--allow-net 127.0.0.1:{km.world['http']}"
    metrics = km.metrics.read_text()
    assert 'belljar_egress_requests_total{decision="denied"} 0' not in metrics
    assert 'belljar_egress_requests_total{decision="allowed"} 0' not in metrics


def test_a_slow_client_or_a_stuck_upstream_does_not_hold_up_other_requests(kernel):
    # A client that sent half a request line, and a request its upstream never answers, both
    # still pending while six more requests go through the proxy and are answered; the slow one
    # is answered too once its line is complete. A proxy that waited on either would leave the
    # others unanswered (and the cell would fail at their timeout).
    km, kc = kernel
    port = km.world["http"]
    got, _ = run(kc, "import json, socket, requests\n"
                     "def pending(s):\n"
                     "    s.setblocking(False)\n"
                     "    try:\n"
                     "        return 'answered' if s.recv(1) else 'closed'\n"
                     "    except BlockingIOError:\n"
                     "        return 'pending'\n"
                     "    finally:\n"
                     "        s.setblocking(True)\n"
                     f"slow = socket.create_connection(('127.0.0.1', {PROXY_PORT}), timeout=30)\n"
                     f"slow.sendall(b'GET http://127.0.0.1:{port}/hel')\n"
                     f"stuck = socket.create_connection(('127.0.0.1', {PROXY_PORT}), timeout=30)\n"
                     f"stuck.sendall(b'GET http://127.0.0.1:{port}/stall?tag=stuck HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
                     f"held = requests.get('http://127.0.0.1:{port}/held?tag=stuck', timeout=30).text\n"
                     f"fast = [requests.get('http://127.0.0.1:{port}/hello', timeout=30).text for _ in range(5)]\n"
                     "still = [pending(slow), pending(stuck)]\n"
                     "slow.sendall(b'lo HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n')\n"
                     "answer = b''\n"
                     "while chunk := slow.recv(65536):\n"
                     "    answer += chunk\n"
                     "slow.close()\n"
                     "stuck.close()\n"
                     "print(json.dumps([held, fast, still, answer.decode().split('\\r\\n\\r\\n', 1)[-1]]))")
    held, fast, still, slow_body = got
    assert held == "held\n", "the host never got the stuck request"
    assert fast == [BODY.decode()] * 5
    assert still == ["pending", "pending"], "the slow client and the stuck request were still going"
    assert slow_body == BODY.decode()


def test_a_client_that_disconnects_frees_its_upstream(kernel):
    km, kc = kernel
    port = km.world["http"]
    run(kc, "import socket, requests\n"
            f"s = socket.create_connection(('127.0.0.1', {PROXY_PORT}))\n"
            f"s.sendall(b'GET http://127.0.0.1:{port}/stall?tag=left HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
            f"assert requests.get('http://127.0.0.1:{port}/held?tag=left', timeout=30).ok\n"
            "s.close()\n"
            "print('null')")
    with Handler.stalls:
        assert Handler.stalls.wait_for(lambda: "left" in Handler.let_go, timeout=30), \
            "the proxy kept the upstream of a client that left"


def test_a_thousand_sequential_and_a_hundred_concurrent_requests_leave_no_fd_behind(kernel):
    km, kc = kernel
    url = f"http://127.0.0.1:{km.world['http']}/hello"
    run(kc, f"import urllib.request\nurllib.request.urlopen({url!r}, timeout=10).read()\nprint('null')")
    before = kernel_fds(kc)
    # Small thread stacks: unprivileged, RLIMIT_AS stands in for the memory cgroup, and a
    # hundred default 8 MiB stacks would pass the 1G of address space on their own.
    got, _ = run(kc, "import json, threading, urllib.request, concurrent.futures\n"
                     "threading.stack_size(512 * 1024)\n"
                     f"url = {url!r}\n"
                     "ok = sum(urllib.request.urlopen(url, timeout=30).read() == b'hello from the host\\n' for _ in range(1000))\n"
                     "def fetch(_):\n"
                     "    return urllib.request.urlopen(url, timeout=60).read() == b'hello from the host\\n'\n"
                     "with concurrent.futures.ThreadPoolExecutor(100) as pool:\n"
                     "    concurrent_ok = sum(pool.map(fetch, range(100)))\n"
                     "print(json.dumps([ok, concurrent_ok]))", timeout=300)
    assert got == [1000, 100]
    deadline = time.monotonic() + 10
    while kernel_fds(kc) != before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert kernel_fds(kc) == before


def test_egress_works_again_after_the_worker_dies(kernel):
    km, kc = kernel
    reply, _ = execute(kc, "import os; os._exit(3)")
    assert reply["content"]["status"] == "error"  # WorkerDied; a fresh sandbox follows
    got, _ = run(kc, "import json, urllib.request\n"
                     f"print(json.dumps(urllib.request.urlopen('http://127.0.0.1:{km.world['http']}/hello', timeout=10).read().decode()))")
    assert got == BODY.decode()


def test_a_kernel_without_allow_net_has_no_proxy_at_all():
    with running_kernel(flags=["--timeout", "20"], name="belljar-no-egress") as (km, kc):
        got, _ = run(kc, "import json, os, socket, errno\n"
                         "s = socket.socket(); s.settimeout(3)\n"
                         f"code = s.connect_ex(('127.0.0.1', {PROXY_PORT}))\n"
                         "print(json.dumps([sorted(n for n in os.environ if n.lower().endswith('_proxy')),\n"
                         "                  errno.errorcode.get(code, code)]))")
    assert got == [[], "ECONNREFUSED"]
