"""The workspace guard: secrets stay masked however the sandbox hides them from the scan, new
secrets saved on the host are masked before the next cell, files that host tools execute (.git)
stay read-only inside, and the session's writes to the workspace stop at --workspace-quota.

Each attack here is one an outside red team ran against the sandbox; each has a control that
shows the probe itself works (the file is readable, the hook does run) when the guard is off."""
import os
import resource
import shutil
import signal
import subprocess
import tempfile

import pytest

from belljar_testing import (
    BELLJAR,
    ISOLATION,
    PYTHON,
    execute,
    running_kernel,
    sandbox_writable_dir,
    stderr_of,
    stdout_of,
)

pytestmark = pytest.mark.skipif(ISOLATION != "strict", reason="the guard needs the full jail")

SECRET = "sk-workspace-guard-secret-0123456789"
GIT = shutil.which("git") or "/usr/bin/git"


def read_attempt(path):
    """Code for a cell that tries to read `path` and prints what it got (or the error's name)."""
    return (f"try:\n    print('READ:' + open({str(path)!r}).read())\n"
            f"except OSError as e:\n    print('REFUSED:' + type(e).__name__)\n")


def test_unreadable_directory_is_masked_whole_not_skipped():
    ws = sandbox_writable_dir("belljar-guard-chmod-")
    (ws / "proj" / ".ssh").mkdir(parents=True)
    (ws / "proj" / ".env").write_text(SECRET)
    (ws / "proj" / ".ssh" / "id_ed25519").write_text(SECRET)
    os.chmod(ws / "proj", 0o777)
    with running_kernel(flags=["--timeout", "20"], workspace=str(ws)) as (km, kc):
        _, out = execute(kc, read_attempt(ws / "proj/.env"))
        assert "REFUSED" in stdout_of(out), stdout_of(out)
        # The attack: make the directory unreadable so the next start's scan can't see inside.
        # The sandbox may not (the broker refuses a folder its owner could not read)...
        reply, out = execute(kc, f"import os; os.chmod({str(ws / 'proj')!r}, 0)")
        assert reply["content"]["status"] == "error" and "PermissionError" in str(out), out
        # ...but the host's user may, and the next start's scan must not trust what it can't see.
        os.chmod(ws / "proj", 0)
        km.restart_kernel(now=True)
        kc.wait_for_ready(timeout=60)
        code = (f"import os\ntry:\n    os.chmod({str(ws / 'proj')!r}, 0o755)\nexcept OSError as e:\n"
                f"    print('chmod refused', type(e).__name__)\n"
                + read_attempt(ws / "proj/.env") + read_attempt(ws / "proj/.ssh/id_ed25519"))
        reply, out = execute(kc, code)
        text = stdout_of(out)
        assert SECRET not in text, text
        assert text.count("REFUSED") == 2, text
    shutil.rmtree(ws, ignore_errors=True)


def test_a_chain_deeper_than_the_scan_neither_leaks_nor_stops_starts():
    # The kernel gets the usual 1024 descriptors (a desktop session's default), so the chain is
    # deeper than a scan holding one per level could go.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
    try:
        deep_chain()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def deep_chain():
    # 1100 levels with a secret at the end, saved by the host's user: the sandbox may not make
    # a dot-path, and may not build below a level the survey has masked as too deep.
    ws = sandbox_writable_dir("belljar-guard-deep-")
    build_chain(ws, 1100, ".env", SECRET)
    with running_kernel(flags=["--timeout", "30"], workspace=str(ws)) as (km, kc):
        for start in ("first", "again"):  # before the fix: every start failed
            code = (f"import os\nos.chdir({str(ws)!r})\ntry:\n"
                    "    for _ in range(1100): os.chdir('d')\n"
                    "    print('READ:' + open('.env').read())\n"
                    "except OSError as e:\n    print('REFUSED:' + type(e).__name__)\n")
            reply, out = execute(kc, code, timeout=60)
            assert reply["content"]["status"] == "ok", (start, out)
            assert SECRET not in stdout_of(out) and "REFUSED" in stdout_of(out), stdout_of(out)
            km.restart_kernel(now=True)
            kc.wait_for_ready(timeout=60)
    subprocess.run(["rm", "-rf", str(ws)], check=False)


