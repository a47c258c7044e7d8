"""Shared helpers for belljar's Python test suites: real kernels through real jupyter_client.

Every suite pins /usr/bin/python3 as the sandbox's interpreter and runs the kernel with the
isolation in BELLJAR_TEST_ISOLATION (strict unless told otherwise), so the suites exercise the
sandbox the way users get it.
"""
import contextlib
import json
import os
import pathlib
import queue
import re
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer

from jupyter_client.manager import KernelManager

SOURCE = pathlib.Path(os.environ.get("BELLJAR_SOURCE", pathlib.Path(__file__).resolve().parents[1]))
BELLJAR = os.environ.get("BELLJAR", str(SOURCE / "build" / "belljar"))
PYTHON = "/usr/bin/python3"
ISOLATION = os.environ.get("BELLJAR_TEST_ISOLATION", "strict")
TIMEOUT = 60
# The Jupyter frontends and clients from PyPI (requirements/frontends.txt: nbconvert, papermill,
# jupyter_console, jupyter_kernel_test, ipykernel as the baseline), in a venv scripts/build.sh
# makes; the suites run its programs (and tests/clients under its Python) as subprocesses.
FRONTENDS = pathlib.Path(os.environ.get("BELLJAR_FRONTENDS", SOURCE / "build" / "venvs" / "frontends"))
# A learner's venv of current PyPI releases (requirements/sandbox-python.txt), for --python.
SANDBOX_VENV_PYTHON = os.environ.get("BELLJAR_SANDBOX_VENV_PYTHON",
                                     str(SOURCE / "build" / "venvs" / "sandbox-python" / "bin" / "python"))

# An OpenSSL configuration that asks every fetch for a FIPS provider this host does not have:
# were a process to load it (OPENSSL_CONF), its keys and TLS would fail. The kernel loads none.
HOSTILE_OPENSSL_CONF = """openssl_conf = openssl_init
[openssl_init]
alg_section = evp_properties
[evp_properties]
default_properties = fips=yes
"""

# Code for cells that look for a secret's value without holding it (the secrets tests and the
# containment probes): a needle is the value's first half, its length and its SHA-256, so a
# cell can say where the value is without the value ever being in the cell or its output.
VALUE_SCAN_CELL = r'''
import hashlib, os

def holds(data, needle):
    """Whether data (bytes or str) holds the value `needle` describes (its head, length, hash)."""
    if isinstance(data, str):
        data = data.encode(errors="surrogateescape")
    head = needle["head"].encode()
    at = data.find(head)
    while at != -1:
        if hashlib.sha256(data[at:at + needle["length"]]).hexdigest() == needle["sha256"]:
            return True
        at = data.find(head, at + 1)
    return False

def regular_files(roots, largest=64 << 20):
    """Every regular file under roots, symlinks not followed (iterative: a tree may be deep)."""
    stack = list(roots)
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_size <= largest:
                    yield entry.path
            except OSError:
                pass
'''


def sandbox_writable_dir(prefix):
    """A fresh temporary directory the sandbox may write: its user is `nobody` when the tests run
    as root, so the directory is 0777. The caller removes it."""
    path = pathlib.Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(path, 0o777)
    return path


def user_docs():
    """What a user reads, as one text: README.md and the documents it links in docs/."""
    return "\n".join(path.read_text() for path in
                     [SOURCE / "README.md", *sorted((SOURCE / "docs").glob("*.md"))])


def readme_blocks(language):
    """The bodies of the user documents' fenced blocks in `language` ("" for blocks without
    one): README.md's and docs/'s."""
    return [body for lang, body in re.findall(r"```(\w*)\n(.*?)```", user_docs(), re.S)
            if lang == language]


def mcp_session_lines(*requests):
    """What an MCP client writes on `belljar mcp`'s stdin: the handshake (initialize as id 1,
    protocol 2025-06-18, then notifications/initialized) and `requests`, one JSON line each."""
    handshake = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "pytest", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    return "".join(json.dumps(r) + "\n" for r in [*handshake, *requests])


def belljar(*args, **kwargs):
    """Runs the belljar executable; returns the CompletedProcess."""
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    kwargs.setdefault("timeout", 120)
    return subprocess.run([BELLJAR, *args], **kwargs)


# belljar's own files beside it in the build tree: the jail helper it execs for every sandbox,
# and the modules it loads when a policy needs them (kernel/command_line/resources.cpp).
HELPER_NAME = "belljar-jail"
MODULE_NAMES = ("belljar-egress.so", "belljar-gateway.so")


def copied_build(files=(HELPER_NAME, *MODULE_NAMES)):
    """belljar, its worker package and kernelspec files, and those of `files` asked for, copied
    into a fresh directory readable by all: a build tree's layout somewhere else."""
    build = pathlib.Path(BELLJAR).resolve().parent
    root = pathlib.Path(tempfile.mkdtemp(prefix="belljar-copy-"))
    os.chmod(root, 0o755)
    shutil.copy2(BELLJAR, root / "belljar")
    shutil.copytree(build / "worker", root / "worker")
    shutil.copytree(build / "kernelspec", root / "kernelspec")
    for name in files:
        shutil.copy2(build / name, root / name)
    return root


