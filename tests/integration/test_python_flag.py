"""--python given a `#!` script (a pyenv shim, a wrapper): refused with one line and exit 2,
never run on the host as the kernel's user (it used to be asked for sys.executable through
popen). The script would leave a marker file on the host if anything ran it."""
import json
import socket
import subprocess

import pytest

from belljar_testing import belljar


@pytest.fixture
def shim(tmp_path):
    marker = tmp_path / "shim-ran"
    script = tmp_path / "python3"
    script.write_text(f"#!/bin/sh\ntouch {marker}\necho /usr/bin/python3\nexec /usr/bin/python3 \"$@\"\n")
    script.chmod(0o755)
    return script, marker


def free_ports(n):
    ports = []
    for _ in range(n):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    return ports


def connection_file(tmp_path):
    shell, iopub, stdin, control, hb = free_ports(5)
    info = {"ip": "127.0.0.1", "transport": "tcp", "key": "k" * 32, "signature_scheme": "hmac-sha256",
            "shell_port": shell, "iopub_port": iopub, "stdin_port": stdin, "control_port": control,
            "hb_port": hb}
    path = tmp_path / "connection.json"
    path.write_text(json.dumps(info))
    return path


@pytest.mark.parametrize("command", ["run", "install", "kernel"])
def test_a_script_given_as_python_is_refused_and_never_run(tmp_path, shim, command):
    script, marker = shim
    workspace = tmp_path / "ws"
    workspace.mkdir()
    if command == "run":
        args = ["run", "--workspace", str(workspace), "--python", str(script), "-c", "print('ran')"]
    elif command == "install":
        args = ["install", "--prefix", str(tmp_path / "prefix"), "--name", "shim-test",
                "--python", str(script)]
    else:
        args = ["kernel", "-f", str(connection_file(tmp_path)), "--workspace", str(workspace),
                "--python", str(script)]
    done = belljar(*args, cwd=workspace, timeout=60)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"--python {script} is a script" in lines[0]
    assert "sys.executable" in lines[0]  # the fix: the command that prints the interpreter
    assert "ran" not in done.stdout
    assert not marker.exists(), "the script was run on the host"
    assert not (tmp_path / "prefix").exists()


def test_install_sys_prefix_reads_the_prefix_without_running_the_interpreter(tmp_path):
    # A venv whose start-up leaves a marker: a .pth line runs at every interpreter start (it
    # used to be started, through popen, to print sys.prefix).
    venv = tmp_path / "venv"
    made = subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)],
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    marker = tmp_path / "interpreter-ran"
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "belljar_probe.pth").write_text(f"import pathlib; pathlib.Path({str(marker)!r}).touch()\n")
    done = belljar("install", "--sys-prefix", "--name", "venv-test", "--python",
                   str(venv / "bin" / "python3"), cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    spec = json.loads((venv / "share/jupyter/kernels/venv-test/kernel.json").read_text())
    assert spec["argv"][spec["argv"].index("--python") + 1] == str(venv / "bin" / "python3")
    assert not marker.exists(), "the interpreter was run on the host"