def build_chain(top, depth, name, text):
    """Makes `depth` nested folders named d below `top`, one level at a time (no path grows
    past PATH_MAX), and writes `name` at the bottom."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=fd)
        os.write(out, text.encode())
        os.close(out)
    finally:
        os.close(fd)


def test_a_secret_saved_on_the_host_while_the_kernel_runs_is_masked_before_the_next_cell():
    ws = sandbox_writable_dir("belljar-guard-late-")
    with running_kernel(flags=["--timeout", "20"], workspace=str(ws)) as (km, kc):
        reply, _ = execute(kc, "x = 1")
        assert reply["content"]["status"] == "ok"
        (ws / ".env").write_text(SECRET)                  # the user saves it on the host
        (ws / "keys").mkdir()
        (ws / "keys" / "server.pem").write_text(SECRET)
        reply, out = execute(kc, read_attempt(ws / ".env") + read_attempt(ws / "keys/server.pem"))
        assert SECRET not in stdout_of(out), stdout_of(out)
        assert stdout_of(out).count("REFUSED") == 2
        assert ".env is masked" in stderr_of(out)
        # Masked on the host side only in the sandbox's view: the host copy is untouched.
        assert (ws / ".env").read_text() == SECRET
    shutil.rmtree(ws, ignore_errors=True)


def git(*args, cwd):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run([GIT, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60)


PLANT_HOOKS = """
import os, pathlib
git = pathlib.Path({git_dir!r})
results = []
def attempt(what, action):
    try:
        action()
        results.append(what + ':written')
    except OSError as e:
        results.append(what + ':' + type(e).__name__)
def make_repo():
    for d in ('objects', 'refs/heads', 'hooks'):
        (git / d).mkdir(parents=True, exist_ok=True)
    (git / 'HEAD').write_text('ref: refs/heads/main\\n')
attempt('repo', make_repo)
attempt('config', lambda: (git / 'config').write_text(
    '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = touch {marker}; false\\n'))
