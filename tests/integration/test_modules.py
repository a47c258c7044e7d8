"""The modules a kernel loads only when its policy needs them, as a user meets them: the egress
proxy (belljar-egress.so: --allow-net, --secret) and the gateway's sealing (belljar-gateway.so:
`belljar launch`), the two parts of belljar that use OpenSSL. A kernel that allows no host maps
neither them nor OpenSSL; one that does maps the proxy. They are found beside belljar or in
libexec, never on PATH, and checked like the jail helper: a missing module, or one someone else
could replace, stops only the kernels that need it, with one line naming it."""
import os
import pathlib
import shutil
import subprocess

import pytest

from belljar_testing import (
    BELLJAR,
    HELPER_NAME,
    MODULE_NAMES,
    PYTHON,
    copied_build,
    execute,
    installed_prefix,
    run_once,
    running_kernel,
)

BUILD = pathlib.Path(BELLJAR).resolve().parent
OPENSSL = ("libssl.so", "libcrypto.so")


def mapped_files(pid):
    return {line.split()[-1] for line in pathlib.Path(f"/proc/{pid}/maps").read_text().splitlines()
            if len(line.split()) >= 6}


def mapping(files, name):
    return [path for path in files if pathlib.Path(path).name.startswith(name)]


def check(binary, *flags):
    return subprocess.run([str(binary), "check", *flags], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.skipif(os.geteuid() != 0, reason="the supervisor is not dumpable (PR_SET_DUMPABLE "
                    "0): only root may read its maps")
def test_a_kernel_that_allows_no_host_maps_no_openssl_and_one_that_does_maps_the_proxy():
    with running_kernel() as (km, kc):
        reply, _ = execute(kc, "1 + 1")
        assert reply["content"]["status"] == "ok"
        files = mapped_files(km.provisioner.pid)
        assert mapping(files, "libzmq"), "the control: the supervisor's libraries are listed"
        for name in (*OPENSSL, *MODULE_NAMES):
            assert not mapping(files, name), f"a kernel that allows no host maps {name}"
    with running_kernel(flags=("--allow-net", "127.0.0.1")) as (km, kc):
        reply, _ = execute(kc, "1 + 1")
        assert reply["content"]["status"] == "ok"
        files = mapped_files(km.provisioner.pid)
        assert mapping(files, "belljar-egress.so") == [str(BUILD / "belljar-egress.so")]
        assert mapping(files, "libssl.so") and mapping(files, "libcrypto.so")
        assert not mapping(files, "belljar-gateway.so")


def test_a_missing_egress_module_stops_only_the_kernels_that_allow_a_host():
    root = copied_build(files=(HELPER_NAME,))
    try:
        done = run_once(root / "belljar", "--allow-net", "127.0.0.1")
        assert done.returncode == 1, (done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        # Where an install puts it, and the fix.
        assert str(root.parent / "libexec" / "belljar" / "belljar-egress.so") in lines[0]
        assert "No such file" in lines[0] and "reinstall" in lines[0]
        # Never looked up on PATH or in the working directory.
        decoy = root / "decoy"
        decoy.mkdir()
        shutil.copy2(BUILD / "belljar-egress.so", decoy / "belljar-egress.so")
        done = subprocess.run([str(root / "belljar"), "run", "--python", PYTHON, "--workspace",
                               str(decoy), "--allow-net", "127.0.0.1", "-c", "1"],
                              capture_output=True, text=True, timeout=60, cwd=decoy,
                              env={**os.environ, "PATH": f"{decoy}:{os.environ['PATH']}",
                                   "LD_LIBRARY_PATH": str(decoy)})
        assert done.returncode == 1 and "belljar-egress.so" in done.stderr, done.stderr
        # The control: a kernel that allows no host needs no module.
        done = run_once(root / "belljar")
        assert done.returncode == 0 and done.stdout.strip() == "42", done.stderr
        line = next(text for text in check(root / "belljar").stdout.splitlines()
                    if text.startswith("egress module:"))
        assert "MISSING" in line and "(this policy does not need it)" in line
        needed = check(root / "belljar", "--allow-net", "127.0.0.1")
        assert needed.returncode == 1
        line = next(text for text in needed.stdout.splitlines()
                    if text.startswith("egress module:"))
        assert "MISSING" in line and "does not need" not in line
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_an_egress_module_others_could_replace_is_refused():
    root = copied_build()
    module = root / "belljar-egress.so"
    try:
        done = run_once(root / "belljar", "--allow-net", "127.0.0.1")
        assert done.returncode == 0 and done.stdout.strip() == "42", done.stderr  # the control
        os.chmod(module, 0o775)
        done = run_once(root / "belljar", "--allow-net", "127.0.0.1")
        assert done.returncode == 1
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert f"{module} is writable by its group or by others: chmod go-w" in done.stderr
        # A file that is not a module (a replaced or truncated one) is refused too, not run.
        os.chmod(module, 0o755)
        module.write_bytes(b"not an ELF object\n")
        done = run_once(root / "belljar", "--allow-net", "127.0.0.1")
        assert done.returncode == 1 and "cannot load the egress module" in done.stderr
        shutil.copy2(BUILD / "belljar-egress.so", module)
        assert f"egress module: {module}" in check(root / "belljar").stdout
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_missing_gateway_module_stops_belljar_launch_naming_it():
    root = copied_build(files=(HELPER_NAME, "belljar-egress.so"))
    try:
        done = subprocess.run([str(root / "belljar"), "launch", "--python", PYTHON,
                               "--kernel-id", "k1", "--response-address", "127.0.0.1:9",
                               "--public-key", "AAAA"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 1, (done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "belljar-gateway.so" in lines[0] and "reinstall" in lines[0]
        assert "gateway module (belljar launch): MISSING" in check(root / "belljar").stdout
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_an_installed_belljar_finds_its_modules_in_libexec():
    prefix = installed_prefix()
    try:
        done = run_once(prefix / "bin" / "belljar", "--allow-net", "127.0.0.1")
        assert done.returncode == 0 and done.stdout.strip() == "42", done.stderr
        report = check(prefix / "bin" / "belljar").stdout
        assert f"egress module: {prefix}/libexec/belljar/belljar-egress.so" in report
        assert (f"gateway module (belljar launch): {prefix}/libexec/belljar/belljar-gateway.so"
                in report)
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


def test_the_install_rules_put_the_modules_in_libexec():
    rules = (BUILD / "cmake_install.cmake").read_text()
    assert "/libexec/belljar" in rules
    for name in MODULE_NAMES:
        assert name in rules


def test_a_module_installed_without_execute_bits_loads():
    # Debian (and CMake on Debian) installs shared objects 0644; loading needs no execute bit.
    prefix = installed_prefix()
    try:
        for name in MODULE_NAMES:
            os.chmod(prefix / "libexec" / "belljar" / name, 0o644)
        done = run_once(prefix / "bin" / "belljar", "--allow-net", "127.0.0.1")
        assert done.returncode == 0 and done.stdout.strip() == "42", done.stderr
        report = check(prefix / "bin" / "belljar").stdout
        assert "MISSING" not in report, report
    finally:
        shutil.rmtree(prefix, ignore_errors=True)
