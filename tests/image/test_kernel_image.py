"""The kernel image (scripts/build-image.sh, kernelspec/kubernetes/Containerfile) run as a
gateway's pod would run it: podman, non-root (1000:100), the gateway's environment, host
network (everything on loopback), driven by the gateway stand-in (tests/gateway_standin.py).
Three ways a cluster may run it: the runtime's default seccomp profile; a profile refusing
namespaces and mounts (a default Kubernetes pod) with --isolation degraded; and belljar's own
profile (kernelspec/kubernetes/belljar-seccomp.json), which keeps strict mode.
"""
import json
import os
import pathlib
import shutil
import subprocess
import time
import uuid

import pytest
from gateway_standin import GatewayStandIn

from belljar_testing import BELLJAR, SOURCE, TIMEOUT, collect, execute, stdout_of, wait_for_stream

PODMAN = ["podman", "--runtime", "runc"]  # crun refuses this machine's hybrid cgroups
IMAGE = "localhost/belljar-kernel:test"
RESULTS = pathlib.Path(os.environ.get("BELLJAR_ARTIFACTS", SOURCE / "build" / "tests" / "artifacts")) / "kernel-image.json"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="podman here runs rootful; the unprivileged "
                       "suites cover belljar launch without a container (test_launch.py)"),
    pytest.mark.skipif(not shutil.which("podman") or not shutil.which("mmdebstrap"),
                       reason="podman and mmdebstrap come from scripts/install-deps.sh"),
]

CLONE_NEW = {"CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
             "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
             "CLONE_NEWNET": 0x40000000}