attempt('hook', lambda: (git / 'hooks' / 'post-checkout').write_text('#!/bin/sh\\ntouch {marker}\\n'))
print(' '.join(results))
"""


@pytest.mark.parametrize("layout", ["existing repository", "no repository in the workspace"])
def test_host_git_runs_nothing_the_sandbox_planted(layout):
    base = sandbox_writable_dir("belljar-guard-git-")
    marker = base / "PWNED"
    if layout == "existing repository":
        ws = base
        git("init", "-q", cwd=ws)
    else:
        # The common course layout: notebooks in a folder of a repository whose .git is above.
        git("init", "-q", cwd=base)
        ws = base / "notebooks"
        ws.mkdir()
        os.chmod(ws, 0o777)
    (ws / "nb.py").write_text("print(1)\n")
    code = PLANT_HOOKS.format(git_dir=str(ws / ".git"), marker=str(marker))
    with running_kernel(flags=["--timeout", "20"], workspace=str(ws)) as (km, kc):
        reply, out = execute(kc, code)
        said = stdout_of(out)
        assert "config:written" not in said and "hook:written" not in said, said
    status = git("status", cwd=ws)
    assert status.returncode == 0, status.stderr
    assert not marker.exists(), "host git ran code the sandbox planted"
    # The kernel's placeholder is gone with it; the user's repository is as it was.
    if layout != "existing repository":
        assert not (ws / ".git").exists()
    shutil.rmtree(base, ignore_errors=True)


def test_control_with_git_writable_the_planted_fsmonitor_does_run():
    # Proves the probe above is real: with the guard lifted (--writable .git) host git runs it.
    ws = sandbox_writable_dir("belljar-guard-git-control-")
    git("init", "-q", cwd=ws)
    marker = ws.parent / (ws.name + "-PWNED")
    code = PLANT_HOOKS.format(git_dir=str(ws / ".git"), marker=str(marker))
    with running_kernel(flags=["--timeout", "20", "--writable", ".git"], workspace=str(ws)) as (km, kc):
        _, out = execute(kc, code)
        assert "config:written" in stdout_of(out), stdout_of(out)
    git("status", cwd=ws)
    assert marker.exists(), "the control probe did not run: the test above proves nothing"
    marker.unlink()
    shutil.rmtree(ws, ignore_errors=True)


def test_editor_and_shell_files_are_read_only_and_new_ones_are_reported():
    ws = sandbox_writable_dir("belljar-guard-files-")
    (ws / ".vscode").mkdir()
    (ws / ".vscode" / "settings.json").write_text("{}")
    (ws / ".envrc").write_text("export A=1\n")
    (ws / ".bashrc").write_text("# mine\n")
    (ws / "course.code-workspace").write_text("{}")
    code = ("import pathlib\nresults = []\n"
            "for rel in ('.vscode/settings.json', '.vscode/tasks.json', '.envrc', '.bashrc',\n"
            "            'course.code-workspace', 'sub.code-workspace'):\n"
            f"    p = pathlib.Path({str(ws)!r}) / rel\n"
            "    try:\n        p.write_text('planted')\n        results.append(rel + ':written')\n"
            "    except OSError as e:\n        results.append(rel + ':' + type(e).__name__)\n"
            "print(' '.join(results))\n")
    with running_kernel(flags=["--timeout", "20"], workspace=str(ws)) as (km, kc):
        _, out = execute(kc, code)
        assert "written" not in stdout_of(out), stdout_of(out)
        # The sandbox cannot make a new one (the broker refuses it, and says so in the cell)...
        reply, out = execute(kc, f"import os; os.makedirs({str(ws / 'sub/.idea')!r})")
        assert reply["content"]["status"] == "error"
        assert "PermissionError" in str(out)
        assert "the sandbox may not change sub/.idea" in stderr_of(out), stderr_of(out)
        # ...and one the host makes meanwhile is reported and read-only from the next cell on.
        (ws / "sub" / ".idea").mkdir(parents=True)
        (ws / "sub" / ".idea" / "workspace.xml").write_text("x")
        reply, out = execute(kc, f"open({str(ws / 'sub/.idea/workspace.xml')!r}, 'w').write('y')")
        assert reply["content"]["status"] == "error"
        assert "sub/.idea appeared in the workspace" in stderr_of(out), stderr_of(out)
    assert (ws / "sub" / ".idea" / "workspace.xml").read_text() == "x"
    assert (ws / ".envrc").read_text() == "export A=1\n"
    assert (ws / "course.code-workspace").read_text() == "{}"
    assert not (ws / "sub.code-workspace").exists()
    shutil.rmtree(ws, ignore_errors=True)


def test_workspace_writes_stop_at_the_quota():
    ws = sandbox_writable_dir("belljar-guard-quota-")
    quota = 64 << 20
    flags = ["--timeout", "30", "--workspace-quota", "64M", "--file-size", "99M"]
    # The red team's shape, twice over: 10 files of 99 MiB under the per-file cap (990 MiB, which
    # the page cache takes in well under a second), then 20k small files.
    code = (f"import os\nos.chdir({str(ws)!r})\nblock = b'x' * (1 << 20)\n"
            "for n in range(10):\n"
            "    with open(f'big{n}', 'wb') as f:\n"
            "        for _ in range(99): f.write(block)\n"
            "for n in range(20000):\n    open(f'small{n}', 'wb').write(b'y' * 4096)\n")
    with running_kernel(flags=flags, workspace=str(ws)) as (km, kc):
        reply, out = execute(kc, code, timeout=120)
        used = sum(f.stat().st_blocks * 512 for f in ws.iterdir() if f.is_file())
        assert reply["content"]["status"] == "error"
        assert reply["content"]["ename"] == "WorkspaceQuotaError", reply["content"]
        assert reply["metadata"]["belljar"]["limit_hit"] == "workspace"
        # Caught within a survey period or two of the burst: far short of the 1.1 GB asked.
        print(f"workspace after the burst: {used >> 20} MiB (quota {quota >> 20} MiB)")
        assert used < quota + (384 << 20), used
        # Read-only until files are removed, and the session keeps its variables.
        reply, out = execute(kc, f"block = 1\nopen({str(ws / 'more')!r}, 'w').write('z')")
        assert reply["content"]["status"] == "error" and "read-only" in str(reply["content"]).lower() + stderr_of(out).lower()
        for f in ws.iterdir():
            if f.is_file():
                f.unlink()
        reply, out = execute(kc, f"open({str(ws / 'after')!r}, 'w').write('ok'); print(block)")
        assert reply["content"]["status"] == "ok", out
        assert stdout_of(out) == "1\n"
    shutil.rmtree(ws, ignore_errors=True)


def test_symlinks_and_folders_count_toward_the_quota():
    """The outside red team's third pass: symlinks with long targets (a block each) made 48 MiB
    under --workspace-quota 32M, counted as nothing (only regular files were). Control: the
    host's own count of what the cell made is over the quota, so the probe really fills it."""
    ws = sandbox_writable_dir("belljar-guard-links-")
    quota = 16 << 20
    flags = ["--timeout", "60", "--workspace-quota", "16M"]
    # The cell goes on making links until it is stopped: the workspace turns read-only when the
    # survey finds it over, which a link made meanwhile may meet (EROFS) before the supervisor's
    # interrupt arrives; the quota is shown by the interrupt, never by the cell's own end.
    code = (f"import os, itertools, time\nos.chdir({str(ws)!r})\nos.mkdir('d')\n"
            "target = './' * 1990 + 'f'\n"
            "for n in itertools.count():\n"
            "    try:\n        os.symlink(target, f'd/{n:06d}')\n"
            "    except OSError:\n        time.sleep(0.01)\n")
    try:
        with running_kernel(flags=flags, workspace=str(ws)) as (km, kc):
            reply, out = execute(kc, code, timeout=120)
            # The folder's own blocks too: the quota counts them (and the links alone fell
            # 12 KiB short once, the survey having counted the folder that holds them).
            made = os.lstat(ws / "d").st_blocks * 512 + sum(
                os.lstat(p).st_blocks * 512 for p in (ws / "d").iterdir()
            )
            print(f"symlinks made: {made >> 20} MiB (quota {quota >> 20} MiB)")
            assert made >= quota, made  # the probe filled past the quota
            assert reply["content"]["status"] == "error", (made, reply["content"])
            assert reply["content"]["ename"] == "WorkspaceQuotaError", reply["content"]
            assert reply["metadata"]["belljar"]["limit_hit"] == "workspace"
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def test_no_name_is_made_deeper_than_the_quota_reads():
    """The outside red team's third pass: a file below 130 folders was masked by the survey and
    never counted (301 MiB under --workspace-quota 32M, left on the host). The rule refuses a
    name 128 folders down; the control, 127 down, is made."""
    ws = sandbox_writable_dir("belljar-guard-deep-")
    code = (f"import os\nos.chdir({str(ws)!r})\n"
            "os.makedirs('/'.join(['a'] * 127))\nprint('127 made', flush=True)\n"
            "os.makedirs('/'.join(['a'] * 130))\n")
    try:
        with running_kernel(flags=["--workspace-quota", "32M"], workspace=str(ws)) as (km, kc):
            reply, out = execute(kc, code, timeout=60)
            assert "127 made" in stdout_of(out)
            assert reply["content"]["ename"] == "PermissionError", reply["content"]
            assert (ws / "/".join(["a"] * 127)).is_dir()
            assert not (ws / "/".join(["a"] * 128)).exists()
    finally:
        shutil.rmtree(ws, ignore_errors=True)


