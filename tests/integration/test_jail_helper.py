"""The jail helper, belljar-jail, as a user of the kernel meets it: every sandbox's warden and
init are the helper (not copies of the supervisor), named so in `ps`, mapping no ZMQ, OpenSSL or
JSON library; an install finds it beside belljar or in libexec, never on PATH; a missing helper,
or one that someone else could replace, stops the kernel from starting with one line naming it,
while --isolation none (which needs no sandbox) still runs."""
import os
import pathlib
import shutil
import subprocess

import psutil

from belljar_testing import (
    BELLJAR,
    PYTHON,
    belljar,
    copied_build,
    execute,
    installed_prefix,
    run_once,
    running_kernel,
)

BUILD = pathlib.Path(BELLJAR).resolve().parent
HELPER = BUILD / "belljar-jail"


def tree_below(pid):
    """The process tree under pid as [(pid, comm)], parents before children (one child each)."""
    chain = []
    process = psutil.Process(pid)
    while True:
        children = process.children()
        if not children:
            return chain
        process = children[0]
        chain.append((process.pid, pathlib.Path(f"/proc/{process.pid}/comm").read_text().strip()))


def test_the_sandbox_processes_are_the_jail_helper_and_named_so():
    with running_kernel() as (km, kc):
        reply, _ = execute(kc, "1 + 1")
        assert reply["content"]["status"] == "ok"
        chain = tree_below(km.provisioner.pid)
        names = [comm for _, comm in chain]
        assert names[:2] == ["belljar-warden", "belljar-init"], chain
        assert names[2].startswith("python3"), chain
        warden, init = chain[0][0], chain[1][0]
        for pid in (warden, init):
            # The cmdline is world-readable even for a process that is not dumpable.
            argv = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            assert argv[0] == b"belljar-jail", argv
        if os.geteuid() != 0:
            return  # the warden is not dumpable: only root reads its maps
        assert pathlib.Path(f"/proc/{warden}/exe").resolve() == HELPER.resolve()
        for pid in (warden, init):
            maps = pathlib.Path(f"/proc/{pid}/maps").read_text()
            for library in ("libzmq", "libssl", "libcrypto", "libstdc++", "libsodium", "ld-linux"):
                assert library not in maps, f"{library} mapped in {pid}:\n{maps}"
        # The control: the supervisor does map them.
        supervisor_maps = pathlib.Path(f"/proc/{km.provisioner.pid}/maps").read_text()
        assert "libzmq" in supervisor_maps and "libstdc++" in supervisor_maps


def test_a_kernel_without_its_helper_refuses_to_start_naming_it():
    root = copied_build(files=())
    try:
        done = run_once(root / "belljar")
        assert done.returncode == 1, (done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert "belljar-jail" in lines[0] and "cmake --install" in lines[0]
        assert str(root / "belljar-jail") in lines[0]
        assert str(root.parent / "libexec" / "belljar" / "belljar-jail") in lines[0]
        # Never looked up on PATH: a belljar-jail there changes nothing.
        decoy_dir = root / "decoy"
        decoy_dir.mkdir()
        shutil.copy2(HELPER, decoy_dir / "belljar-jail")
        done = subprocess.run([str(root / "belljar"), "run", "--python", PYTHON,
                               "--workspace", str(decoy_dir), "-c", "1"],
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PATH": f"{decoy_dir}:{os.environ['PATH']}"})
        assert done.returncode == 1 and "belljar-jail" in done.stderr
        # The control: with no sandbox to build, no helper is needed.
        done = run_once(root / "belljar", "--isolation", "none")
        assert done.returncode == 0 and done.stdout.strip() == "42", done.stderr
        check = subprocess.run([str(root / "belljar"), "check"], capture_output=True, text=True,
                               timeout=60)
        assert check.returncode == 1 and "jail helper: MISSING" in check.stdout
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_helper_others_could_replace_is_refused():
    root = copied_build()
    helper = root / "belljar-jail"
    try:
        done = run_once(root / "belljar")
        assert done.returncode == 0 and done.stdout.strip() == "42", done.stderr  # the control
        os.chmod(helper, 0o757)
        done = run_once(root / "belljar")
        assert done.returncode == 1
        assert "writable by its group or by others: chmod go-w" in done.stderr
        os.chmod(helper, 0o755)
        check = subprocess.run([str(root / "belljar"), "check"], capture_output=True, text=True,
                               timeout=60)
        assert f"jail helper: {helper}" in check.stdout
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_an_installed_belljar_finds_its_helper_in_libexec():
    prefix = installed_prefix()
    try:
        done = run_once(prefix / "bin" / "belljar")
        assert done.returncode == 0 and done.stdout.strip() == "42", done.stderr
        check = subprocess.run([str(prefix / "bin" / "belljar"), "check"], capture_output=True,
                               text=True, timeout=60)
        assert f"jail helper: {prefix}/libexec/belljar/belljar-jail" in check.stdout
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


def test_the_install_rules_put_the_helper_in_libexec():
    rules = (BUILD / "cmake_install.cmake").read_text()
    assert "/libexec/belljar" in rules and "belljar-jail" in rules


def test_the_helper_is_no_command_of_its_own():
    done = subprocess.run([str(HELPER)], capture_output=True, text=True, timeout=10)
    assert done.returncode == 2
    assert "started by the kernel" in done.stderr
    version = subprocess.run([str(HELPER), "--version"], capture_output=True, text=True, timeout=10)
    assert version.returncode == 0
    assert version.stdout.startswith("belljar-jail ") and "jail protocol" in version.stdout
    assert belljar("--version").stdout.split()[1] == version.stdout.split()[1]