def namespace_refusing_profile(path):
    """What a runtime's default profile does to an unprivileged pod: no new namespaces, no
    mounts (clone3 gets ENOSYS, so libc falls back to clone, whose flags can be read)."""
    rules = [{"names": ["unshare", "setns", "mount", "umount2", "pivot_root", "open_tree",
                        "move_mount", "fsopen", "fsmount"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
             {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}]
    rules += [{"names": ["clone"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
               "args": [{"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}]}
              for flag in CLONE_NEW.values()]
    path.write_text(json.dumps({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": rules}))
    return path


@pytest.fixture(scope="module")
def image():
    started = time.monotonic()
    build_dir = str(pathlib.Path(BELLJAR).parent)
    done = subprocess.run([str(SOURCE / "scripts" / "build-image.sh"), IMAGE], capture_output=True,
                          text=True, timeout=1200, env=dict(os.environ, BUILD_DIR=build_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    size = int(subprocess.run([*PODMAN, "image", "inspect", "--format", "{{.Size}}", IMAGE],
                              capture_output=True, text=True, check=True).stdout)
    inspect = json.loads(subprocess.run([*PODMAN, "image", "inspect", IMAGE], capture_output=True,
                                        text=True, check=True).stdout)[0]
    yield {"size_mb": round(size / 1e6), "build_seconds": round(time.monotonic() - started, 1),
           "config": inspect["Config"]}


class Pod:
    """One container as the gateway's pod launcher would start it."""

    def __init__(self, tmp_path, security=(), policy=(), name=None):
        self.gateway = GatewayStandIn()
        self.kernel_id = str(uuid.uuid4())
        self.name = name or "belljar-test-" + self.kernel_id[:8]
        env = {"KERNEL_ID": self.kernel_id, "RESPONSE_ADDRESS": self.gateway.response_address,
               "PUBLIC_KEY": self.gateway.public_key, "PORT_RANGE": "0..0",
               "KERNEL_USERNAME": "learner", "BELLJAR_POLICY_FLAGS": json.dumps(list(policy))}
        args = [*PODMAN, "run", "-d", "--name", self.name, "--network", "host",
                "--user", "1000:100", "--ulimit", "nofile=8192:8192", "--ulimit", "nproc=8192:8192",
                *security]
        for k, v in env.items():
            args += ["-e", f"{k}={v}"]
        self.started = time.monotonic()
        # --ip: the test listens on loopback only (a pod listens on all its interfaces).
        subprocess.run([*args, IMAGE, "--ip", "127.0.0.1"], check=True, capture_output=True,
                       timeout=120)
        try:
            self.info = self.gateway.wait_for_connection_info(timeout=120)
        except AssertionError:
            raise AssertionError("no connection info: " + self.logs()) from None
        self.connection_seconds = time.monotonic() - self.started
        self.kc = self.gateway.client()
        self.kc.wait_for_ready(timeout=TIMEOUT)

    def logs(self):
        return subprocess.run([*PODMAN, "logs", self.name], capture_output=True, text=True).stderr

    def wait(self, timeout=60):
        done = subprocess.run([*PODMAN, "wait", self.name], capture_output=True, text=True,
                              timeout=timeout)
        return int(done.stdout.strip() or -1)

    def close(self):
        self.kc.stop_channels()
        subprocess.run([*PODMAN, "rm", "-f", "-t", "2", self.name], capture_output=True, timeout=60)
        self.gateway.close()


def drive(pod, expect_isolation):
    """Cells, an interrupt and a shutdown through the comm port; the key never inside."""
    kc = pod.kc
    first = time.monotonic()
    reply, outputs = execute(kc, "import numpy, pandas\nprint(int(numpy.arange(10).sum()))")
    first_result = time.monotonic() - first
    assert reply["content"]["status"] == "ok", (reply["content"], pod.logs())
    assert stdout_of(outputs) == "45\n"
    info = kc.kernel_info(reply=True)["content"]
    assert info["belljar"]["isolation"] == expect_isolation, info["belljar"]
    key = pod.info["key"]
    reply, outputs = execute(kc, f'''
import os, json
found = [k for k, v in os.environ.items() if {key!r} in v or k in ("PUBLIC_KEY", "RESPONSE_ADDRESS", "KERNEL_ID", "BELLJAR_POLICY_FLAGS")]
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if {key!r}.encode() in open(f"/proc/{{pid}}/environ", "rb").read() + open(f"/proc/{{pid}}/cmdline", "rb").read():
            found.append(pid)
    except OSError:
        pass
def writes(path):
    try:
        open(path, "w").close()
        return True
    except OSError:
        return False
print(json.dumps({{"found": found, "uid": os.getuid(), "tmpdir": os.environ.get("TMPDIR", "/tmp"),
                  "tmp": writes("/tmp/belljar-image-probe")}}))
''')
    got = json.loads(stdout_of(outputs).strip().splitlines()[-1])
    assert got["found"] == [], got
    msg_id = kc.execute("import time\nkept = 1\nprint('busy', flush=True)\ntime.sleep(30)")
    assert wait_for_stream(kc, msg_id, "busy"), "the cell never started"
    pod.gateway.signal(2)
    reply, _ = collect(kc, msg_id, timeout=20)
    assert reply["content"]["ename"] == "KeyboardInterrupt", reply["content"]
    reply, outputs = execute(kc, "print(kept)")
    assert stdout_of(outputs) == "1\n"
    pod.gateway.shutdown()
    assert pod.wait() == 0, pod.logs()
    return got, first_result


def record_launch(name, pod, first_result):
    """A run's figures: container start -> connection info, and the first result."""
    record(name, {"connection_info_seconds": round(pod.connection_seconds, 2),
                  "first_result_seconds": round(first_result, 3)})


def record(name, figures):
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results[name] = figures
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))


def test_the_image_is_non_root_and_enters_belljar_launch(image):
    config = image["config"]
    assert config["User"] == "1000:100"
    assert config["Entrypoint"] == ["/usr/local/bin/belljar", "launch"]
    assert config["WorkingDir"] == "/home/jovyan/work"
    record("image", {"size_mb": image["size_mb"], "build_seconds": image["build_seconds"]})


def refusal(security, gateway):
    """A container whose kernel must refuse strict mode: its stderr (nothing reaches the gateway)."""
    done = subprocess.run(
        [*PODMAN, "run", "--rm", "--network", "host", "--user", "1000:100",
         "--ulimit", "nofile=8192:8192", "--ulimit", "nproc=8192:8192", *security,
         "-e", "KERNEL_ID=k-strict", "-e", f"RESPONSE_ADDRESS={gateway.response_address}",
         "-e", f"PUBLIC_KEY={gateway.public_key}", IMAGE, "--ip", "127.0.0.1"],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert gateway.raw is None  # nothing reached the gateway
    return done.stderr


def test_with_the_runtimes_defaults(image, tmp_path):
    # The runtime masks parts of /proc: no fresh procfs, so strict refuses, naming the fix...
    gateway = GatewayStandIn()
    try:
        stderr = refusal([], gateway)
        assert "refusing to start: namespaces are incomplete (mount(proc) in a new pid namespace" in stderr
        assert "procMount: Unmasked" in stderr and "or pass --isolation degraded" in stderr
    finally:
        gateway.close()
    # ... and degraded mode runs on Landlock, seccomp and rlimits.
    pod = Pod(tmp_path, policy=["--isolation", "degraded"])
    try:
        got, first = drive(pod, expect_isolation="degraded")
        assert got["tmpdir"].startswith("/tmp/belljar-session-") and not got["tmp"], got
        record_launch("runtime defaults, degraded", pod, first)
    finally:
        pod.close()


def test_under_a_namespace_refusing_profile_in_degraded_mode(image, tmp_path):
    profile = namespace_refusing_profile(tmp_path / "no-namespaces.json")
    pod = Pod(tmp_path, security=["--security-opt", f"seccomp={profile}"],
              policy=["--isolation", "degraded"])
    try:
        got, first = drive(pod, expect_isolation="degraded")
        # Degraded mode's guarantees: a private temporary directory, never the pod's /tmp.
        assert got["tmpdir"].startswith("/tmp/belljar-session-") and not got["tmp"], got
        record_launch("namespaces refused, degraded", pod, first)
    finally:
        pod.close()


def test_strict_refuses_under_a_namespace_refusing_profile(image, tmp_path):
    profile = namespace_refusing_profile(tmp_path / "no-namespaces.json")
    gateway = GatewayStandIn()
    try:
        stderr = refusal(["--security-opt", f"seccomp={profile}"], gateway)
        assert "refusing to start: user namespaces are refused" in stderr
        assert "or pass --isolation degraded" in stderr
    finally:
        gateway.close()


def test_with_belljars_own_profile_and_an_unmasked_proc_strict_holds(image, tmp_path):
    # The pod settings README.md gives for strict mode: belljar's seccomp profile (namespaces
    # allowed, what no kernel needs refused) and procMount: Unmasked (podman: unmask).
    profile = SOURCE / "kernelspec" / "kubernetes" / "belljar-seccomp.json"
    pod = Pod(tmp_path, security=["--security-opt", f"seccomp={profile}",
                                  "--security-opt", "unmask=/proc/*"])
    try:
        reply, outputs = execute(pod.kc, "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                                          "print(libc.syscall(321, 0, 0, 0), ctypes.get_errno())")  # bpf
        assert stdout_of(outputs) == "-1 1\n"
        got, first = drive(pod, expect_isolation="strict")
        assert got["uid"] == 1000 and got["tmp"], got  # the jail's own /tmp
        record_launch("belljar profile, strict", pod, first)
    finally:
        pod.close()