@pytest.mark.parametrize("isolation", ["strict", "none"])
def test_the_kernels_connection_file_and_jupyters_runtime_directory_are_masked(isolation):
    """A workspace that is (or holds) a home holds Jupyter's runtime directory: this kernel's
    connection file (its key) and the server's jpserver-*.json (its token). Both must be masked,
    wherever the runtime directory is in the workspace. Control: --isolation none reads them."""
    ws = sandbox_writable_dir("belljar-guard-runtime-")
    try:
        home_runtime = ws / ".local" / "share" / "jupyter" / "runtime"
        home_runtime.mkdir(parents=True)
        (home_runtime / "jpserver-1.json").write_text('{"token": "%s"}' % SECRET)
        # This kernel's own connection file, in a runtime directory the default pattern misses.
        custom = ws / "state" / "kernels"
        custom.mkdir(parents=True)
        for d in (ws / ".local", ws / ".local" / "share", ws / ".local" / "share" / "jupyter",
                  home_runtime, ws / "state", custom):
            os.chmod(d, 0o755)
        with running_kernel(flags=["--isolation", isolation, "--timeout", "20"], workspace=str(ws),
                            connection_file=custom / "kernel-guard.json") as (km, kc):
            os.chmod(km.connection_file, 0o644)  # so only the mask can stop the sandbox user
            os.chmod(home_runtime / "jpserver-1.json", 0o644)
            for path in (km.connection_file, home_runtime / "jpserver-1.json"):
                _, out = execute(kc, read_attempt(path))
                if isolation == "none":
                    assert "READ:" in stdout_of(out), stdout_of(out)
                else:
                    assert stdout_of(out) == "REFUSED:PermissionError\n", (path, stdout_of(out))
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def test_a_connection_file_at_the_workspaces_top_is_masked_alone():
    ws = sandbox_writable_dir("belljar-guard-top-")
    try:
        (ws / "data.txt").write_text("the learner's own file\n")
        os.chmod(ws / "data.txt", 0o644)
        with running_kernel(flags=["--timeout", "20"], workspace=str(ws),
                            connection_file=ws / "kernel-top.json") as (km, kc):
            os.chmod(km.connection_file, 0o644)
            _, out = execute(kc, read_attempt(km.connection_file))
            assert stdout_of(out) == "REFUSED:PermissionError\n", stdout_of(out)
            _, out = execute(kc, read_attempt(ws / "data.txt"))  # the rest of the workspace stays
            assert stdout_of(out) == "READ:the learner's own file\n\n", stdout_of(out)
    finally:
        shutil.rmtree(ws, ignore_errors=True)


