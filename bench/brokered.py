"""Figure 11: what a bound secret (--secret) costs a request. The same HTTPS stand-in on
127.0.0.1 is reached two ways from one belljar kernel, side by side: by the name a secret is
bound to (`localhost`: the egress proxy terminates TLS, puts the value in, scrubs the response)
and by its address (`127.0.0.1`: allowlisted, the plain end-to-end tunnel). Each request opens
a fresh connection (CONNECT, TLS handshake, GET, response), as most API clients do per call,
and a keep-alive series shows the per-request cost once the tunnel stands.
"""
import datetime
import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

SECRET_NAME = "BENCH_API_KEY"
SECRET_VALUE = "sk-bench-0123456789abcdefghijklmnop"


def make_ca_and_leaf(directory):
    """A CA (its PEM written to ca.crt) and a leaf for localhost and 127.0.0.1 signed by it."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "belljar bench CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    import ipaddress
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .sign(ca_key, hashes.SHA256()))
    ca_path = directory / "ca.crt"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    leaf_path = directory / "leaf.crt"
    leaf_path.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_path = directory / "leaf.key"
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return ca_path, leaf_path, key_path


class ApiHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed ACK

    def do_GET(self):
        body = json.dumps({"ok": True, "usage": {"prompt_tokens": 3, "completion_tokens": 5}})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


def start_https_server(leaf, key):
    server = ThreadingHTTPServer(("127.0.0.1", 0), ApiHandler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(leaf), str(key))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def kernel_flags(port):
    return ["--secret", "%s@localhost:%d" % (SECRET_NAME, port),
            "--allow-local-net", "localhost:%d" % port, "--allow-net", "127.0.0.1:%d" % port]


# Defined once in the kernel. The proxy is HTTPS_PROXY's; the bound path trusts the sandbox's
# bundle (SSL_CERT_FILE: the system's CAs and the session's), the plain tunnel the bench's CA.
BROKERED_CELL = """
import http.client as _http, os as _os, ssl as _ssl, time as _time, urllib.parse as _parse
def _bench_https(host, port, cafile, n, keep_alive):
    proxy = _parse.urlsplit(_os.environ["HTTPS_PROXY"])
    ctx = _ssl.create_default_context(cafile=cafile)
    headers = {"Authorization": "Bearer " + _os.environ["%s"]}
    def connect():
        c = _http.HTTPSConnection(proxy.hostname, proxy.port, context=ctx, timeout=30)
        c.set_tunnel(host, port)
        return c
    times, c = [], connect() if keep_alive else None
    for _ in range(n):
        t0 = _time.perf_counter()
        conn = c or connect()
        conn.request("GET", "/v1/models", headers=headers)
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            raise RuntimeError("status %%d" %% r.status)
        if not keep_alive:
            conn.close()
        times.append(_time.perf_counter() - t0)
    if c:
        c.close()
    return times
""" % SECRET_NAME