def installed_prefix():
    """The layout `cmake --install` makes (CMakeLists.txt's install rules; tests/image runs the
    real install) in a fresh prefix readable by all: bin/belljar, libexec/belljar/ (the helper
    and the modules), share/belljar/worker."""
    build = pathlib.Path(BELLJAR).resolve().parent
    prefix = pathlib.Path(tempfile.mkdtemp(prefix="belljar-prefix-"))
    os.chmod(prefix, 0o755)
    for sub in ("bin", "libexec/belljar", "share/belljar"):
        (prefix / sub).mkdir(parents=True)
    shutil.copy2(BELLJAR, prefix / "bin" / "belljar")
    for name in (HELPER_NAME, *MODULE_NAMES):
        shutil.copy2(build / name, prefix / "libexec" / "belljar" / name)
    shutil.copytree(build / "worker", prefix / "share" / "belljar" / "worker")
    return prefix


def run_once(binary, *flags, code="print(6 * 7)"):
    """`belljar run` of one cell with `binary`, in a fresh workspace; the CompletedProcess."""
    workspace = sandbox_writable_dir("belljar-ws-")
    try:
        return subprocess.run([str(binary), "run", "--python", PYTHON, "--workspace", workspace,
                               *flags, "-c", code], capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


# A seccomp filter refusing namespaces and mounts, as a default pod's profile does
# (tests/tools/no_namespaces.cpp): the kernel under it runs degraded mode as a pod gets it.
NO_NAMESPACES = os.environ.get("BELLJAR_NO_NAMESPACES",
                               str(SOURCE / "build" / "tests" / "no_namespaces"))


def install_kernelspec(prefix, name="belljar-test", flags=(), wrapper=()):
    """Installs a kernelspec under prefix/share/jupyter/kernels and returns its directory;
    `wrapper` is a command the kernel's argv runs under (NO_NAMESPACES)."""
    args = ["install", "--prefix", str(prefix), "--name", name, "--python", PYTHON]
    if not any(f == "--isolation" for f in flags):
        args += ["--isolation", ISOLATION]
    done = belljar(*args, *flags)
    assert done.returncode == 0, done.stderr
    spec_dir = pathlib.Path(prefix) / "share" / "jupyter" / "kernels" / name
    if wrapper:
        spec = json.loads((spec_dir / "kernel.json").read_text())
        spec["argv"] = [*wrapper, *spec["argv"]]
        (spec_dir / "kernel.json").write_text(json.dumps(spec))
    return spec_dir


@contextlib.contextmanager
def running_kernel(flags=(), workspace=None, env=None, name="belljar-test", wrapper=(),
                   connection_file=None, manager_args=None, stderr=None):
    """A started belljar kernel and a ready blocking client; shut down afterwards.
    `env` adds to the test's environment (a None value removes the variable); `stderr`, a file,
    takes the kernel's stderr (a restart's too). `manager_args` go to KernelManager
    (transport="ipc", ip=PATH_PREFIX, ...)."""
    with tempfile.TemporaryDirectory(prefix="belljar-spec-") as prefix:
        spec_dir = install_kernelspec(prefix, name, flags, wrapper)
        ws = workspace or sandbox_writable_dir("belljar-ws-")
        launch_env = dict(os.environ)
        launch_env.update(env or {})
        launch_env = {k: v for k, v in launch_env.items() if v is not None}
        km = KernelManager(kernel_name=name, **({"connection_file": str(connection_file)}
                                                  if connection_file else {}),
                           **(manager_args or {}))
        km.kernel_spec_manager.kernel_dirs.insert(0, str(spec_dir.parent))
        km.start_kernel(cwd=ws, env=launch_env, **({"stderr": stderr} if stderr else {}))
        try:
            with ready_client(km) as kc:
                yield km, kc
        finally:
            if workspace is None:
                shutil.rmtree(ws, ignore_errors=True)


@contextlib.contextmanager
def started_from(kernels_dir, name):
    """A kernel of the kernelspec `name` found in kernels_dir (any kernel: ipykernel as a
    control too), in a workspace of its own, and a ready client; shut down afterwards."""
    km = KernelManager(kernel_name=name)
    km.kernel_spec_manager.kernel_dirs.insert(0, str(kernels_dir))
    workspace = sandbox_writable_dir("belljar-started-ws-")
    km.start_kernel(cwd=workspace)
    try:
        with ready_client(km, now=True) as kc:
            yield km, kc
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


@contextlib.contextmanager
def ready_client(km, now=False):
    """A started kernel's blocking client once the kernel answers; the kernel is shut down
    afterwards (`now`: without asking it first)."""
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=TIMEOUT)
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=now)


def execute(kc, code, timeout=TIMEOUT, **options):
    """Runs code; returns (reply, outputs) where outputs are the iopub messages for it."""
    msg_id = kc.execute(code, **options)
    return collect(kc, msg_id, timeout)


def collect(kc, msg_id, timeout=TIMEOUT):
    reply = kc.get_shell_msg(timeout=timeout)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=timeout)
    outputs = []
    deadline = time.monotonic() + timeout
    while True:
        msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
        outputs.append(msg)
    return reply, outputs