MIB = 1 << 20
# Each attack holds 48 MiB without a name under a 16M quota, then waits for the verdict: the
# quota stops the cell (WorkspaceQuotaError) or, uncounted, the cell runs into --timeout.
UNNAMED_WRITES = {
    # The outside attack on the third pass's fix: open, unlink, then write.
    "held": ("f = open('big', 'wb')\nos.unlink('big')\n"
             "for _ in range(48): f.write(block)\nf.flush()\n"),
    # Closed everywhere, parked in flight in a unix socket across the unlink, received back.
    "in_flight": ("import socket\na, b = socket.socketpair(socket.AF_UNIX)\n"
                  "f = open('big', 'wb')\nsocket.send_fds(a, [b'x'], [f.fileno()])\nf.close()\n"
                  "os.unlink('big')\n_, fds, _, _ = socket.recv_fds(b, 1, 1)\n"
                  "f = os.fdopen(fds[0], 'wb')\nfor _ in range(48): f.write(block)\nf.flush()\n"),
    # A rename over it removes its last name as unlink does (renameat2 without a flag).
    "renamed_over": ("f = open('big', 'wb')\nopen('other', 'wb').close()\n"
                     "os.rename('other', 'big')\nos.unlink('big')\n"
                     "for _ in range(48): f.write(block)\nf.flush()\n"),
    # A shared mapping outlives the descriptor it was made from.
    "mapped": ("import mmap\nf = open('big', 'w+b')\nf.truncate(48 * len(block))\n"
               "m = mmap.mmap(f.fileno(), 48 * len(block))\nf.close()\nos.unlink('big')\n"
               "for n in range(48): m[n * len(block):(n + 1) * len(block)] = block\nm.flush()\n"),
}


