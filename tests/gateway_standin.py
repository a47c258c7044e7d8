"""A stand-in for the gateway that launches remote kernels (Jupyter Enterprise Gateway,
gateway_provisioners), written for the tests from the protocol those projects define.

It does what the gateway does around `belljar launch`: makes its own RSA key pair and passes the
public half as the gateways do (base64 DER, PEM armour stripped), listens on a response address,
decodes the "payload version 1" the kernel sends (base64 JSON envelope; the AES key unwrapped
with RSA PKCS#1 v1.5; the connection info AES-128-ECB with PKCS#7 padding), then talks to the
kernel's comm port the way the gateway's process proxies do: one JSON request per connection,
then close. Everything listens on and connects to loopback only.
"""
import base64
import json
import socket
import threading

from cryptography.hazmat.primitives import hashes, padding, serialization  # noqa: F401
from cryptography.hazmat.primitives.asymmetric import padding as asymmetric_padding
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from jupyter_client import BlockingKernelClient


def public_key_text(private_key):
    """The public key as the gateway puts it on the kernel's command line."""
    pem = private_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return pem.replace("-----BEGIN PUBLIC KEY-----", "").replace(
        "-----END PUBLIC KEY-----", "").replace("\n", "")


def decode_payload(data, private_key):
    """The connection info, decoded step by step as the gateway's response manager does."""
    envelope = json.loads(base64.b64decode(data))
    if envelope.get("version") != 1:
        raise ValueError(f"payload version {envelope.get('version')!r}, expected 1")
    wrapped = base64.b64decode(envelope["key"].encode())
    aes_key = private_key.decrypt(wrapped, asymmetric_padding.PKCS1v15())
    decryptor = Cipher(algorithms.AES(aes_key), modes.ECB()).decryptor()
    padded = decryptor.update(base64.b64decode(envelope["conn_info"].encode())) + decryptor.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    return json.loads((unpadder.update(padded) + unpadder.finalize()).decode())


class GatewayStandIn:
    """One launch: `args()` for the kernel's command line, `wait_for_connection_info()` for
    what it sends back, `client()` for a jupyter_client connected to it."""

    def __init__(self, key_bits=1024):
        self.private_key = rsa.generate_private_key(public_exponent=65537, key_size=key_bits)
        self.public_key = public_key_text(self.private_key)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(120)  # wait_for_connection_info waits as long
        self.response_address = "127.0.0.1:%d" % self.listener.getsockname()[1]
        self.raw = None
        self.info = None
        self.error = None
        self._received = threading.Event()
        threading.Thread(target=self._receive, daemon=True).start()

    def _receive(self):
        try:
            conn, _ = self.listener.accept()
            with conn:
                conn.settimeout(30)
                chunks = []
                while True:  # to the end of the stream, as the gateway reads
                    chunk = conn.recv(1024)
                    if not chunk:
                        break
                    chunks.append(chunk)
            self.raw = b"".join(chunks)
            self.info = decode_payload(self.raw, self.private_key)
        except Exception as e:  # noqa: BLE001 - reported by wait_for_connection_info
            self.error = e
        finally:
            self._received.set()

    def args(self, kernel_id, port_range="0..0"):
        return ["--kernel-id", kernel_id, "--port-range", port_range,
                "--response-address", self.response_address, "--public-key", self.public_key]

    def wait_for_connection_info(self, timeout=90):
        assert self._received.wait(timeout), "no connection info reached the gateway"
        if isinstance(self.error, TimeoutError):
            raise AssertionError("no connection info reached the gateway")
        if self.error:
            raise self.error
        return self.info

    def client(self, ip="127.0.0.1"):
        """A client of the launched kernel; the gateway replaces the kernel's `ip` with the
        address it knows the pod by (here loopback)."""
        info = dict(self.info)
        info["ip"] = ip
        kc = BlockingKernelClient()
        kc.load_connection_info({k: info[k] for k in (
            "shell_port", "iopub_port", "stdin_port", "control_port", "hb_port", "ip", "key",
            "transport", "signature_scheme")})
        kc.start_channels()
        return kc

    def send_to_comm_port(self, request, ip="127.0.0.1", shutdown_write=False):
        """One request on the comm port, as the gateway's process proxy sends it."""
        raw = request if isinstance(request, bytes) else json.dumps(request).encode()
        with socket.create_connection((ip, self.info["comm_port"]), timeout=10) as sock:
            sock.sendall(raw)
            if shutdown_write:
                sock.shutdown(socket.SHUT_WR)

    def signal(self, signum):
        self.send_to_comm_port({"signum": signum})

    def shutdown(self):
        self.send_to_comm_port({"shutdown": 1}, shutdown_write=True)

    def close(self):
        self.listener.close()