def kernel_info(kc):
    """The content of the kernel's kernel_info_reply (the banner, `belljar`)."""
    msg_id = kc.kernel_info()
    reply = kc.get_shell_msg(timeout=30)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=30)
    return reply["content"]


def printed_json(kc, code, timeout=TIMEOUT):
    """Runs code that must succeed; returns (the JSON its last printed line holds, or None when it
    printed nothing, and the reply)."""
    reply, outputs = execute(kc, code, timeout=timeout)
    assert reply["content"]["status"] == "ok", (reply["content"], stderr_of(outputs))
    lines = stdout_of(outputs).strip().splitlines()
    return json.loads(lines[-1]) if lines else None, reply


def still_answers(km, kc, timeout=TIMEOUT):
    """The kernel is alive and runs a cell (after a probe that hit a limit or killed the worker)."""
    assert km.is_alive(), "the kernel died"
    reply, outputs = execute(kc, "print('alive')", timeout=timeout)
    assert reply["content"]["status"] == "ok" and stdout_of(outputs) == "alive\n"


def wait_for_iopub(kc, matches, timeout=TIMEOUT):
    """The first iopub message for which matches(msg) holds, or None after `timeout`. Other
    messages are consumed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            continue
        if matches(msg):
            return msg
    return None


def wait_for_stream(kc, parent_id, needle, timeout=TIMEOUT):
    """The text of the first stream message of request `parent_id` holding `needle` (what a
    cell prints when it has reached a point: a test waits for that, never for time), or None
    after `timeout`. Other messages are consumed. parent_id None: whichever request it is
    parented to (output the worker writes between requests goes to the last one)."""
    msg = wait_for_iopub(kc, lambda m: m["msg_type"] == "stream"
                         and parent_id in (None, m["parent_header"].get("msg_id"))
                         and needle in m["content"]["text"], timeout)
    return msg["content"]["text"] if msg else None


def stdout_of(outputs):
    return "".join(m["content"]["text"] for m in outputs
                   if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")


def stderr_of(outputs):
    return "".join(m["content"]["text"] for m in outputs
                   if m["msg_type"] == "stream" and m["content"]["name"] == "stderr")


def of_type(outputs, msg_type):
    return [m for m in outputs if m["msg_type"] == msg_type]


class LoopbackServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # a hundred concurrent connects must not overflow the backlog


def serve_on_loopback(handler, context=None):
    """An HTTP server (HTTPS with `context`) on 127.0.0.1 in a thread of its own."""
    server = LoopbackServer(("127.0.0.1", 0), handler)
    if context:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def loopback_certificate(directory):
    """A self-signed certificate for localhost and 127.0.0.1, made with openssl in `directory`;
    returns (server context, certificate path)."""
    cert, key = pathlib.Path(directory) / "server.crt", pathlib.Path(directory) / "server-key.txt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context, cert


# -- a frontend's comm messages (widgets) ---------------------------------------------------

def send_comm(kc, msg_type, content, buffers=()):
    """A frontend's comm message on the shell channel; its msg_id."""
    msg = kc.session.msg(msg_type, content)
    kc.session.send(kc.shell_channel.socket, msg, buffers=list(buffers))
    return msg["header"]["msg_id"]


def outputs_of(kc, msg_id, timeout=TIMEOUT):
    """The iopub messages parented to msg_id, up to its idle status (comm messages have no
    shell reply: busy and idle surround them, as with ipykernel)."""
    outputs, deadline = [], time.monotonic() + timeout
    while True:
        msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return outputs
        outputs.append(msg)


def comm_round(kc, msg_type, content, buffers=()):
    return outputs_of(kc, send_comm(kc, msg_type, content, buffers))


def control_round(kc, msg_type, timeout=TIMEOUT):
    """Sends a `msg_type` request with no content on the client's control channel; its reply."""
    msg = kc.session.msg(msg_type, {})
    kc.control_channel.send(msg)
    deadline = time.monotonic() + timeout
    while True:
        reply = kc.get_control_msg(timeout=max(0.1, deadline - time.monotonic()))
        if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
            return reply


def interrupt_and_wait(kc, timeout=TIMEOUT):
    """An interrupt_request on the client's control channel, returned once answered: the kernel
    has acted on it before anything the client sends next. (KernelManager.interrupt_kernel()
    sends it on the manager's own control socket, a connection of its own, so a request the
    client sends after it may reach the kernel first.)"""
    return control_round(kc, "interrupt_request", timeout)


def shell_read_fence(kc, timeout=TIMEOUT):
    """Returns once the kernel has read every shell message this client sent before the call,
    even those queued behind a running cell (shell requests wait for it: no shell reply can say
    so). A kernel_info_request on control is answered at once; each pass of the kernel's reactor
    reads control, then stdin, then shell (jupyter_frontend.cpp), and the client's and the
    kernel's zmq I/O threads carry the messages in the order sent, so the shell messages sent
    before it are read in the pass that answers it, before anything the client sends next."""
    return control_round(kc, "kernel_info_request", timeout)