@pytest.mark.parametrize("variant", sorted(UNNAMED_WRITES))
def test_a_file_written_after_its_last_name_went_still_counts(variant):
    """The outside attack on the third pass's fix: 200 MiB written to a file after its last name
    was removed, under --workspace-quota 32M; the survey walks names, and the cell survived.
    The broker now moves a file still held open (in flight and mapped included) into the
    morgue, which the survey counts. Control: without a quota the same cell ends holding 48 MiB
    through the descriptor, with the name gone from the sandbox's view."""
    ws = sandbox_writable_dir("belljar-guard-unnamed-")
    prelude = f"import os, select\nos.chdir({str(ws)!r})\nblock = b'x' * {MIB}\n"
    report = ("held = f if 'f' in dir() and not f.closed else None\n"
              "size = os.fstat(held.fileno()).st_blocks * 512 if held else len(m)\n"
              "print('HELD', size, os.path.exists('big'), flush=True)\n")
    try:
        with running_kernel(flags=["--timeout", "20", "--file-size", "99M"],
                            workspace=str(ws)) as (km, kc):
            reply, out = execute(kc, prelude + UNNAMED_WRITES[variant] + report, timeout=60)
            held = stdout_of(out).split()
            assert held[:1] == ["HELD"] and int(held[1]) >= 48 * MIB and held[2] == "False", (
                stdout_of(out), reply["content"])
        flags = ["--timeout", "20", "--workspace-quota", "16M", "--file-size", "99M"]
        with running_kernel(flags=flags, workspace=str(ws)) as (km, kc):
            # Written, then held until the verdict: the quota's, or (uncounted) --timeout's.
            reply, out = execute(kc, prelude + UNNAMED_WRITES[variant]
                                 + "select.select([], [], [], 60)\n", timeout=90)
            assert reply["content"]["ename"] == "WorkspaceQuotaError", reply["content"]
            assert reply["metadata"]["belljar"]["limit_hit"] == "workspace"
    finally:
        shutil.rmtree(ws, ignore_errors=True)


# The outside attack on round three's morgue: an O_PATH descriptor, which no write lease sees,
# or a reader's open that waited out the lease, kept a removed file's inode and its blocks (96
# MiB under a 32M quota, counted by no survey). The broker now drops a file's bytes under the
# lease before the name goes: what such a descriptor keeps is empty.
PINNED = """
import os, threading
os.chdir({ws!r})
pinned = []
for i in range(12):
    with open('p%d' % i, 'wb') as f:
        f.write(b'y' * (8 << 20))
    pinned.append(os.open('p%d' % i, os.O_PATH))
    os.unlink('p%d' % i)
# A reader racing the unlink: its open, blocked by the lease, completes on the removed inode.
for i in range(12, 28):
    with open('p%d' % i, 'wb') as f:
        f.write(b'y' * (1 << 20))
    stop = False
    def read():
        while not stop:
            try:
                fd = os.open('p%d' % i, os.O_RDONLY)
            except FileNotFoundError:
                continue
            if os.fstat(fd).st_nlink == 0:  # opened on the removed inode: kept
                pinned.append(fd)
                return
            os.close(fd)
    reader = threading.Thread(target=read)
    reader.start()
    os.unlink('p%d' % i)
    stop = True
    reader.join()
# Counted by no survey: an inode without a name (one in the morgue has its name there).
unnamed = [os.fstat(fd) for fd in pinned if os.fstat(fd).st_nlink == 0]
print('PINNED', len(unnamed), sum(st.st_blocks * 512 for st in unnamed))
"""


