"""The containment table: every probe in probes.py run from inside a belljar kernel through
jupyter_client, as a user would, with its exact expected outcome; and a control run of the
non-destructive probes with --isolation none proving each would have worked without the sandbox.
The rows for secrets bound to a host run in a kernel with --secret, their control in one given
the same value with --pass-env (how users had to pass a key before).
A kernel that dies mid-suite fails the suite (the fixtures check it is alive after each probe)."""
import hashlib
import json
import os
import pathlib
import pwd
import secrets
import shutil
import socket
import tempfile

import pytest
from standins import StandIn, make_ca, server_context

from belljar_testing import ISOLATION, execute, running_kernel
from probes import PRELUDE, PROBES, SECRET_PRELUDE, SECRET_PROBES

SECRET = "sk-probe-0123456789abcdef"


class HostBait:
    """Things on the host the sandbox must not reach: servers, files, a secret."""

    def __init__(self, secrets_in_workspace=True):
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="belljar-bait-"))
        os.chmod(self.root, 0o755)
        self.workspace = self.root / "workspace"
        self.workspace.mkdir()
        os.chmod(self.workspace, 0o777)
        if secrets_in_workspace:  # (degraded mode refuses such a workspace: test_degraded.py)
            (self.workspace / ".env").write_text("OPENAI_API_KEY=sk-probe-dotenv-secret\n")
            (self.workspace / ".ssh").mkdir()
            (self.workspace / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
        home = pathlib.Path(os.environ.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir)
        home.mkdir(parents=True, exist_ok=True)
        self.home_file = home / f"belljar-probe-{self.root.name}.txt"
        self.home_file.write_text("host home secret\n")
        os.symlink(self.home_file, self.workspace / "escape-link")
        self.outside = self.root / "outside"
        self.outside.mkdir()
        os.chmod(self.outside, 0o777)
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.tcp6 = socket.create_server(("::1", 0), family=socket.AF_INET6)
        self.abstract_name = f"belljar-probe-{os.getpid()}-{self.root.name}"
        self.abstract = socket.socket(socket.AF_UNIX)
        self.abstract.bind("\0" + self.abstract_name)
        self.abstract.listen()
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.settimeout(1.0)

    def constants(self, km):
        info = km.get_connection_info()
        key = info["key"].decode() if isinstance(info["key"], bytes) else info["key"]
        return (f"CONNECTION_FILE = {km.connection_file!r}\nKERNEL_KEY = {key!r}\n"
                f"HOST_HOME_FILE = {str(self.home_file)!r}\nOUTSIDE_DIR = {str(self.outside)!r}\n"
                f"HOST_PID = {os.getpid()}\nHOST_TCP_PORT = {self.tcp.getsockname()[1]}\n"
                f"HOST_TCP6_PORT = {self.tcp6.getsockname()[1]}\n"
                f"HOST_ABSTRACT = {self.abstract_name!r}\nHOST_UDP_PORT = {self.udp.getsockname()[1]}\n")

    def udp_received(self):
        try:
            return self.udp.recv(64) == b"probe"
        except socket.timeout:
            return False

    def close(self):
        for s in (self.tcp, self.tcp6, self.abstract, self.udp):
            s.close()
        self.home_file.unlink(missing_ok=True)
        shutil.rmtree(self.root, ignore_errors=True)


def _kernel_with_bait(isolation, wrapper=(), secrets_in_workspace=True):
    bait = HostBait(secrets_in_workspace)
    flags = ["--isolation", isolation, "--timeout", "20"]
    env = {"BELLJAR_PROBE_SECRET": SECRET}
    ctx = running_kernel(flags=flags, workspace=str(bait.workspace), env=env,
                         name=f"belljar-probe-{isolation}", wrapper=wrapper)
    km, kc = ctx.__enter__()
    reply, _ = execute(kc, PRELUDE + bait.constants(km))
    assert reply["content"]["status"] == "ok", reply["content"]
    return ctx, km, kc, bait


@pytest.fixture(scope="module")
def sandboxed():
    ctx, km, kc, bait = _kernel_with_bait(ISOLATION)
    yield km, kc, bait
    ctx.__exit__(None, None, None)
    bait.close()


@pytest.fixture(scope="module")
def unsandboxed():
    ctx, km, kc, bait = _kernel_with_bait("none")
    yield km, kc, bait
    ctx.__exit__(None, None, None)
    bait.close()


def run_probe(km, kc, code):
    reply, outputs = execute(kc, code, user_expressions={"result": "result"})
    assert km.is_alive(), "the kernel died during a probe"
    content = reply["content"]
    assert content["status"] == "ok", f"probe raised: {content.get('ename')}: {content.get('evalue')}"
    return json.loads(json.dumps(content["user_expressions"]["result"]["data"]["text/plain"]))


def plain(text):
    # text/plain of a str is its repr.
    return eval(text) if text[:1] in "'\"" else text


def matches(expected, outcome):
    return expected(outcome) if callable(expected) else outcome == expected


@pytest.mark.parametrize("probe", PROBES, ids=[p.name for p in PROBES])
def test_probe_is_contained(sandboxed, probe):
    km, kc, bait = sandboxed
    outcome = plain(run_probe(km, kc, probe.code))
    assert matches(probe.sandbox, outcome), f"{probe.name}: got {outcome!r}"
    if probe.name == "UDP to host loopback":
        assert not bait.udp_received(), "a datagram reached the host's loopback"
    if probe.name == "host uid of the code":
        # Every Python process under the kernel runs as an unprivileged host uid.
        import psutil
        kernel = psutil.Process(km.provisioner.process.pid)
        pythons = [p for p in kernel.children(recursive=True) if "python" in p.name()]
        assert pythons, "no worker process found under the kernel"
        for proc in pythons:
            assert 0 not in proc.uids(), f"worker {proc.pid} runs with host uid 0: {proc.uids()}"
    if probe.name == "write outside the workspace":
        assert not (bait.outside / "escaped.txt").exists()


CONTROLLED = [p for p in PROBES if p.control is not None]


@pytest.mark.parametrize("probe", CONTROLLED, ids=[p.name for p in CONTROLLED])
def test_probe_escapes_without_the_sandbox(unsandboxed, probe):
    if probe.root_control_only and os.geteuid() != 0:
        pytest.skip("this probe only escapes an unsandboxed kernel that runs as root")
    km, kc, bait = unsandboxed
    outcome = plain(run_probe(km, kc, probe.code))
    assert matches(probe.control, outcome), f"control {probe.name}: got {outcome!r}"
    if probe.name == "UDP to host loopback":
        assert bait.udp_received()


class SecretBait:
    """A secret and the hosts it is for: an HTTPS echo it is bound to, a plain HTTP stand-in it
    is bound to, and an allowlisted HTTPS echo without a secret; certificates from a CA made
    for the run, which the kernel trusts with --upstream-ca."""
    NAME = "BELLJAR_PROBE_BOUND"

    def __init__(self):
        self.value = "sk-probe-bound-" + secrets.token_hex(16)
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="belljar-bound-bait-"))
        os.chmod(self.root, 0o755)
        tls = make_ca(self.root / "tls")
        self.ca = tls / "ca.crt"
        def context():
            return server_context(tls / "localhost.crt", tls / "localhost-key.txt")
        self.echo, self.unbound, self.plain = StandIn(context()), StandIn(context()), StandIn()

    def kernel(self, bind):
        """A kernel with the value bound (bind=True) or passed in with --pass-env (its control)."""
        workspace = self.root / ("bound" if bind else "passed")
        workspace.mkdir()
        os.chmod(workspace, 0o777)
        shutil.copy(self.ca, workspace / "probe-ca.crt")
        os.chmod(workspace / "probe-ca.crt", 0o644)
        ports = [self.echo.port, self.plain.port, self.unbound.port]
        flags = ["--timeout", "30", "--pids", "1024"]
        for port in ports:
            flags += ["--allow-local-net", f"localhost:{port}"]
        if bind:
            flags += ["--secret", f"{self.NAME}@localhost:{self.echo.port}",
                      "--secret", f"{self.NAME}@localhost:{self.plain.port}"]
        else:
            flags += ["--pass-env", self.NAME]
        flags += ["--upstream-ca", str(self.ca)]
        env = {self.NAME: self.value}
        return running_kernel(flags=flags, workspace=str(workspace), env=env,
                              name="belljar-probe-bound" if bind else "belljar-probe-passed")

    def constants(self):
        needle = {"head": self.value[:len(self.value) // 2], "length": len(self.value),
                  "sha256": hashlib.sha256(self.value.encode()).hexdigest()}
        return (f"BOUND_NEEDLE = {needle!r}\nBOUND_ECHO_PORT = {self.echo.port}\n"
                f"BOUND_PLAIN_PORT = {self.plain.port}\nUNBOUND_ECHO_PORT = {self.unbound.port}\n")

    def close(self):
        for server in (self.echo, self.unbound, self.plain):
            server.shutdown()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def secret_bait():
    if ISOLATION != "strict":
        pytest.skip("secrets bound to a host need the egress proxy, so the full jail")
    bait = SecretBait()
    yield bait
    bait.close()


def _kernel_with_secret(bait, bind):
    ctx = bait.kernel(bind)
    km, kc = ctx.__enter__()
    reply, _ = execute(kc, PRELUDE + SECRET_PRELUDE + bait.constants())
    assert reply["content"]["status"] == "ok", reply["content"]
    return ctx, km, kc


@pytest.fixture(scope="module")
def bound_secret(secret_bait):
    ctx, km, kc = _kernel_with_secret(secret_bait, bind=True)
    yield km, kc, secret_bait
    ctx.__exit__(None, None, None)


@pytest.fixture(scope="module")
def passed_secret(secret_bait):
    ctx, km, kc = _kernel_with_secret(secret_bait, bind=False)
    yield km, kc, secret_bait
    ctx.__exit__(None, None, None)


@pytest.mark.parametrize("probe", SECRET_PROBES, ids=[p.name for p in SECRET_PROBES])
def test_secret_probe_is_contained(bound_secret, probe):
    km, kc, bait = bound_secret
    outcome = plain(run_probe(km, kc, probe.code))
    assert matches(probe.sandbox, outcome), f"{probe.name}: got {outcome!r}"
    if probe.name == "bound secret over plain HTTP to its host":
        assert bait.plain.received.requests == [], "a plain request reached the bound host"
    if probe.name == "bound secret echoed back by its own host":
        sent = bait.echo.received.case("probe-echo")[-1]["headers"]["authorization"]
        assert sent == f"Bearer {bait.value}", "the bound host did not get the value"
    if probe.name == "bound secret sent to another allowlisted host":
        sent = bait.unbound.received.case("probe-unbound")[-1]["headers"]["authorization"]
        assert bait.value not in sent


@pytest.mark.parametrize("probe", SECRET_PROBES, ids=[p.name for p in SECRET_PROBES])
def test_secret_probe_finds_the_value_when_passed_in(passed_secret, probe):
    km, kc, bait = passed_secret
    outcome = plain(run_probe(km, kc, probe.code))
    assert matches(probe.control, outcome), f"control {probe.name}: got {outcome!r}"
