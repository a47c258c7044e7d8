"""`belljar launch`: a kernel started by a gateway (Jupyter Enterprise Gateway,
gateway_provisioners), driven by a stand-in for that gateway (tests/gateway_standin.py) that
decodes the sealed connection info as the gateway does and talks to the comm port as it does.

What must hold: the gateway can read the connection info and only it (its own RSA key), the
kernel serves cells through it like `belljar kernel`, the comm port interrupts and shuts down
and nothing else, the HMAC key and the launcher's environment never reach the sandbox, and bad
input is one line, a non-zero exit and nothing left listening.
"""
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import uuid

import pytest
from gateway_standin import GatewayStandIn

from belljar_testing import (
    BELLJAR,
    HOSTILE_OPENSSL_CONF,
    ISOLATION,
    NO_NAMESPACES,
    PYTHON,
    TIMEOUT,
    VALUE_SCAN_CELL,
    collect,
    execute,
    sandbox_writable_dir,
    stdout_of,
    wait_for_stream,
)

LAUNCHER_MARK = "belljar-launcher-only-" + uuid.uuid4().hex


def free_port_window(size=12):
    """A window of `size` loopback ports that were free a moment ago (for --port-range)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            lo = probe.getsockname()[1]
        if lo + size > 65000:
            continue
        try:
            held = []
            for port in range(lo, lo + size):
                s = socket.socket()
                s.bind(("127.0.0.1", port))
                held.append(s)
            return lo, lo + size - 1
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError("no free window of ports")


class Launched:
    """A `belljar launch` process and the gateway stand-in it reported to."""

    def __init__(self, tmp_path, port_range="0..0", through_env=False, extra=(), wrapper=(),
                 isolation=ISOLATION, env=None):
        self.gateway = GatewayStandIn()
        self.kernel_id = str(uuid.uuid4())
        self.workspace = sandbox_writable_dir("belljar-launch-ws-")
        args = [*wrapper, BELLJAR, "launch", "--python", PYTHON, "--isolation", isolation,
                "--workspace", str(self.workspace), "--ip", "127.0.0.1", *extra]
        env = dict(os.environ, BELLJAR_LAUNCHER_MARK=LAUNCHER_MARK, HOME=str(tmp_path), **(env or {}))
        if through_env:  # as the gateways' bootstrap-kernel.sh hands them over
            env.update(KERNEL_ID=self.kernel_id, EG_PORT_RANGE=port_range,
                       RESPONSE_ADDRESS=self.gateway.response_address,
                       EG_PUBLIC_KEY=self.gateway.public_key)
        else:
            args += self.gateway.args(self.kernel_id, port_range)
        self.env = env
        self.stderr = open(tmp_path / "launch.stderr", "w+")
        self.process = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL,
                                        stderr=self.stderr)
        self.info = self.gateway.wait_for_connection_info()
        self.kc = self.gateway.client()
        self.kc.wait_for_ready(timeout=TIMEOUT)

    def log(self):
        self.stderr.flush()
        self.stderr.seek(0)
        return self.stderr.read()

    def close(self):
        self.kc.stop_channels()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.gateway.close()
        self.stderr.close()
        shutil.rmtree(self.workspace, ignore_errors=True)


# As a pod with the runtime's defaults would run it too: namespaces refused, --isolation degraded.
POD_DEFAULTS = {"wrapper": [NO_NAMESPACES], "isolation": "degraded"}


@pytest.fixture(params=["jail", "namespaces refused"])
def launched(tmp_path, request):
    kernel = Launched(tmp_path, **(POD_DEFAULTS if request.param == "namespaces refused" else {}))
    yield kernel
    kernel.close()


def ports_of(info):
    return [info[k] for k in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port",
                              "comm_port")]


def refuses_connections(port):
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_the_gateway_decodes_the_connection_info_and_runs_cells(launched):
    info = launched.info
    assert info["kernel_id"] == launched.kernel_id
    assert info["transport"] == "tcp" and info["signature_scheme"] == "hmac-sha256"
    assert info["pid"] == launched.process.pid and info["pgid"] == os.getpgid(launched.process.pid)
    assert len(set(ports_of(info))) == 6
    assert len(info["key"]) >= 32
    reply, outputs = execute(launched.kc, "x = 6 * 7\nprint(x)")
    assert reply["content"]["status"] == "ok" and stdout_of(outputs) == "42\n"
    assert "connection info sent to the gateway" in launched.log()
    # A pod's stderr is its log: the audit records stay there, not in a file inside the pod.
    records = [json.loads(line) for line in launched.log().splitlines() if line.startswith("{")]
    assert [r["event"] for r in records].count("kernel_start") == 1, launched.log()
    assert any(r["event"] == "cell" for r in records), launched.log()
    belljar_info = launched.kc.kernel_info(reply=True)["content"]["belljar"]
    assert belljar_info["audit_log"] == {"destination": "stderr", "failures": 0}
    isolation = belljar_info["isolation"]
    assert isolation == ("degraded" if NO_NAMESPACES in launched.process.args else ISOLATION)


def test_only_the_gateways_key_opens_the_payload(launched):
    from gateway_standin import decode_payload
    other = GatewayStandIn()
    try:
        with pytest.raises(ValueError):  # PKCS#1 v1.5 under another key: no AES key comes out
            decode_payload(launched.gateway.raw, other.private_key)
    finally:
        other.close()
    assert launched.info["key"].encode() not in launched.gateway.raw
    assert launched.info["key"] not in launched.log()


def test_the_comm_port_interrupts_the_running_cell_and_the_session_lives_on(launched):
    kc = launched.kc
    execute(kc, "kept = 'still here'")
    msg_id = kc.execute("import time\nprint('busy', flush=True)\ntime.sleep(30)")
    assert wait_for_stream(kc, msg_id, "busy"), "the cell never started"
    launched.gateway.signal(signal.SIGINT)
    reply, _ = collect(kc, msg_id, timeout=15)
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    reply, outputs = execute(kc, "print(kept)")
    assert stdout_of(outputs) == "still here\n"


def test_a_liveness_poll_and_malformed_requests_change_nothing(launched):
    gateway, kc = launched.gateway, launched.kc
    execute(kc, "counter = 1")
    gateway.signal(0)
    for junk in (b"", b"not json", b"[1, 2]", b'{"signum": "nine"}', b'{"signum": -3}',
                 b'{"signum": 99999}', b'{"shutdown": "yes"}', b'{"other": 1}', b"{" * 5000,
                 b'{"signum": 2}' + b" " * 8192, json.dumps({"signum": 28}).encode()):
        gateway.send_to_comm_port(junk)
    # A connection that sends half a request and stalls is dropped; sixteen more are refused.
    stalled = [socket.create_connection(("127.0.0.1", launched.info["comm_port"])) for _ in range(20)]
    for s in stalled:
        s.sendall(b'{"shutdown": ')
    reply, outputs = execute(kc, "counter += 1\nprint(counter)")
    assert stdout_of(outputs) == "2\n"
    for s in stalled:
        s.close()
    assert launched.process.poll() is None
    assert "comm port" in launched.log()  # the malformed ones were logged


def needle(value):
    return {"head": value[: len(value) // 2], "length": len(value),
            "sha256": hashlib.sha256(value.encode()).hexdigest()}


def test_neither_the_key_nor_the_launchers_environment_reaches_the_sandbox(launched):
    # Never anywhere: the HMAC key and the launcher's environment. Its command line (the public
    # key, the response address: nothing secret) is visible where there is no pid namespace.
    secret = [needle(v) for v in (launched.info["key"], LAUNCHER_MARK)]
    argv = [needle(v) for v in (launched.gateway.public_key, launched.gateway.response_address)]
    (launched.workspace / "notes.txt").write_text("a file of the workspace\n")
    reply, outputs = execute(launched.kc, VALUE_SCAN_CELL + f'''
import json, os
secret, argv = {json.dumps(secret)}, {json.dumps(argv)}
def found(data, needles):
    return any(holds(data, n) for n in needles)
hits = [k for k, v in os.environ.items() if found(k + "=" + v, secret + argv)]
hits += [k for k in os.environ if k in ("KERNEL_ID", "PUBLIC_KEY", "EG_PUBLIC_KEY", "RESPONSE_ADDRESS",
                                        "PORT_RANGE", "EG_PORT_RANGE", "BELLJAR_LAUNCHER_MARK")]
argv_seen, processes = [], 0
for pid in filter(str.isdigit, os.listdir("/proc")):
    for leaf in ("environ", "cmdline"):
        try:
            data = open(f"/proc/{{pid}}/{{leaf}}", "rb").read()
        except OSError:
            continue
        processes += leaf == "cmdline"
        if found(data, secret):
            hits.append(f"/proc/{{pid}}/{{leaf}}")
        elif found(data, argv):
            argv_seen.append(f"/proc/{{pid}}/{{leaf}}")
files = 0
for path in regular_files(["/tmp", "/dev/shm", "/etc", os.path.expanduser("~"), os.getcwd(), "/run", "/var"]):
    files += 1
    try:
        if found(open(path, "rb").read(), secret + argv):
            hits.append(path)
    except OSError:
        pass
print(json.dumps({{"hits": hits, "argv_seen": argv_seen, "processes": processes, "files": files}}))
''', timeout=120)
    assert reply["content"]["status"] == "ok", reply["content"]
    got = json.loads(stdout_of(outputs).strip().splitlines()[-1])
    assert got["hits"] == [], got
    assert got["processes"] >= 1 and got["files"] >= 1, got
    if NO_NAMESPACES not in launched.process.args:
        assert got["argv_seen"] == [], got  # the jail's pid namespace hides the launcher


def test_the_comm_port_shuts_the_kernel_down_and_nothing_is_left_listening(launched):
    launched.gateway.shutdown()
    assert launched.process.wait(timeout=30) == 0
    assert all(refuses_connections(port) for port in ports_of(launched.info))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_terminating_signal_through_the_comm_port_ends_the_kernel(tmp_path, signum):
    kernel = Launched(tmp_path)
    try:
        kernel.gateway.signal(signum)
        assert kernel.process.wait(timeout=30) == 0
    finally:
        kernel.close()


def test_arguments_from_the_bootstrap_environment_and_a_port_range(tmp_path):
    lo, hi = free_port_window()
    kernel = Launched(tmp_path, port_range=f"{lo}..{hi}", through_env=True)
    try:
        assert kernel.info["kernel_id"] == kernel.kernel_id
        assert all(lo <= port <= hi for port in ports_of(kernel.info)), kernel.info
        reply, outputs = execute(kernel.kc, "print('through the environment')")
        assert stdout_of(outputs) == "through the environment\n"
        # The launcher's variables are its own: the sandbox's environment comes from the allowlist.
        reply, outputs = execute(kernel.kc, "import os; print(sorted(k for k in os.environ if 'KEY' in k or 'KERNEL' in k or 'RANGE' in k or 'RESPONSE' in k))")
        assert stdout_of(outputs) == "[]\n"
    finally:
        kernel.close()


# OpenSSL would load a configuration file named by OPENSSL_CONF (providers, protocols, what a
# fetch asks for). This one asks every fetch for a FIPS provider the host does not have: loaded,
# it fails the gateway's RSA sealing and the egress proxy's keys (the outside attack on round
# three found `belljar launch` loading it through the gateway module, before the proxy's own
# refusal could apply).


def test_an_openssl_configuration_in_the_environment_is_not_loaded(tmp_path):
    conf = tmp_path / "openssl.cnf"
    conf.write_text(HOSTILE_OPENSSL_CONF)
    kernel = Launched(tmp_path, env={"OPENSSL_CONF": str(conf)}, extra=["--allow-net", "127.0.0.1"])
    try:
        reply, outputs = execute(kernel.kc, "print('sealed and served')")
        assert stdout_of(outputs) == "sealed and served\n"
    finally:
        kernel.close()


def ec_public_key():
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    der = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    import base64
    return base64.b64encode(der).decode()


def closed_loopback_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


BAD_INPUT = [
    ("not RSA", {"--public-key": ec_public_key()}, "--public-key: not an RSA key"),
    ("not base64", {"--public-key": "@@not-a-key@@"}, "--public-key: not base64"),
    ("not a key", {"--public-key": "aGVsbG8gd29ybGQ="}, "--public-key: not a public key"),
    ("no kernel id", {"--kernel-id": None}, "needs --kernel-id"),
    ("bad kernel id", {"--kernel-id": "../../etc"}, "--kernel-id ../../etc"),
    ("malformed range", {"--port-range": "40000-x"}, "--port-range 40000-x"),
    ("backwards range", {"--port-range": "41000..40000"}, "lower port is above"),
    ("range too small", {"--port-range": "40000..40003"}, "needs 6 ports"),
    ("privileged range", {"--port-range": "80..2000"}, "below 1024"),
    ("bad address", {"--response-address": "nowhere"}, "--response-address nowhere"),
    ("no address", {"--response-address": None}, "needs --response-address"),
]


@pytest.mark.parametrize("case,change,message", BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_bad_input_is_one_line_and_a_non_zero_exit(tmp_path, case, change, message):
    gateway = GatewayStandIn()
    try:
        given = gateway.args("k-" + uuid.uuid4().hex)
        args = dict(zip(given[::2], given[1::2]))
        args.update(change)
        argv = [BELLJAR, "launch", "--python", PYTHON, "--isolation", ISOLATION, "--ip", "127.0.0.1"]
        for flag, value in args.items():
            if value is not None:
                argv += [flag, value]
        env = {k: v for k, v in os.environ.items()
               if k not in ("KERNEL_ID", "RESPONSE_ADDRESS", "EG_RESPONSE_ADDRESS", "PUBLIC_KEY",
                            "EG_PUBLIC_KEY", "PORT_RANGE", "EG_PORT_RANGE")}
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env,
                              cwd=tmp_path)
        assert done.returncode == 2, (done.returncode, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], done.stderr
        assert gateway.raw is None  # nothing was sent
    finally:
        gateway.close()


def test_a_gateway_that_never_answers_is_tried_a_bounded_number_of_times(tmp_path):
    lo, hi = free_port_window()
    gateway = GatewayStandIn()
    gateway.close()  # its key is all this test needs
    port = closed_loopback_port()
    done = subprocess.run(
        [BELLJAR, "launch", "--python", PYTHON, "--isolation", ISOLATION, "--ip", "127.0.0.1",
         "--workspace", str(tmp_path), "--kernel-id", "k-unanswered", "--port-range", f"{lo}..{hi}",
         "--response-address", f"127.0.0.1:{port}", "--public-key", gateway.public_key],
        capture_output=True, text=True, timeout=120)  # its exit, or the test fails
    assert done.returncode == 1, done.stderr
    assert f"--response-address 127.0.0.1:{port}: connect: Connection refused (6 attempts)" in done.stderr
    # Nothing stays bound: every port of the range can be bound again.
    for p in range(lo, hi + 1):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", p))


@pytest.mark.parametrize("gateway", ["enterprise-gateway", "gateway-provisioners"])
def test_kubernetes_kernelspecs_in_each_gateways_format(tmp_path, gateway):
    scripts = tmp_path / "gateway-scripts"
    scripts.mkdir()
    (scripts / "launch_kubernetes.py").write_text("# the gateway's own pod launcher\n")
    (scripts / "kernel-pod.yaml.j2").write_text("kind: Pod\n")
    done = subprocess.run([BELLJAR, "install", "--prefix", str(tmp_path), "--name", "bj-k8s",
                           "--kubernetes", "registry.example/belljar-kernel:1", "--gateway", gateway,
                           "--launcher-scripts", str(scripts), "--timeout", "30", "--allow-net",
                           "pypi.org"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    spec_dir = tmp_path / "share" / "jupyter" / "kernels" / "bj-k8s"
    spec = json.loads((spec_dir / "kernel.json").read_text())
    assert (spec_dir / "scripts" / "kernel-pod.yaml.j2").exists()
    assert spec["argv"][:2] == ["python", str(spec_dir / "scripts" / "launch_kubernetes.py")]
    prefix = "--RemoteProcessProxy." if gateway == "enterprise-gateway" else "--"
    assert spec["argv"][2:] == [prefix + "kernel-id", "{kernel_id}", prefix + "port-range", "{port_range}",
                                prefix + "response-address", "{response_address}",
                                prefix + "public-key", "{public_key}"]
    metadata = spec["metadata"]
    if gateway == "enterprise-gateway":
        assert metadata["process_proxy"] == {
            "class_name": "enterprise_gateway.services.processproxies.k8s.KubernetesProcessProxy",
            "config": {"image_name": "registry.example/belljar-kernel:1"}}
        assert "kernel_provisioner" not in metadata
    else:
        assert metadata["kernel_provisioner"] == {
            "provisioner_name": "kubernetes-provisioner",
            "config": {"image_name": "registry.example/belljar-kernel:1", "launch_timeout": 30}}
        assert "process_proxy" not in metadata
    assert spec["interrupt_mode"] == "signal" and spec["language"] == "python"
    # The policy reaches the pod through the launcher's environment, under a name clients can't set.
    flags = json.loads(spec["env"]["BELLJAR_POLICY_FLAGS"])
    assert flags == ["--timeout", "30", "--allow-net", "pypi.org"]
    assert not any(name.startswith("KERNEL_") for name in spec["env"])


def test_the_pods_policy_flags_apply_and_the_command_line_wins(tmp_path):
    kernel_env = {"BELLJAR_POLICY_FLAGS": json.dumps(["--timeout", "7", "--set-env", "FROM_SPEC=yes"])}
    gateway = GatewayStandIn()
    workspace = sandbox_writable_dir("belljar-launch-flags-")
    process = subprocess.Popen(
        [BELLJAR, "launch", "--python", PYTHON, "--isolation", ISOLATION, "--workspace", str(workspace),
         "--ip", "127.0.0.1", "--timeout", "9", *gateway.args("k-flags")],
        env=dict(os.environ, **kernel_env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        gateway.wait_for_connection_info()
        kc = gateway.client()
        kc.wait_for_ready(timeout=TIMEOUT)
        reply, outputs = execute(kc, "import os; print(os.environ.get('FROM_SPEC'))")
        assert stdout_of(outputs) == "yes\n"
        assert reply["metadata"]["belljar"]["limits"]["timeout_seconds"] == 9
        kc.stop_channels()
    finally:
        gateway.shutdown()
        process.wait(timeout=30)
        gateway.close()
        shutil.rmtree(workspace, ignore_errors=True)
    bad = subprocess.run([BELLJAR, "launch", *gateway.args("k")], capture_output=True, text=True,
                         env=dict(os.environ, BELLJAR_POLICY_FLAGS='["--kernel-id", "x"]'), timeout=60)
    assert bad.returncode == 2
    assert bad.stderr.strip() == "belljar: BELLJAR_POLICY_FLAGS: --kernel-id is not a policy flag"