@pytest.mark.parametrize("mode", ["strict"])
def test_a_descriptor_no_lease_sees_keeps_no_bytes_of_a_removed_file(mode):
    ws = sandbox_writable_dir("belljar-guard-pinned-")
    try:
        with running_kernel(flags=["--workspace-quota", "32M", "--timeout", "60"],
                            workspace=str(ws)) as (km, kc):
            reply, out = execute(kc, PINNED.format(ws=str(ws)), timeout=90)
            words = stdout_of(out).split()
            assert words[:1] == ["PINNED"], (stdout_of(out), reply["content"])
            count, held = int(words[1]), int(words[2])
            # The pins are real (the O_PATH descriptors at least hold inodes without a name),
            # and what they hold is empty.
            assert count >= 12, stdout_of(out)
            assert held == 0, f"{held >> 20} MiB held by {count} descriptors of removed files"
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def test_a_file_closed_after_its_unlink_is_freed_and_the_morgue_stays_out_of_reach():
    """The other side of the morgue: a file unlinked while open is counted while it is held,
    freed once closed (nothing is left in the morgue after the next cell, nor in the workspace
    after the kernel), TemporaryFile in the workspace works, and the sandbox can neither list,
    open, make, nor rename into the morgue, even with --writable naming it."""
    ws = sandbox_writable_dir("belljar-guard-morgue-")
    morgue = ws / ".belljar-morgue"
    flags = ["--timeout", "20", "--workspace-quota", "32M", "--writable", ".belljar-morgue"]
    try:
        with running_kernel(flags=flags, workspace=str(ws)) as (km, kc):
            reply, out = execute(kc, f"import os\nos.chdir({str(ws)!r})\nf = open('t', 'wb')\n"
                                     f"os.unlink('t')\nf.write(b'y' * {8 * MIB})\nf.flush()\n"
                                     "print(os.path.exists('t'))")
            assert stdout_of(out) == "False\n", (out, reply["content"])
            # Held: in this kernel's folder of the morgue, on the host, with its bytes.
            (own,) = os.listdir(morgue)
            mine = morgue / own
            buried = os.listdir(mine)
            assert len(buried) == 1, buried
            assert (mine / buried[0]).stat().st_blocks * 512 >= 8 * MIB
            probes = {
                "list": f"os.listdir({str(morgue)!r})",
                "open": f"open({str(mine / buried[0])!r}, 'rb')",
                "write": f"open({str(mine / buried[0])!r}, 'ab')",
                "make": f"os.mkdir({str(morgue / 'x')!r})",
                "rename": "open('r', 'w').close(); os.rename('r', "
                          f"{str(morgue / 'r')!r})",
                "remove": f"os.rmdir({str(morgue)!r})",
            }
            code = "import os\nos.chdir(%r)\n" % str(ws) + "".join(
                f"try:\n    {probe}\n    print({name!r}, 'DONE')\n"
                f"except OSError as e:\n    print({name!r}, type(e).__name__)\n"
                for name, probe in probes.items())
            reply, out = execute(kc, code)
            for name in probes:
                assert f"{name} PermissionError" in stdout_of(out), stdout_of(out)
            assert os.listdir(mine) == buried
            # Closed: the next cell's survey finds nobody holding it and removes it.
            execute(kc, "f.close()")
            code = (f"import tempfile\nwith tempfile.TemporaryFile(dir={str(ws)!r}) as t:\n"
                    "    t.write(b'kept'); t.seek(0); print(t.read())\n")
            reply, out = execute(kc, code)
            assert stdout_of(out) == "b'kept'\n", (out, reply["content"])
            reply, out = execute(kc, "print('next')")
            assert os.listdir(mine) == [], os.listdir(mine)
        assert sorted(p.name for p in ws.iterdir()) == ["r"], list(ws.iterdir())
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def test_kernels_sharing_a_workspace_keep_a_morgue_folder_each():
    """A folder of notebooks is one workspace for several kernels: each keeps its own folder of
    the morgue, locked while it lives, so a start neither removes nor empties a live kernel's
    (nbclient's test_many_parallel_notebooks caught a start removing the morgue another kernel
    had just made: "open(.belljar-morgue) in the jail: No such file"); what a killed kernel left is
    removed by the next start."""
    ws = sandbox_writable_dir("belljar-guard-morgues-")
    morgue = ws / ".belljar-morgue"
    hold = (f"import os\nos.chdir({str(ws)!r})\nf = open(NAME, 'wb')\nos.unlink(NAME)\n"
            "f.write(b'y' * 4096)\nf.flush()\n")
    try:
        morgue.mkdir()
        (morgue / "999999999").mkdir()  # a killed kernel's, unlocked
        (morgue / "999999999" / "3-4").write_bytes(b"x" * 4096)
        with running_kernel(workspace=str(ws), flags=["--workspace-quota", "32M"]) as (km1, kc1):
            execute(kc1, hold.replace("NAME", "'a'"))
            with running_kernel(workspace=str(ws), flags=["--workspace-quota", "32M"]) as (km2, kc2):
                reply, out = execute(kc2, hold.replace("NAME", "'b'"))
                assert reply["content"]["status"] == "ok", (out, reply["content"])
                folders = sorted(os.listdir(morgue))
                assert len(folders) == 2 and "999999999" not in folders, folders
                assert sorted(len(os.listdir(morgue / f)) for f in folders) == [1, 1]
            # The second kernel's folder went with it; the first's is there, still holding.
            (left,) = os.listdir(morgue)
            assert len(os.listdir(morgue / left)) == 1
            reply, out = execute(kc1, "print('still here')")
            assert stdout_of(out) == "still here\n"
        assert not morgue.exists()
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def test_a_session_cannot_leave_a_workspace_the_next_start_refuses():
    """The outside attack on the third pass's fix: 2,060 top-level folders each holding what
    the survey masks, and every later start refused ("more than 2048 secret or protected
    entries at its top level"). Its own route, names 128 folders deep (a mask each), is closed
    by the depth rule, through a rename too; the other, a secret's name (`*.pem`, `id_rsa*`,
    `jupyter/runtime`) in each folder, is refused now. The next start comes up. Control: the
    same shape made by the host's user does stop a start, with the one clear message."""
    ws = sandbox_writable_dir("belljar-guard-cap-")
    code = (f"import os\nos.chdir({str(ws)!r})\nmade = refused = 0\n"
            "for n in range(2060):\n    os.mkdir(f't{n:04d}')\n"
            "    for name in ('k.pem', 'id_rsa', 'jupyter'):\n        try:\n"
            "            if name == 'jupyter':\n"
            "                os.makedirs(f't{n:04d}/jupyter/runtime')\n"
            "            else:\n                open(f't{n:04d}/{name}', 'w').close()\n"
            "            made += 1\n"
            "        except PermissionError:\n            refused += 1\n"
            # the deep route, through a rename: 100 below t0000, 100 more moved under it
            "os.makedirs('/'.join(['t0000'] + ['a'] * 99))\n"
            "os.makedirs('/'.join(['b'] * 100))\n"
            "try:\n    os.rename('b', '/'.join(['t0000'] + ['a'] * 99 + ['b']))\n"
            "    made += 1\nexcept PermissionError:\n    refused += 1\n"
            "print('MADE', made, 'REFUSED', refused)\n")
    try:
        with tempfile.TemporaryFile() as said, running_kernel(
                flags=["--timeout", "120"], workspace=str(ws), stderr=said) as (km, kc):
            reply, out = execute(kc, code, timeout=180)
            assert stdout_of(out) == f"MADE 0 REFUSED {3 * 2060 + 1}\n", (out, reply["content"])
            km.restart_kernel(now=True)
            kc.wait_for_ready(timeout=60)
            reply, out = execute(kc, "print('started')")
            assert stdout_of(out) == "started\n", (out, reply["content"])
            # Control: the host's user makes the shape the sandbox could not.
            for n in range(2060):
                (ws / f"t{n:04d}" / "k.pem").write_text("x")
            km.restart_kernel(now=True)
            with pytest.raises(RuntimeError, match="died"):
                kc.wait_for_ready(timeout=60)
            said.seek(0)
            assert b"more than 2048 secret or protected entries at its top level" in said.read()
    finally:
        shutil.rmtree(ws, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                    reason="pid namespaces of one's own need root here (unshare -p)")
def test_kernels_in_other_pid_namespaces_share_a_workspace():
    """The outside attack on round three: wardens in other pid namespaces (two pods on one
    volume) have the same small pids, and a morgue folder named by the pid, locked with a
    waiting flock, held the second kernel's start until the first session ended. A folder's
    name has a random part now, and its lock never waits."""
    ws = sandbox_writable_dir("belljar-guard-pidns-")
    run = ["unshare", "-pf", "--mount-proc", BELLJAR, "run", "--python", PYTHON,
           "--workspace", str(ws), "--timeout", "60s", "-c"]
    first = subprocess.Popen([*run, "import time\nprint('first', flush=True)\ntime.sleep(50)"],
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert first.stdout.readline().strip() == "first"  # its morgue folder is made and held
        second = subprocess.run([*run, "print('second ran')"], capture_output=True, text=True,
                                timeout=30)
        assert second.returncode == 0 and second.stdout.strip() == "second ran", second.stderr
        assert len(os.listdir(ws / ".belljar-morgue")) == 1  # the first's, still held
    finally:
        # unshare forwards no signal: the whole session of the first kernel is ended.
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
        first.stdout.close()
        shutil.rmtree(ws, ignore_errors=True)
