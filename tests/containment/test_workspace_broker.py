"""The workspace broker: every change to a name in the workspace is decided before it happens, by
shape (no dot-path, nothing in a Python environment, nothing --protect names), so restructuring
the tree walks around nothing. Each test is an attack from the second outside red-team pass,
in strict and in degraded mode (no namespaces, as in a pod), with a control that shows the probe
is real where one can be run.

Files the host's user made are left writable to the sandbox's user (0666/0777) so that only the
broker stands between the cell and them: when the tests run as root the sandbox is `nobody`."""
import ast
import contextlib
import errno
import fcntl
import json
import os
import pathlib
import platform
import queue
import re
import shutil
import struct
import subprocess
import time
import zipfile

import pytest

from belljar_testing import (
    FRONTENDS,
    NO_NAMESPACES,
    PYTHON,
    SOURCE,
    collect,
    execute,
    running_kernel,
    sandbox_writable_dir,
    stderr_of,
    stdout_of,
    wait_for_stream,
)

GIT = shutil.which("git") or "/usr/bin/git"
MODES = {"strict": ([], ["--isolation", "strict"]),
         "degraded": ([NO_NAMESPACES], ["--isolation", "degraded"])}


def attempt_prelude(outcome):
    """Cell code defining attempt(name, action): records 'done', or the OSError as `outcome`
    (an expression of e) says."""
    return f"""
import os, json, pathlib, errno
results = {{}}
def attempt(name, action):
    try:
        action()
        results[name] = 'done'
    except OSError as e:
        results[name] = {outcome}
"""


ATTEMPT = attempt_prelude("type(e).__name__")


@contextlib.contextmanager
def fresh_workspace(prefix):
    """A new workspace the sandbox may write, removed afterwards."""
    ws = sandbox_writable_dir(prefix)
    try:
        yield ws
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def kernel(mode, ws, flags=(), env=None):
    wrapper, isolation = MODES[mode]
    return running_kernel(flags=["--timeout", "30", *isolation, *flags], workspace=str(ws),
                          wrapper=wrapper, env=env)


def results_of(kc, code):
    reply, out = execute(kc, ATTEMPT + code + "\nprint(json.dumps(results))\n")
    assert reply["content"]["status"] == "ok", [m["content"].get("evalue") for m in out
                                                if m["msg_type"] == "error"] or out
    return json.loads(stdout_of(out).strip().splitlines()[-1]), stderr_of(out)


def open_to_all(root):
    """What the host's user made, writable by anyone: only the broker stands in the way."""
    for dirpath, _, filenames in os.walk(root):
        os.chmod(dirpath, 0o777)
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o666)


def home_workspace():
    home = sandbox_writable_dir("belljar-broker-home-")
    for folder in (".local/bin", ".local/lib/python3.11/site-packages", ".config/autostart",
                   ".local/share/jupyter/kernels/belljar", ".jupyter/custom",
                   ".ipython/profile_default/startup", "proj"):
        (home / folder).mkdir(parents=True, exist_ok=True)
    (home / ".bashrc").write_text("# mine\n")
    spec = {"argv": ["belljar", "kernel", "-f", "{connection_file}"], "display_name": "belljar"}
    (home / ".local/share/jupyter/kernels/belljar/kernel.json").write_text(json.dumps(spec))
    open_to_all(home)
    return home


PLANTS = {
    "gitconfig": (".gitconfig", "[core]\n\tfsmonitor = touch {marker}\n"),
    "user site .pth": (".local/lib/python3.11/site-packages/evil.pth",
                       "import os; os.system('touch {marker}')\n"),
    "ipython start-up": (".ipython/profile_default/startup/00-evil.py", "open('{marker}', 'w')\n"),
    "jupyter custom.js": (".jupyter/custom/custom.js", "alert(1)\n"),
    "jupyter server config": (".jupyter/jupyter_server_config.py", "open('{marker}', 'w')\n"),
    "kernelspec rewritten": (".local/share/jupyter/kernels/belljar/kernel.json",
                             '{{"argv": ["sh", "-c", "touch {marker}"]}}'),
    "kernelspec added": (".local/share/jupyter/kernels/evil/kernel.json", "{{}}"),
    "local bin": (".local/bin/ls", "#!/bin/sh\ntouch {marker}\n"),
    "autostart": (".config/autostart/evil.desktop", "[Desktop Entry]\nExec=touch {marker}\n"),
    "bashrc": (".bashrc", "touch {marker}\n"),
    # Debian's ~/.profile puts ~/bin first on a login shell's PATH (the outside attack on round
    # three): protected when the workspace is the kernel's $HOME.
    "home bin": ("bin/git", "#!/bin/sh\ntouch {marker}\n"),
}


def plant_cell(home, marker):
    lines = []
    for name, (rel, text) in PLANTS.items():
        path = home / rel
        lines.append(f"attempt({name!r}, lambda: (os.makedirs({str(path.parent)!r}, exist_ok=True), "
                     f"open({str(path)!r}, 'w').write({text.format(marker=marker)!r})))")
    return "\n".join(lines)


@pytest.mark.parametrize("mode", MODES)
def test_a_home_directory_as_the_workspace_gets_no_start_up_file(mode):
    home = home_workspace()
    marker = home.parent / (home.name + "-PWNED")
    before = {p: p.read_bytes() for p in home.rglob("*") if p.is_file()}
    try:
        with kernel(mode, home, env={"HOME": str(home)}) as (km, kc):
            got, notices = results_of(kc, plant_cell(home, marker))
            assert got == {name: "PermissionError" for name in PLANTS}, got
            # Each refusal is said in the cell, once per path.
            for rel in (".gitconfig", ".local/bin", ".bashrc"):
                assert f"the sandbox may not change {rel}" in notices, notices
            # Ordinary work in the same home is unharmed.
            got, _ = results_of(kc, f"attempt('notes', lambda: open({str(home / 'proj/notes.txt')!r}, 'w').write('x'))")
            assert got == {"notes": "done"}
        assert {p: p.read_bytes() for p in home.rglob("*") if p.is_file() and p.name != "notes.txt"} == before
        # The host's next git, python3 and a login shell find nothing planted.
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home)}
        subprocess.run([GIT, "init", "-q", str(home / "proj")], env=env, check=True)
        subprocess.run([GIT, "-C", str(home / "proj"), "status"], env=env, capture_output=True)
        subprocess.run([PYTHON, "-c", "pass"], env=env, check=True)
        subprocess.run(["sh", "-c", "git --version"], env={**env, "PATH": f"{home}/bin:/usr/bin:/bin"},
                       capture_output=True)
        assert not marker.exists()
    finally:
        shutil.rmtree(home, ignore_errors=True)
        marker.unlink(missing_ok=True)


@pytest.mark.parametrize("mode", MODES)
def test_no_bin_is_made_in_a_home_whatever_the_workspace(mode):
    """The outside attack on round three: ~/bin was protected only when the workspace was the
    kernel's own $HOME, so a workspace holding a home (or another user's home as the workspace)
    took a bin/git that the home's next login shell ran. A home is known by its shape now: a
    folder holding a shell's start-up file. Control: a login shell there runs what lands in bin."""
    with fresh_workspace("belljar-broker-homes-") as ws:
        for home in ("alice", "bob"):
            (ws / home).mkdir()
            (ws / home / ".profile").write_text('PATH="$HOME/bin:$PATH"\n')
        (ws / "bob" / "bin").mkdir()
        (ws / "proj").mkdir()
        open_to_all(ws)
        plants = (f"os.chdir({str(ws)!r})\n"
                  "attempt('bin in a home below', lambda: os.mkdir('alice/bin'))\n"
                  "attempt('git in a home bin', lambda: open('bob/bin/git', 'w').write('x'))\n"
                  "attempt('bin renamed into a home', lambda: (os.mkdir('proj/bin'), "
                  "os.rename('proj/bin', 'alice/bin')))\n"
                  "attempt('a project bin', lambda: open('proj/bin/run.sh', 'w').write('x'))\n")
        with kernel(mode, ws) as (km, kc):
            got, notices = results_of(kc, plants)
            assert got == {"bin in a home below": "PermissionError", "git in a home bin": "PermissionError",
                           "bin renamed into a home": "PermissionError", "a project bin": "done"}, got
            assert "a home's bin" in notices, notices
        # Another user's home as the workspace, the kernel's $HOME elsewhere.
        with kernel(mode, ws / "alice", env={"HOME": str(ws / "proj")}) as (km, kc):
            got, _ = results_of(kc, f"attempt('bin', lambda: os.mkdir({str(ws / 'alice' / 'bin')!r}))")
            assert got == {"bin": "PermissionError"}, got
        assert not (ws / "alice" / "bin").exists() and list((ws / "bob" / "bin").iterdir()) == []


def test_control_a_login_shell_runs_what_is_in_its_homes_bin():
    with fresh_workspace("belljar-broker-homes-control-") as ws:
        home = ws / "alice"
        (home / "bin").mkdir(parents=True)
        (home / ".profile").write_text('PATH="$HOME/bin:$PATH"\n')
        (home / "bin" / "git").write_text("#!/bin/sh\necho planted-git\n")
        (home / "bin" / "git").chmod(0o755)
        done = subprocess.run(["bash", "-l", "-c", "git --version"], capture_output=True, text=True,
                              env={"HOME": str(home), "PATH": "/usr/bin:/bin"})
        assert done.stdout.strip() == "planted-git", done


def test_control_with_the_gitconfig_opened_the_host_runs_what_was_planted():
    # The probe above is real: with --writable .gitconfig the plant lands and host git runs it.
    home = home_workspace()
    marker = home.parent / (home.name + "-PWNED")
    try:
        with kernel("strict", home, ["--writable", ".gitconfig"]) as (km, kc):
            path = home / ".gitconfig"
            got, _ = results_of(kc, f"attempt('gitconfig', lambda: open({str(path)!r}, 'w')"
                                    f".write({PLANTS['gitconfig'][1].format(marker=marker)!r}))")
            assert got == {"gitconfig": "done"}
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home)}
        subprocess.run([GIT, "init", "-q", str(home / "proj")], env=env, check=True)
        subprocess.run([GIT, "-C", str(home / "proj"), "status"], env=env, capture_output=True)
        assert marker.exists(), "the control did not run: the test above proves nothing"
    finally:
        shutil.rmtree(home, ignore_errors=True)
        marker.unlink(missing_ok=True)


@pytest.mark.parametrize("mode", MODES)
def test_a_symlinked_or_renamed_parent_leads_only_where_the_rule_allows(mode):
    home = home_workspace()
    try:
        with kernel(mode, home) as (km, kc):
            code = f"""
os.chdir({str(home)!r})
os.mkdir('plain')
attempt('rename .config away', lambda: os.rename('.config', 'cfg-old'))
attempt('rename .local away', lambda: os.rename('.local', 'lcl-old'))
attempt('link named like .config', lambda: os.symlink('plain', '.config2'))
attempt('link to .local', lambda: os.symlink('.local', 'lcl'))
attempt('link to an ordinary folder', lambda: os.symlink('plain', 'also-plain'))
attempt('write through the ordinary link', lambda: open('also-plain/x.txt', 'w').write('x'))
attempt('link out of the workspace', lambda: os.symlink('/tmp', 'tmp-link'))
attempt('link to the runtime dir', lambda: os.symlink('.local/share/jupyter/runtime', 'rt'))
"""
            got, notices = results_of(kc, code)
        assert got == {"rename .config away": "PermissionError",
                       "rename .local away": "PermissionError",
                       "link named like .config": "PermissionError",
                       "link to .local": "PermissionError",
                       "link to an ordinary folder": "done",
                       "write through the ordinary link": "done",
                       "link out of the workspace": "PermissionError",
                       "link to the runtime dir": "PermissionError"}, got
        assert (home / ".config").is_dir() and not (home / ".config").is_symlink()
        assert (home / ".local").is_dir() and not (home / ".local").is_symlink()
        assert (home / "plain" / "x.txt").read_text() == "x"
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.parametrize("mode", MODES)
def test_a_symlink_the_host_made_does_not_carry_a_write_past_the_rule(mode):
    # The parent the red team swapped: a symlink to a dot-folder, here made by the host (the
    # sandbox may no longer make it). A write through it is judged where it lands.
    home = home_workspace()
    (home / "cfg").symlink_to(".config")
    (home / "bin").symlink_to(home / ".local" / "bin")
    try:
        with kernel(mode, home) as (km, kc):
            code = f"""
os.chdir({str(home)!r})
attempt('autostart through cfg', lambda: open('cfg/autostart/evil.desktop', 'w').write('x'))
attempt('ls through bin', lambda: open('bin/ls', 'w').write('x'))
"""
            got, notices = results_of(kc, code)
        assert got == {"autostart through cfg": "PermissionError", "ls through bin": "PermissionError"}
        assert "the sandbox may not change .config/autostart/evil.desktop" in notices, notices
        assert not (home / ".config/autostart/evil.desktop").exists()
        assert not (home / ".local/bin/ls").exists()
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.parametrize("mode", MODES)
def test_a_folder_the_host_moves_is_judged_where_it_is_now(mode):
    # The broker keeps the folders it walked to (a cwd, a folder files are made in) so as not to
    # walk from the root for each file; the host may move one in the middle of a cell. What the
    # cell writes there next is judged by where the folder is now, not where it was.
    with fresh_workspace("belljar-broker-moved-") as ws:
        (ws / "cwd").mkdir()
        (ws / "made").mkdir()
        os.mkfifo(ws / "go")
        open_to_all(ws)
        with kernel(mode, ws) as (km, kc):
            msg_id = kc.execute(ATTEMPT + f"""
os.chdir({str(ws / "cwd")!r})
for n in range(3):
    open(f'rel{{n}}', 'w').close()
    open({str(ws / "made")!r} + f'/abs{{n}}', 'w').close()
print('ready', flush=True)
open({str(ws / "go")!r}).read()  # until the host has moved the folders
attempt('relative, in the cwd the host moved', lambda: open('config', 'w').write('x'))
attempt('absolute, in the folder made again', lambda: open({str(ws / "made")!r} + '/config', 'w').write('x'))
print(json.dumps(results))
""")
            assert wait_for_stream(kc, msg_id, "ready") is not None
            (ws / "cwd").rename(ws / ".git")
            (ws / "made").rename(ws / ".hidden")
            (ws / "made").mkdir()
            os.chmod(ws / "made", 0o777)
            with open(ws / "go", "w") as go:
                go.write("go")
            reply, out = collect(kc, msg_id)
        assert reply["content"]["status"] == "ok", [m["content"].get("evalue") for m in out
                                                if m["msg_type"] == "error"] or out
        got = json.loads(stdout_of(out).strip().splitlines()[-1])
        assert got == {"relative, in the cwd the host moved": "PermissionError",
                       "absolute, in the folder made again": "done"}, got
        assert "the sandbox may not change .git/config" in stderr_of(out), out
        assert not (ws / ".git" / "config").exists()
        assert not (ws / ".hidden" / "config").exists()
        assert (ws / "made" / "config").read_text() == "x"


def test_a_cwd_a_guard_was_mounted_over_since_is_judged_where_it_is_now():
    """The same move, once the survey has mounted its guard over the .git the host made: the
    cell's cwd is then the folder under the guard, which the path no longer leads to. It is
    judged where it is now all the same (it answered ENOENT, one run in twenty on CI, when the
    survey won the race against the cell's next write)."""
    with fresh_workspace("belljar-broker-guarded-") as ws:
        (ws / "cwd").mkdir()
        os.mkfifo(ws / "go")
        open_to_all(ws)
        with kernel("strict", ws) as (km, kc):
            msg_id = kc.execute(ATTEMPT + f"""
import time
os.chdir({str(ws / "cwd")!r})
open('rel', 'w').close()
print('ready', flush=True)
open({str(ws / "go")!r}).read()  # until the host has moved the folder
guarded = {str(ws / ".git")!r}
deadline = time.monotonic() + 20
def guard_mounted():
    with open('/proc/self/mountinfo') as f:
        return any(line.split()[4] == guarded for line in f)
while not guard_mounted() and time.monotonic() < deadline:  # the next survey mounts it
    time.sleep(0.05)
results['guard mounted'] = guard_mounted()
attempt('relative, in the cwd under the guard', lambda: open('config', 'w').write('x'))
print(json.dumps(results))
""")
            assert wait_for_stream(kc, msg_id, "ready") is not None
            (ws / "cwd").rename(ws / ".git")
            with open(ws / "go", "w") as go:
                go.write("go")
            reply, out = collect(kc, msg_id)
        assert reply["content"]["status"] == "ok", out
        got = json.loads(stdout_of(out).strip().splitlines()[-1])
        assert got == {"guard mounted": True,
                       "relative, in the cwd under the guard": "PermissionError"}, got
        assert "the sandbox may not change .git/config" in stderr_of(out), out
        assert not (ws / ".git" / "config").exists()


@pytest.mark.parametrize("mode", MODES)
def test_a_protected_path_cannot_be_moved_away_with_its_parent(mode):
    ws = sandbox_writable_dir("belljar-broker-protect-")
    (ws / "tools").mkdir()
    (ws / "tools" / "deploy.sh").write_text("echo deploy\n")
    (ws / "a" / "b").mkdir(parents=True)
    (ws / "a" / "b" / "c.sh").write_text("echo c\n")
    (ws / "outer" / "repo" / ".git").mkdir(parents=True)
    (ws / "outer" / "repo" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / "ordinary" / "inner").mkdir(parents=True)
    (ws / "box" / "locked").mkdir(parents=True)
    open_to_all(ws)
    # What the broker cannot look into may hold anything. (Degraded mode, which cannot mask,
    # refuses to start on a workspace holding a folder the kernel can't read: strict only.)
    locked = mode == "strict"
    if locked:
        os.chmod(ws / "box" / "locked", 0)
    flags = ["--protect", "tools/deploy.sh", "--protect", "a/b/c.sh"]
    try:
        with kernel(mode, ws, flags) as (km, kc):
            code = f"""
os.chdir({str(ws)!r})
attempt('tools', lambda: os.rename('tools', 'tools-old'))
attempt('a', lambda: os.rename('a', 'a-old'))
attempt('a/b', lambda: os.rename('a/b', 'a/b-old'))
attempt('outer (a nested .git)', lambda: os.rename('outer', 'outer-old'))
attempt('outer/repo', lambda: os.rename('outer/repo', 'elsewhere'))
attempt('replace deploy.sh', lambda: os.replace('ordinary/inner', 'tools/deploy.sh'))
attempt('write deploy.sh', lambda: open('tools/deploy.sh', 'w').write('evil'))
attempt('ordinary', lambda: os.rename('ordinary', 'moved'))
attempt('box (an unreadable folder inside)', lambda: os.rename('box', 'box-old'))
"""
            got, notices = results_of(kc, code)
        assert got == {"tools": "PermissionError", "a": "PermissionError", "a/b": "PermissionError",
                       "outer (a nested .git)": "PermissionError", "outer/repo": "PermissionError",
                       "replace deploy.sh": "PermissionError", "write deploy.sh": "PermissionError",
                       "ordinary": "done",
                       "box (an unreadable folder inside)": "PermissionError" if locked else "done"}, got
        if locked:
            assert "it holds a folder the broker cannot read" in notices, notices
        assert (ws / "tools" / "deploy.sh").read_text() == "echo deploy\n"
        assert (ws / "a" / "b" / "c.sh").read_text() == "echo c\n"
        assert (ws / "outer" / "repo" / ".git" / "HEAD").exists()
        assert (ws / "moved" / "inner").is_dir()
    finally:
        if locked:
            os.chmod(ws / "box" / "locked", 0o700)
        shutil.rmtree(ws, ignore_errors=True)


@pytest.mark.parametrize("mode", MODES)
def test_no_hard_link_and_no_empty_secret_to_be_filled_later(mode):
    with fresh_workspace("belljar-broker-links-") as ws:
        (ws / "data.csv").write_text("a,b\n")
        open_to_all(ws)
        with kernel(mode, ws) as (km, kc):
            code = f"""
os.chdir({str(ws)!r})
attempt('empty .env', lambda: open('.env', 'w').close())
attempt('.aws/credentials', lambda: (os.makedirs('.aws'), open('.aws/credentials', 'w').close()))
attempt('hard link of a file', lambda: os.link('data.csv', 'twin.csv'))
attempt('hard link in tmp', lambda: (open('/tmp/x', 'w').close(), os.link('/tmp/x', '/tmp/y')))
"""
            got, _ = results_of(kc, code)
        assert got == {"empty .env": "PermissionError", ".aws/credentials": "PermissionError",
                       "hard link of a file": "PermissionError", "hard link in tmp": "PermissionError"}, got
        assert sorted(p.name for p in ws.iterdir()) == ["data.csv"]


@pytest.mark.parametrize("mode", MODES)
def test_a_folder_cannot_be_made_unreadable_to_hide_its_bytes(mode):
    with fresh_workspace("belljar-broker-quota-") as ws:
        with kernel(mode, ws) as (km, kc):
            code = f"""
os.chdir({str(ws)!r})
os.mkdir('hide', 0o300)
keep = os.open('hide', os.O_PATH)
attempt('chmod 0300', lambda: os.chmod('hide', 0o300))
attempt('fchmod 0', lambda: os.fchmod(os.open('hide', os.O_RDONLY), 0))
attempt('chmod 0700', lambda: os.chmod('hide', 0o700))
attempt('unnamed file', lambda: os.open('hide', os.O_TMPFILE | os.O_WRONLY, 0o600))
"""
            got, notices = results_of(kc, code)
        assert got == {"chmod 0300": "PermissionError", "fchmod 0": "PermissionError",
                       "chmod 0700": "done", "unnamed file": "OSError"}, got
        assert "a folder its owner could not read" in notices
        # made readable to its owner whatever mode mkdir asked for
        assert (ws / "hide").stat().st_mode & 0o500 == 0o500


def test_the_quota_counts_a_folder_the_session_tried_to_hide():
    # The red team's shape: an unreadable folder (now refused) and 801 MiB under a 32 MiB
    # quota. The quota stops the cell within a survey period or two of the burst.
    with fresh_workspace("belljar-broker-quota-fill-") as ws:
        quota = 32 << 20
        code = (f"import os\nos.chdir({str(ws)!r})\nos.mkdir('hide', 0o300)\nkeep = os.open('hide', os.O_PATH)\n"
                "try:\n    os.chmod('hide', 0o300)\nexcept OSError:\n    pass\n"
                "block = b'x' * (1 << 20)\n"
                "for n in range(8):\n"
                "    with open(f'hide/big{n}', 'wb') as f:\n"
                "        for _ in range(100): f.write(block)\n")
        with kernel("strict", ws, ["--workspace-quota", "32M", "--file-size", "100M"]) as (km, kc):
            reply, out = execute(kc, code, timeout=120)
            used = sum(f.stat().st_blocks * 512 for f in (ws / "hide").iterdir())
            print(f"workspace after the burst: {used >> 20} MiB (quota {quota >> 20} MiB)")
            assert reply["content"]["status"] == "error"
            assert reply["content"]["ename"] == "WorkspaceQuotaError", reply["content"]
            assert used < quota + (384 << 20), used


def small_wheel(directory):
    """A pure-Python wheel, made by hand (no index, no build step)."""
    wheel = directory / "tinypkg-1.0-py3-none-any.whl"
    files = {"tinypkg/__init__.py": "VALUE = 42\n",
             "tinypkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
             "tinypkg-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: belljar-test\n"
                                            "Root-Is-Purelib: true\nTag: py3-none-any\n"}
    files["tinypkg-1.0.dist-info/RECORD"] = "".join(f"{name},,\n" for name in files) + \
        "tinypkg-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    os.chmod(wheel, 0o644)
    return wheel


@pytest.mark.parametrize("mode", MODES)
def test_ordinary_work_is_unharmed(mode):
    with fresh_workspace("belljar-broker-work-") as ws:
        wheel = small_wheel(ws)
        with kernel(mode, ws, ["--writable", ".cache/myproject"]) as (km, kc):
            code = f"""
import zipfile, io, shutil, tempfile
os.chdir({str(ws)!r})
import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt
attempt('savefig', lambda: (plt.plot([1, 2]), plt.savefig('out/fig.png') if os.makedirs('out', exist_ok=True) is None else None))
import pandas
attempt('to_csv', lambda: pandas.DataFrame({{'a': [1, 2]}}).to_csv('out/frame.csv'))
buf = io.BytesIO()
with zipfile.ZipFile(buf, 'w') as z:
    for n in range(50):
        z.writestr(f'pkg/sub{{n % 5}}/file{{n}}.txt', 'x' * n)
attempt('extractall', lambda: zipfile.ZipFile(buf).extractall('unzipped'))
attempt('rmtree', lambda: shutil.rmtree('unzipped'))
attempt('tempfile in workspace', lambda: tempfile.TemporaryFile(dir='.').write(b'x'))
attempt('atomic replace', lambda: (open('cfg.tmp', 'w').write('v2'), os.replace('cfg.tmp', 'cfg.json')))
attempt('opened path', lambda: (os.makedirs('.cache/myproject/deep'), open('.cache/myproject/deep/x', 'w').write('x')))
import subprocess
def shell():
    done = subprocess.run('echo hi > shell.txt; echo err > /dev/stderr', shell=True,
                          capture_output=True, text=True)
    if (done.returncode, done.stderr) != (0, 'err\\n'):
        raise OSError(done.stderr)
attempt('shell redirects', shell)
def pip_target():
    done = subprocess.run([sys.executable, '-m', 'pip', 'install', '--quiet', '--no-index',
                           '--no-deps', '--no-cache-dir', '--target', 'pkgs', {str(wheel)!r}],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise OSError(done.stderr[-2000:])
    sys.path.insert(0, 'pkgs')
    import tinypkg
    assert tinypkg.VALUE == 42
import sys
attempt('pip install --target', pip_target)
"""
            got, _ = results_of(kc, code)
        assert set(got.values()) == {"done"}, got
        assert (ws / "out" / "fig.png").stat().st_size > 0
        assert (ws / "cfg.json").read_text() == "v2"
        assert (ws / ".cache" / "myproject" / "deep" / "x").read_text() == "x"
        assert not (ws / "unzipped").exists()


@pytest.mark.parametrize("mode", MODES)
def test_files_get_the_modes_the_cells_umask_gives(mode):
    # The broker makes the files, so it applies the caller's umask: after a change, and in a
    # child process with a umask of its own.
    with fresh_workspace("belljar-broker-umask-") as ws:
        with kernel(mode, ws) as (km, kc):
            code = f"""
import subprocess
os.chdir({str(ws)!r})
open('before', 'w').close()
old = os.umask(0o077)
open('private', 'w').close()
os.mkdir('private-dir')
os.umask(old)
open('after', 'w').close()
subprocess.run(['sh', '-c', 'umask 027; touch child; mkdir child-dir'], check=True)
"""
            results_of(kc, code)
        modes = {p.name: oct(p.stat().st_mode & 0o777) for p in ws.iterdir()}
        assert modes == {"before": "0o644", "private": "0o600", "private-dir": "0o700",
                         "after": "0o644", "child": "0o640", "child-dir": "0o750"}, modes


@pytest.mark.parametrize("mode", MODES)
def test_a_unix_socket_is_a_name_like_any_other(mode):
    # bind() makes a name too; its address is in the cell's memory, so the broker binds the
    # cell's own socket itself.
    with fresh_workspace("belljar-broker-bind-") as ws:
        with kernel(mode, ws) as (km, kc):
            code = f"""
import socket
os.chdir({str(ws)!r})
def serve_at(path):
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()
    client = socket.socket(socket.AF_UNIX)
    client.connect(path)
    client.close()
    server.close()
attempt('.git.sock', lambda: serve_at('.git.sock'))
attempt('.local/bin/x', lambda: serve_at({str(ws / '.local/bin/x')!r}))
attempt('plain.sock', lambda: serve_at('plain.sock'))
import tempfile
attempt('/tmp socket', lambda: serve_at(tempfile.gettempdir() + '/belljar-bind-probe.sock'))
attempt('abstract', lambda: socket.socket(socket.AF_UNIX).bind('\\0belljar-bind-probe'))
attempt('resolver', lambda: socket.getaddrinfo('localhost', 80))
"""
            got, notices = results_of(kc, code)
        assert got == {".git.sock": "PermissionError", ".local/bin/x": "FileNotFoundError",
                       "plain.sock": "done", "/tmp socket": "done", "abstract": "done",
                       "resolver": "done"}, got
        assert "the sandbox may not change .git.sock" in notices, notices
        assert sorted(p.name for p in ws.iterdir()) == ["plain.sock"]


def test_tcp_binds_are_made_for_the_cell_and_low_ports_refused():
    with fresh_workspace("belljar-broker-tcp-") as ws:
        with kernel("strict", ws) as (km, kc):
            code = """
import socket
def serve_tcp(port):
    server = socket.socket()
    server.bind(('127.0.0.1', port))
    server.listen()
    client = socket.create_connection(server.getsockname())
    client.close()
    server.close()
attempt('port 0', lambda: serve_tcp(0))
attempt('port 80', lambda: serve_tcp(80))
"""
            got, _ = results_of(kc, code)
        assert got == {"port 0": "done", "port 80": "PermissionError"}, got


# The caller's own descriptors opened again (/proc/self/fd/N, /dev/fd/N, /dev/stderr): the
# third pass swapped fd N between a pipe and a read-only descriptor of ~/.gitconfig from a
# second thread while the first asked the broker to reopen it for writing; the broker checked
# one object and opened another.
RACE_TRIES = 10000  # the old broker lost 1 to 3 in a thousand

SWAP = """
import stat, sys, threading
sys.setswitchinterval(1e-4)  # the two threads take turns often, as two native threads would
def swapping(held, pipe_end, number, opening, tries):
    # One thread puts `held` and `pipe_end` at `number` in turn; this one opens it `tries` times.
    os.dup2(pipe_end, number)
    done = threading.Event()
    def swap():
        while not done.is_set():
            os.dup2(held, number)
            os.dup2(pipe_end, number)
    swapper = threading.Thread(target=swap)
    swapper.start()
    seen = {}
    try:
        for _ in range(tries):
            try:
                fd = os.open(f'/proc/self/fd/{number}', opening)
            except OSError as e:
                seen[e.strerror] = seen.get(e.strerror, 0) + 1
                continue
            kind = 'file' if stat.S_ISREG(os.fstat(fd).st_mode) else 'pipe'
            if kind == 'file' and opening & (os.O_WRONLY | os.O_RDWR):
                os.write(fd, b'[core]\\n\\tfsmonitor = touch /tmp/pwned\\n')
            seen[kind] = seen.get(kind, 0) + 1
            os.close(fd)
    finally:
        done.set()
        swapper.join()
    return seen
"""


def race_cell(target, opening, tries):
    return "\n".join([
        SWAP, "r, w = os.pipe()",
        f"results['race'] = swapping(os.open({str(target)!r}, os.O_RDONLY), r, 200, {opening}, {tries})"])


def race_targets(mode, home):
    """Files the sandbox may read and never write: dot-files of a home as the workspace and, in
    degraded mode, a file outside every writable root (a .pth in the user's own venv)."""
    targets = [home / ".gitconfig", home / ".local/share/jupyter/kernels/belljar/kernel.json"]
    if mode == "degraded":
        targets.append(home.parent / (home.name + "-venv") / "lib/python3.11/site-packages/x.pth")
    return targets


@contextlib.contextmanager
def race_home(mode):
    home = home_workspace()
    (home / ".gitconfig").write_text("[user]\n\tname = me\n")
    venv = home.parent / (home.name + "-venv")
    (venv / "lib/python3.11/site-packages").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "lib/python3.11/site-packages/x.pth").write_text("# mine\n")
    open_to_all(home)
    open_to_all(venv)
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(venv, ignore_errors=True)


@pytest.mark.parametrize("mode", MODES)
def test_a_descriptor_swapped_under_the_reopen_never_comes_back_writable(mode):
    with race_home(mode) as home:
        targets = race_targets(mode, home)
        before = {t: t.read_bytes() for t in targets}
        venv = home.parent / (home.name + "-venv")
        with kernel(mode, home, ["--ro", str(venv)]) as (km, kc):
            for target in targets:
                # The control: a read-only reopen (the kernel's own, never brokered) sees both
                # objects at the number, so the swap is live where the opener looks.
                seen, _ = results_of(kc, race_cell(target, "os.O_RDONLY", RACE_TRIES))
                assert seen["race"].get("file", 0) > 0 and seen["race"].get("pipe", 0) > 0, seen
                # The attack: the same swap while the broker reopens the number for writing.
                got, _ = results_of(kc, race_cell(target, "os.O_WRONLY | os.O_NONBLOCK", RACE_TRIES))
                outcome = got["race"]
                assert outcome.get("file", 0) == 0, (str(target), outcome)
                # Both sides of the swap were met: the pipe reopened, the file refused.
                assert outcome.get("pipe", 0) > 0, (str(target), outcome)
                assert outcome.get("Permission denied", 0) > 0, (str(target), outcome)
        for target in targets:
            assert target.read_bytes() == before[target], target


REOPEN = """
import errno, socket
def reopened(name, make, check=None):
    # What make() opens, opened again for writing by its /proc/self/fd name, as `> /dev/fd/N`
    # would (an object the sandbox cannot hold at all says so).
    try:
        fd = make()
    except OSError as e:
        results[name] = 'cannot hold: ' + errno.errorcode[e.errno]
        return
    try:
        again = os.open(f'/proc/self/fd/{fd}', os.O_WRONLY | os.O_NONBLOCK)
    except OSError as e:
        results[name] = errno.errorcode[e.errno]
        return
    results[name] = 'done' if check is None or check(again) else 'wrong object'
    os.close(again)
"""


@pytest.mark.parametrize("mode", MODES)
def test_the_reopen_admits_only_the_objects_it_exists_for(mode):
    # Every kind of object a descriptor can hold, reopened for writing through /proc/self/fd:
    # the written list (Reopenable in workspace_broker.cpp) passes, everything else is refused.
    with fresh_workspace("belljar-broker-reopen-") as ws:
        (ws / "notes.txt").write_text("mine\n")
        (ws / ".gitconfig").write_text("[user]\n")
        (ws / "folder").mkdir()
        (ws / "link").symlink_to("notes.txt")
        os.mkfifo(ws / "plain.fifo")
        os.mkfifo(ws / ".hidden.fifo")
        outside = ws.parent / (ws.name + "-ro")
        outside.mkdir()
        os.mkfifo(outside / "host.fifo")
        open_to_all(ws)
        open_to_all(outside)
        try:
            with kernel(mode, ws, ["--ro", str(outside)]) as (km, kc):
                code = REOPEN + f"""
os.chdir({str(ws)!r})
r, w = os.pipe()
reopened('pipe', lambda: r, lambda fd: os.write(fd, b'x') == 1 and os.read(r, 1) == b'x')
reopened('/dev/null', lambda: os.open('/dev/null', os.O_RDONLY))
reopened('fifo', lambda: os.open('plain.fifo', os.O_RDONLY | os.O_NONBLOCK))
reopened('socket', lambda: socket.socketpair()[0].detach())
reopened('file', lambda: os.open('notes.txt', os.O_RDONLY))
reopened('dot-file', lambda: os.open('.gitconfig', os.O_RDONLY))
reopened('folder', lambda: os.open('folder', os.O_RDONLY))
reopened('link', lambda: os.open('link', os.O_PATH | os.O_NOFOLLOW))
reopened('eventfd', lambda: os.eventfd(0))
import select
poller = select.epoll()
reopened('epoll', poller.fileno)
reopened('dot-fifo', lambda: os.open('.hidden.fifo', os.O_RDONLY | os.O_NONBLOCK))
reopened('fifo outside', lambda: os.open({str(outside / 'host.fifo')!r}, os.O_RDONLY | os.O_NONBLOCK))
attempt('by pid', lambda: os.open(f'/proc/{{os.getpid()}}/fd/{{r}}', os.O_WRONLY))
if os.path.exists('/dev/ptmx'):
    reopened('terminal outside', lambda: os.open('/dev/ptmx', os.O_RDONLY | os.O_NOCTTY))
"""
                got, notices = results_of(kc, code)
            admitted = {name: "done" for name in ("pipe", "/dev/null", "fifo")}
            refused = {name: "EACCES" for name in
                       ("file", "dot-file", "folder", "link", "eventfd", "epoll", "dot-fifo")}
            expected = {**admitted, **refused, "socket": "ENXIO", "by pid": "PermissionError",
                        # a read-only mount says so; the host's /tmp in degraded mode is outside
                        # every writable root Landlock grants
                        "fifo outside": "EROFS" if mode == "strict" else "EACCES"}
            if mode == "degraded":
                expected["terminal outside"] = "EACCES"
            assert got == expected, got
            assert "the sandbox may not change .hidden.fifo" in notices, notices
        finally:
            shutil.rmtree(outside, ignore_errors=True)


# The broker's CPU is the session's: a daemon thread between cells asking it to walk long
# a/../a/.. paths kept the warden's broker thread at 22-26 s of CPU per 30 s, charged to no one.
def process_tree(pid):
    found, pending = [], [pid]
    while pending:
        parent = pending.pop()
        found.append(parent)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{parent}/task"):
                with open(f"/proc/{parent}/task/{task}/children") as f:
                    pending.extend(int(child) for child in f.read().split())
    return found


def comm(pid, task=None):
    try:
        with open(f"/proc/{pid}/task/{task}/comm" if task else f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def warden_of(kernel_pid):
    """The jail helper's warden among the kernel's processes: the broker's home."""
    for pid in process_tree(kernel_pid):
        if comm(pid) == "belljar-warden":
            return pid
    raise AssertionError("no warden among the kernel's processes")


def cpu_of(stat_path):
    """utime + stime, in seconds, of /proc/.../stat; None once it is gone."""
    try:
        with open(stat_path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def broker_cpu(warden):
    """The broker thread's CPU (the warden's thread named belljar-broker); where no thread has
    that name (the code before this round named none), the warden's threads' together."""
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{warden}/task"):
            if comm(warden, task) == "belljar-broker":
                return cpu_of(f"/proc/{warden}/task/{task}/stat")
    return cpu_of(f"/proc/{warden}/stat")


LONG_WALKS = """
import os, threading
os.chdir({ws!r})
os.mkdir('a')
long_path = 'a/../' * 800 + 'walked'
def ask_the_broker():
    while True:
        try:
            os.close(os.open(long_path, os.O_WRONLY | os.O_CREAT, 0o644))
        except OSError:
            pass
threading.Thread(target=ask_the_broker, daemon=True).start()
"""


@pytest.mark.parametrize("mode", MODES)
def test_the_brokers_cpu_is_charged_to_the_session(mode):
    limit = 3
    with fresh_workspace("belljar-broker-cpu-") as ws:
        with kernel(mode, ws, ["--cpu", str(limit)]) as (km, kc):
            warden = warden_of(km.provisioner.process.pid)
            start = broker_cpu(warden)
            reply, _ = execute(kc, LONG_WALKS.format(ws=str(ws)))
            assert reply["content"]["status"] == "ok", reply["content"]
            # Watched until the kernel says it stopped the thread, or until the broker has spent
            # three times --cpu (nothing stopped it before): a bound on CPU, not on time. The
            # clock only keeps a machine where nothing runs at all from waiting for ever.
            used, notice, give_up = 0.0, None, time.monotonic() + 300
            while notice is None and used < 3 * limit and time.monotonic() < give_up:
                with contextlib.suppress(queue.Empty):
                    msg = kc.get_iopub_msg(timeout=0.5)
                    if msg["msg_type"] == "stream" and "while no cell ran" in msg["content"]["text"]:
                        notice = msg["content"]["text"]
                now = broker_cpu(warden)
                if now is not None:
                    used = max(used, now - start)
            assert notice is not None, f"not stopped: the broker spent {used:.1f} s of CPU"
            assert "--cpu" in notice and "restarted" in notice, notice
            # The control: the thread did keep the broker busy (most of what was charged);
            # the bound: the broker stopped within a sample (half a second) of --cpu, with room
            # for a loaded machine. It overran by 1.8 s when the sample waited for whatever
            # woke the kernel next (CellLimits::background_sample_due).
            assert 1.0 <= used < limit + 1.5, used
            reply, _ = execute(kc, "print('served')")
            assert reply["content"]["status"] == "error", reply["content"]
            reply, outputs = execute(kc, "print('served')")
            assert reply["content"]["status"] == "ok" and stdout_of(outputs) == "served\n"


ROUTES = """
import tempfile, threading
os.dup2(os.open('.gitconfig', os.O_RDONLY), 200)
W = os.O_WRONLY
def from_fd_folder():
    os.open('200', W, dir_fd=os.open('/proc/self/fd', os.O_RDONLY | os.O_DIRECTORY))
def from_self():
    os.open('fd/200', W, dir_fd=os.open('/proc/self', os.O_PATH))
def from_cwd():
    here = os.getcwd()
    os.chdir('/proc/self/fd')
    try:
        os.open('200', W)
    finally:
        os.chdir(here)
def through_a_link():
    link = tempfile.mktemp()
    os.symlink('/proc/self/fd/200', link)
    os.open(link, W)
attempt('from the fd folder', from_fd_folder)
attempt('from /proc/self', from_self)
attempt('from the cwd', from_cwd)
attempt('through a link', through_a_link)
attempt('task', lambda: os.open(f'/proc/self/task/{threading.get_native_id()}/fd/200', W))
attempt('thread-self', lambda: os.open('/proc/thread-self/fd/200', W))
attempt('/dev/fd', lambda: os.open('/dev/fd/200', W))
attempt('by pid', lambda: os.open(f'/proc/{os.getpid()}/fd/200', W))
attempt('trailing slash', lambda: os.open('/proc/self/fd/200/', W))
attempt('dot-dot', lambda: os.open('/proc/self/fd/../fd/200', W))
attempt('read-write, create', lambda: os.open('/proc/self/fd/200', os.O_RDWR | os.O_CREAT))
attempt('truncating', lambda: os.open('/proc/self/fd/200', os.O_RDONLY | os.O_TRUNC))
attempt('map_files', lambda: os.open('/proc/self/map_files/' + os.listdir('/proc/self/map_files')[0], W))
"""


@pytest.mark.parametrize("mode", MODES)
def test_every_route_to_a_held_dot_file_is_refused(mode):
    # The routes beside /proc/self/fd/N to a descriptor's object: each is the reopen's (and
    # refused: a file) or refused outright; none hands back a writable .gitconfig.
    with fresh_workspace("belljar-broker-routes-") as ws:
        (ws / ".gitconfig").write_text("[user]\n")
        open_to_all(ws)
        with kernel(mode, ws) as (km, kc):
            got, _ = results_of(kc, f"os.chdir({str(ws)!r})\n" + ROUTES)
        assert set(got.values()) == {"PermissionError"}, got
        assert (ws / ".gitconfig").read_text() == "[user]\n"


# --- Extended attributes and times (the third pass): every call that changes what a name holds
# is brokered or refused (sandbox/layers/syscall_table.cpp). An ACL is a mode by another call,
# a user xattr and a file's times are changes to a dot-file like any other.

ATTRIBUTE_PROBES = """
import ctypes, errno, os, shutil, struct
os.chdir({ws!r})
results = {{}}
def attempt(name, action):
    try:
        action()
        results[name] = 'done'
    except OSError as e:
        results[name] = errno.errorcode[e.errno]
def acl(user, group, other):
    # system.posix_acl_access: version 2, then (tag, permissions, id) for owner, group, other
    return struct.pack('<I', 2) + b''.join(struct.pack('<HHI', tag, perm, 0xffffffff)
                                          for tag, perm in ((1, user), (4, group), (0x20, other)))
libc = ctypes.CDLL(None, use_errno=True)
def setxattrat(path, name, value):
    # Linux 6.13's setxattrat(dirfd, path, at_flags, name, &xattr_args, size), by number
    data = ctypes.create_string_buffer(value)
    args = struct.pack('<QII', ctypes.addressof(data), len(value), 0)
    if libc.syscall(463, -100, path.encode(), 0, name.encode(), args, len(args)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
def futimens(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.utime(fd, (1, 1))
    finally:
        os.close(fd)
attempt('acl makes a dot-file world-writable',
        lambda: os.setxattr('.gitconfig', 'system.posix_acl_access', acl(6, 6, 6)))
attempt('acl makes a start-up file executable',
        lambda: os.setxattr('.ipython/startup.py', 'system.posix_acl_access', acl(7, 7, 7)))
attempt('acl makes a folder unreadable to its owner',
        lambda: os.setxattr('hide', 'system.posix_acl_access', acl(3, 0, 0)))
attempt('user xattr on a dot-file', lambda: os.setxattr('.gitconfig', 'user.evil', b'1'))
attempt('user xattr removed from a dot-file', lambda: os.removexattr('.gitconfig', 'user.host'))
attempt('setxattrat on a dot-file', lambda: setxattrat('.gitconfig', 'user.evil', b'1'))
def fchmodat2(path, mode):
    # Linux 6.6's fchmodat2(dirfd, path, mode, AT_SYMLINK_NOFOLLOW), by number
    if libc.syscall(452, -100, path.encode(), mode, 0x100) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
attempt('fchmodat2 on a dot-file', lambda: fchmodat2('.gitconfig', 0o666))
attempt('utimensat on a dot-file', lambda: os.utime('.gitconfig', (1, 1)))
attempt('futimens on a dot-file', lambda: futimens('.gitconfig'))
attempt('utimensat on a start-up file', lambda: os.utime('.ipython/startup.py', (1, 1)))
def inode_flags(path, add=0):
    # FS_IOC_GETFLAGS / FS_IOC_SETFLAGS on a descriptor opened only to read
    import fcntl
    fd = os.open(path, os.O_RDONLY)
    try:
        flags = bytearray(8)
        fcntl.ioctl(fd, 0x80086601, flags)
        if add:
            value = struct.unpack('<q', bytes(flags))[0] | add
            fcntl.ioctl(fd, 0x40086602, struct.pack('<q', value))
        return struct.unpack('<q', bytes(flags))[0]
    finally:
        os.close(fd)
attempt('inode flag on a dot-file', lambda: inode_flags('.gitconfig', 0x40))  # FS_NODUMP_FL
attempt('utimensat on an ordinary file', lambda: os.utime('data.txt', (1000, 2000)))
attempt('copy2 of a file with an xattr', lambda: shutil.copy2('data.txt', 'copy.txt'))
print('RESULTS', results)
"""


@contextlib.contextmanager
def attribute_workspace_made(prefix):
    """A fresh workspace for the attribute probes; its folder `hide`, which a probe that lands
    makes unreadable, is made readable again so that the workspace can be removed."""
    with fresh_workspace(prefix) as ws:
        try:
            yield ws
        finally:
            with contextlib.suppress(OSError):
                os.chmod(ws / "hide", 0o700)


def attribute_workspace(ws):
    """A dot-file with a user xattr, a start-up file, a folder and an ordinary file, owned by the
    sandbox's user as its own files would be (root's tests run the sandbox as nobody)."""
    (ws / ".gitconfig").write_text("[user]\n")
    (ws / ".ipython").mkdir()
    (ws / ".ipython/startup.py").write_text("pass\n")
    (ws / "hide").mkdir()
    (ws / "data.txt").write_text("data\n")
    os.setxattr(ws / ".gitconfig", "user.host", b"mine")
    os.setxattr(ws / "data.txt", "user.tag", b"kept")
    open_to_all(ws)
    os.chmod(ws / ".gitconfig", 0o644)
    os.chmod(ws / ".ipython/startup.py", 0o644)
    if os.geteuid() == 0:
        import pwd
        nobody = pwd.getpwnam("nobody")
        for path in [ws, *ws.rglob("*")]:
            os.chown(path, nobody.pw_uid, nobody.pw_gid)


def attribute_results(out_text):
    line = next(line for line in out_text.splitlines() if line.startswith("RESULTS "))
    return ast.literal_eval(line[len("RESULTS "):])


def inode_flags(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except PermissionError:  # a folder an ACL made unreadable (the control's)
        return None
    try:
        flags = bytearray(8)
        fcntl.ioctl(fd, 0x80086601, flags)  # FS_IOC_GETFLAGS
        return struct.unpack("<q", bytes(flags))[0]
    finally:
        os.close(fd)


def snapshot(ws):
    return {rel: ((ws / rel).stat().st_mode, (ws / rel).stat().st_mtime_ns,
                  sorted(os.listxattr(ws / rel)), inode_flags(ws / rel))
            for rel in (".gitconfig", ".ipython/startup.py", "hide")}


@pytest.mark.parametrize("mode", MODES)
def test_extended_attributes_and_times_change_no_dot_file(mode):
    with attribute_workspace_made("belljar-broker-xattr-") as ws:
        attribute_workspace(ws)
        before = snapshot(ws)
        with kernel(mode, ws) as (km, kc):
            reply, out = execute(kc, ATTRIBUTE_PROBES.format(ws=str(ws)))
            assert reply["content"]["status"] == "ok", out
            got = attribute_results(stdout_of(out))
            notices = stderr_of(out)
        assert got == {
            "acl makes a dot-file world-writable": "ENOTSUP",
            "acl makes a start-up file executable": "ENOTSUP",
            "acl makes a folder unreadable to its owner": "ENOTSUP",
            "user xattr on a dot-file": "ENOTSUP",
            "user xattr removed from a dot-file": "ENOTSUP",
            "setxattrat on a dot-file": "ENOTSUP",
            "fchmodat2 on a dot-file": "EPERM",
            "utimensat on a dot-file": "EPERM",
            "futimens on a dot-file": "EPERM",
            "utimensat on a start-up file": "EPERM",
            "inode flag on a dot-file": "EPERM",
            "utimensat on an ordinary file": "done",
            "copy2 of a file with an xattr": "done",
        }, got
        assert snapshot(ws) == before
        assert (ws / "data.txt").stat().st_mtime == 2000  # ordinary times are the cell's
        assert (ws / "copy.txt").read_text() == "data\n"
        assert "the sandbox may not change .gitconfig (mode" in notices, notices
        assert "the sandbox may not change .ipython/startup.py (times" in notices, notices


def test_control_outside_the_sandbox_the_attribute_probes_change_the_dot_files():
    # The same probe as the workspace's owner, with no sandbox: every call lands.
    with attribute_workspace_made("belljar-broker-xattr-control-") as ws:
        attribute_workspace(ws)
        before = snapshot(ws)
        assert before[".gitconfig"][0] & 0o777 == 0o644
        command = [PYTHON, "-c", ATTRIBUTE_PROBES.format(ws=str(ws))]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "nobody", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        got = attribute_results(done.stdout)
        assert set(got.values()) == {"done"}, got
        after = snapshot(ws)
        assert after[".gitconfig"][0] & 0o777 == 0o666  # the ACL was the mode
        assert after[".ipython/startup.py"][0] & 0o100
        assert after["hide"][0] & 0o777 == 0o300
        assert after[".gitconfig"][1] == 1_000_000_000
        assert "user.evil" in after[".gitconfig"][2] and "user.host" not in after[".gitconfig"][2]
        assert after[".gitconfig"][3] & 0x40  # FS_NODUMP_FL, through a read-only descriptor


def test_the_quota_counts_a_folder_an_acl_would_have_hidden():
    # The red team's round-three shape: the folder made unreadable after its files were opened,
    # by an ACL this time (chmod is brokered), hid 601 MiB from --workspace-quota 32M. Strict
    # only: degraded mode has no survey, so no quota (its ACL is refused all the same, above).
    mode = "strict"
    with attribute_workspace_made("belljar-broker-acl-quota-") as ws:
        quota = 32 << 20
        code = (f"import os, struct\nos.chdir({str(ws)!r})\nos.mkdir('hide')\n"
                "files = [open(f'hide/big{n}', 'wb') for n in range(8)]\n"
                "acl = struct.pack('<I', 2) + b''.join(struct.pack('<HHI', t, p, 0xffffffff) "
                "for t, p in ((1, 3), (4, 0), (0x20, 0)))\n"
                "try:\n    os.setxattr('hide', 'system.posix_acl_access', acl)\n"
                "except OSError as e:\n    print('acl refused:', e.errno)\n"
                "block = b'x' * (1 << 20)\n"
                "for f in files:\n"
                "    for _ in range(75): f.write(block)\n"
                "    f.flush()\n")
        with kernel(mode, ws, ["--workspace-quota", "32M", "--file-size", "100M"]) as (km, kc):
            reply, out = execute(kc, code, timeout=120)
            os.chmod(ws / "hide", 0o700)  # the test's own look, whatever the cell did
            used = sum(f.stat().st_blocks * 512 for f in (ws / "hide").iterdir())
            print(f"workspace after the burst: {used >> 20} MiB (quota {quota >> 20} MiB), "
                  f"the cell's status: {reply['content']['status']}")
            assert f"acl refused: {errno.EOPNOTSUPP}" in stdout_of(out), out
            assert reply["content"]["status"] == "error", out
            assert reply["content"]["ename"] == "WorkspaceQuotaError", reply["content"]
            assert used < quota + (384 << 20), used


# --- Python environments by their shape (the third pass): a conda environment has no
# pyvenv.cfg, and its sitecustomize.py and etc/conda/activate.d ran in the host's next python
# and `conda activate`. Run after ATTEMPT.

ENVIRONMENT_PLANTS = """
os.chdir({ws!r})
def write(path, text='import os\\n'):
    with open(path, 'w') as f:
        f.write(text)
attempt('conda sitecustomize', lambda: write('conda/lib/python3.11/sitecustomize.py'))
attempt('conda usercustomize', lambda: write('conda/lib/python3.11/usercustomize.py'))
attempt('conda activate.d', lambda: write('conda/etc/conda/activate.d/evil.sh', 'touch x\\n'))
attempt('conda deactivate.d', lambda: os.mkdir('conda/etc/conda/deactivate.d'))
attempt('conda bin', lambda: write('conda/bin/ls'))
attempt('conda .pth', lambda: write('conda/lib/python3.11/site-packages/evil.pth'))
attempt('conda moved away', lambda: os.rename('conda', 'moved'))
attempt('conda-meta removed', lambda: os.rename('conda/conda-meta', 'conda/gone'))
attempt('prefix sitecustomize', lambda: write('prefix/lib/python3.12/sitecustomize.py'))
attempt('activate.d anywhere', lambda: os.mkdir('proj/etc/conda/activate.d'))
attempt('project lib', lambda: write('proj/lib/helpers.py'))
attempt('project bin', lambda: write('proj/bin/run.sh', 'true\\n'))
attempt('project conda recipe', lambda: write('proj/etc/conda/environment.yml', 'name: x\\n'))
attempt('prefix moved away', lambda: os.rename('prefix', 'elsewhere'))
attempt('project moved', lambda: os.rename('proj', 'proj2'))
print('RESULTS ' + json.dumps(results))
"""

ENVIRONMENT_REFUSED = ["conda sitecustomize", "conda usercustomize", "conda activate.d",
                       "conda deactivate.d", "conda bin", "conda .pth", "conda moved away",
                       "conda-meta removed", "prefix sitecustomize", "activate.d anywhere",
                       "prefix moved away"]
ENVIRONMENT_ALLOWED = ["project lib", "project bin", "project conda recipe", "project moved"]


def environment_workspace(ws):
    """A conda environment as conda lays it out (no pyvenv.cfg), an interpreter's prefix with
    no marker at all, and an ordinary project with a lib, a bin and an etc/conda of its own."""
    for folder in ("conda/conda-meta", "conda/bin", "conda/lib/python3.11/site-packages",
                   "conda/etc/conda/activate.d", "prefix/bin", "prefix/lib/python3.12",
                   "proj/lib", "proj/bin", "proj/etc/conda"):
        (ws / folder).mkdir(parents=True)
    (ws / "conda/conda-meta/history").write_text("==> 2026-01-01 <==\n")
    (ws / "conda/bin/python3.11").write_text("")
    (ws / "prefix/bin/python3").write_text("")
    open_to_all(ws)


def planted(mode, ws, plants, refused, allowed):
    """Runs `plants` (after ATTEMPT, printing RESULTS) in a kernel on `ws`; checks that each of
    `refused` got PermissionError and each of `allowed` was done; the cell's notices."""
    with kernel(mode, ws) as (km, kc):
        reply, out = execute(kc, ATTEMPT + plants.format(ws=str(ws)))
        assert reply["content"]["status"] == "ok", out
        got = json.loads(stdout_of(out).split("RESULTS ", 1)[1].splitlines()[0])
    assert got == {**{name: "PermissionError" for name in refused},
                   **{name: "done" for name in allowed}}, got
    return stderr_of(out)


@pytest.mark.parametrize("mode", MODES)
def test_a_conda_environment_is_a_python_environment_to_the_rule(mode):
    with fresh_workspace("belljar-broker-conda-") as ws:
        environment_workspace(ws)
        notices = planted(mode, ws, ENVIRONMENT_PLANTS, ENVIRONMENT_REFUSED, ENVIRONMENT_ALLOWED)
        assert "conda/lib/python3.11/sitecustomize.py (create: inside a Python environment)" \
            in notices, notices
        assert not (ws / "conda/lib/python3.11/sitecustomize.py").exists()
        assert not (ws / "conda/etc/conda/activate.d/evil.sh").exists()
        assert (ws / "conda/conda-meta").is_dir()


@pytest.mark.parametrize("mode", MODES)
def test_no_folder_is_made_an_environment_the_session_would_be_closed_out_of(mode):
    """The outside attack on round three: one `pyvenv.cfg` made at the workspace's top made the
    whole workspace "a Python environment" to the rule, closed to that session and every later
    one until the host's user removed it. A name that completes an environment's shape is
    refused; the workspace stays the sandbox's."""
    with fresh_workspace("belljar-broker-markers-") as ws:
        (ws / "p" / "lib" / "python3.11").mkdir(parents=True)
        (ws / "q" / "bin").mkdir(parents=True)
        (ws / "q" / "bin" / "python3").write_text("")
        open_to_all(ws)
        plants = (f"os.chdir({str(ws)!r})\n"
                  "attempt('pyvenv.cfg', lambda: open('pyvenv.cfg', 'w').write('home = /usr\\n'))\n"
                  "attempt('conda-meta', lambda: os.mkdir('sub-conda-meta') or "
                  "os.rename('sub-conda-meta', 'conda-meta'))\n"
                  "attempt('bin/python beside lib', lambda: (os.mkdir('p/bin'), "
                  "open('p/bin/python3', 'w').close()))\n"
                  "attempt('lib/python beside bin', lambda: os.makedirs('q/lib/python3.12'))\n"
                  "attempt('a lib renamed in', lambda: (os.makedirs('x/python3.11'), "
                  "os.rename('x', 'q/lib')))\n"
                  "attempt('a bin renamed in', lambda: (os.mkdir('y'), open('y/python', 'w').close(), "
                  "os.rename('y', 'p/bin')))\n"
                  "import ctypes\n"
                  "def exchange(a, b):\n"
                  "    libc = ctypes.CDLL(None, use_errno=True)\n"
                  "    if libc.renameat2(-100, a.encode(), -100, b.encode(), 2) != 0:\n"
                  "        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))\n"
                  "attempt('a bin exchanged in', lambda: (os.makedirs('e/lib/python3.11'), os.mkdir('e/bin'), "
                  "os.mkdir('z'), open('z/python', 'w').close(), exchange('e/bin', 'z')))\n"
                  "attempt('then ordinary work', lambda: open('after.txt', 'w').write('x'))\n")
        with kernel(mode, ws) as (km, kc):
            got, notices = results_of(kc, plants)
        assert got == {"pyvenv.cfg": "PermissionError", "conda-meta": "PermissionError",
                       "bin/python beside lib": "PermissionError",
                       "lib/python beside bin": "PermissionError", "a lib renamed in": "PermissionError",
                       "a bin renamed in": "PermissionError", "a bin exchanged in": "PermissionError",
                       "then ordinary work": "done"}, got
        assert "would make its folder a Python environment" in notices, notices
        with kernel(mode, ws) as (km, kc):  # the next session writes as the first did
            got, _ = results_of(kc, f"attempt('next', lambda: open({str(ws / 'next.txt')!r}, 'w').write('x'))")
            assert got == {"next": "done"}, got


def test_control_outside_the_sandbox_the_environment_plants_land():
    with fresh_workspace("belljar-broker-conda-control-") as ws:
        environment_workspace(ws)
        done = subprocess.run([PYTHON, "-c", ATTEMPT + ENVIRONMENT_PLANTS.format(ws=str(ws))],
                              capture_output=True, text=True, check=True)
        got = json.loads(done.stdout.split("RESULTS ", 1)[1].splitlines()[0])
        # Every plant lands (the rename of conda-meta found it already moved with its folder).
        assert {name for name, result in got.items() if result != "done"} <= {"conda-meta removed"}
        assert (ws / "moved/lib/python3.11/sitecustomize.py").exists()


# --- The syscall table's refusals, call by call (sandbox/layers/syscall_table.cpp, shown in
# docs/security.md, whose rows a unit test holds equal to the code): each call the table refuses
# is made in the sandbox with null arguments, in a child of its own, and must fail with the
# table's errno. Outside, the same calls reach the kernel and fail for their own reasons.

NEWER_CALLS = {"futex_waitv": 449, "set_mempolicy_home_node": 450, "cachestat": 451,
               "fchmodat2": 452, "map_shadow_stack": 453, "futex_wake": 454, "futex_wait": 455,
               "futex_requeue": 456, "statmount": 457, "listmount": 458, "lsm_get_self_attr": 459,
               "lsm_set_self_attr": 460, "lsm_list_modules": 461, "mseal": 462,
               "setxattrat": 463, "getxattrat": 464, "listxattrat": 465, "removexattrat": 466,
               "open_tree_attr": 467, "file_getattr": 468, "file_setattr": 469}

REFUSAL_PROBE = """
import ctypes, json, sys
libc = ctypes.CDLL(None, use_errno=True)
got = {}
for name, nr in json.loads(sys.argv[1]).items():
    ctypes.set_errno(0)
    rc = libc.syscall(nr, 0, 0, 0, 0, 0, 0)
    got[name] = ctypes.get_errno() if rc == -1 else 0
print(json.dumps(got))
"""


def refused_by_the_table():
    """{name: (number, errno)} of the rows docs/security.md shows as refused, on x86_64."""
    numbers = dict(NEWER_CALLS)
    header = pathlib.Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h").read_text()
    for match in re.finditer(r"#define __NR_(\w+) (\d+)", header):
        numbers.setdefault(match.group(1), int(match.group(2)))
    refused = {}
    for line in (SOURCE / "docs/security.md").read_text().splitlines():
        row = re.match(r"\| (`.*?`) \| refused \((E[A-Z]+)\) \|", line)
        if row:
            for name in re.findall(r"`(\w+)`", row.group(1)):
                if name in numbers:
                    refused[name] = (numbers[name], getattr(errno, row.group(2)))
    return refused


def refusal_probe_code(refused):
    calls = json.dumps({name: nr for name, (nr, _) in refused.items()})
    return (f"import subprocess, sys\n"
            f"done = subprocess.run([sys.executable, '-c', {REFUSAL_PROBE!r}, {calls!r}],\n"
            f"                      capture_output=True, text=True)\n"
            f"print('REFUSALS ' + done.stdout.strip())\n")


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the probe's numbers are x86_64's")
@pytest.mark.parametrize("mode", MODES)
def test_every_call_the_table_refuses_is_refused_with_its_errno(mode):
    refused = refused_by_the_table()
    assert len(refused) > 80 and "setxattrat" in refused and "link" in refused
    with fresh_workspace("belljar-broker-refusals-") as ws:
        with kernel(mode, ws) as (km, kc):
            reply, out = execute(kc, refusal_probe_code(refused), timeout=60)
            assert reply["content"]["status"] == "ok", out
            got = json.loads(stdout_of(out).split("REFUSALS ", 1)[1].splitlines()[0])
    wrong = {name: (errno.errorcode.get(got.get(name), got.get(name)), errno.errorcode[want])
             for name, (_, want) in refused.items() if got.get(name) != want}
    assert not wrong, f"(got, the table's) for {len(wrong)} of {len(refused)} calls: {wrong}"


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the probe's numbers are x86_64's")
def test_control_outside_the_sandbox_the_refused_calls_reach_the_kernel():
    refused = refused_by_the_table()
    done = subprocess.run([PYTHON, "-c", REFUSAL_PROBE,
                           json.dumps({name: nr for name, (nr, _) in refused.items()})],
                          capture_output=True, text=True, check=True)
    got = json.loads(done.stdout)
    # The kernel answers null arguments with EFAULT, EINVAL, EBADF ...: the table's errnos come
    # from the filter, not from the calls.
    same = [name for name, (_, want) in refused.items() if got[name] == want]
    assert len(same) < len(refused) // 2, same
    assert got["setxattr"] == errno.EFAULT and got["mq_open"] == errno.EFAULT


# --- Module names a host Python imports from its folder (the outside attack on round three):
# `ipykernel_launcher.py` in a notebook's folder ran as the host user when JupyterLab started a
# stock ipykernel there (`python -m ipykernel_launcher`, the folder first on sys.path), and
# `readline.py` and `pip.py` did the same for `python -i` and `python -m pip`. Run after ATTEMPT.

MODULE_PLANTS = """
os.chdir({ws!r})
def write(path, text="open('PWNED', 'w')\\n"):
    with open(path, 'w') as f:
        f.write(text)
attempt('ipykernel_launcher.py', lambda: write('ipykernel_launcher.py'))
attempt('readline.py', lambda: write('readline.py'))
attempt('pip.py', lambda: write('course/pip.py'))
attempt('zmq compiled', lambda: write('course/zmq.cpython-311-x86_64-linux-gnu.so', ''))
attempt('json package', lambda: (os.mkdir('json'), write('json/__init__.py')))
attempt('tornado link', lambda: os.symlink('pkg', 'tornado'))
attempt('traitlets renamed', lambda: os.rename('pkg', 'traitlets'))
attempt('runpy renamed', lambda: os.rename('helpers.py', 'runpy.py'))
attempt('helpers.py', lambda: write('course/helpers.py'))
attempt('a folder named json', lambda: os.path.isdir('json') or os.mkdir('json'))
attempt('a package of its own', lambda: (os.mkdir('mine'), write('mine/__init__.py')))
print('RESULTS ' + json.dumps(results))
"""

MODULES_REFUSED = ["ipykernel_launcher.py", "readline.py", "pip.py", "zmq compiled",
                   "json package", "tornado link", "traitlets renamed", "runpy renamed"]
MODULES_ALLOWED = ["helpers.py", "a folder named json", "a package of its own"]


def module_workspace(ws):
    (ws / "course").mkdir()
    (ws / "pkg").mkdir()
    (ws / "pkg/__init__.py").write_text("open('PWNED', 'w')\n")
    (ws / "helpers.py").write_text("open('PWNED', 'w')\n")
    open_to_all(ws)


@pytest.mark.parametrize("mode", MODES)
def test_no_module_of_the_host_python_is_planted_by_name(mode):
    with fresh_workspace("belljar-broker-modules-") as ws:
        module_workspace(ws)
        notices = planted(mode, ws, MODULE_PLANTS, MODULES_REFUSED, MODULES_ALLOWED)
        assert "ipykernel_launcher.py (create: a module of the host's Python by name" in notices, \
            notices
        assert sorted(p.name for p in ws.iterdir()) == ["course", "helpers.py", "json", "mine", "pkg"]
        assert sorted(p.name for p in (ws / "course").iterdir()) == ["helpers.py"]
        assert list((ws / "json").iterdir()) == []


def test_control_a_stock_kernel_started_in_the_folder_runs_the_launcher_found_there():
    """How JupyterLab starts ipykernel for a notebook: `python -m ipykernel_launcher` with the
    notebook's folder as its working directory, which Python puts first on sys.path."""
    frontends_python = FRONTENDS / "bin" / "python"
    with fresh_workspace("belljar-broker-modules-control-") as ws:
        module_workspace(ws)
        done = subprocess.run([PYTHON, "-c", ATTEMPT + MODULE_PLANTS.format(ws=str(ws))],
                              capture_output=True, text=True, check=True)
        got = json.loads(done.stdout.split("RESULTS ", 1)[1].splitlines()[0])
        assert all(result == "done" for result in got.values()), got
        (ws / "PWNED").unlink(missing_ok=True)
        subprocess.run([str(frontends_python), "-m", "ipykernel_launcher", "--help"], cwd=ws,
                       capture_output=True, timeout=60)
        assert (ws / "PWNED").exists()


@pytest.mark.parametrize("mode", MODES)
def test_a_rename_that_fails_leaves_its_target_as_it_was(mode):
    """The outside attack on round three: a folder renamed over a host's read-only file failed
    (ENOTDIR) after the broker had taken its removal lease, which emptied the file and gave it
    its owner's write bit. Its bytes go only once a removal is done; a failed call changes
    nothing."""
    with fresh_workspace("belljar-broker-failed-rename-") as ws:
        target = ws / "target.txt"
        target.write_text("precious host data\n")
        target.chmod(0o444)
        os.chmod(ws, 0o777)
        code = (f"os.chdir({str(ws)!r})\n"
                "attempt('folder over a file', lambda: (os.mkdir('d'), os.rename('d', 'target.txt')))\n"
                # Held open, the target would be buried before the rename (not removed): the
                # folder must not take its place.
                "held = open('target.txt', 'rb')\n"
                "attempt('folder over a held file', lambda: os.rename('d', 'target.txt'))\n")
        with kernel(mode, ws) as (km, kc):
            got, _ = results_of(kc, code)
        assert got == {"folder over a file": "NotADirectoryError",
                       "folder over a held file": "NotADirectoryError"}, got
        assert target.read_text() == "precious host data\n"
        assert oct(target.stat().st_mode & 0o777) == oct(0o444)


MEMORY_SAMPLES = """
import mmap, os, time
size = 100 << 20
m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
m.madvise(mmap.MADV_NOHUGEPAGE)
for i in range(0, size, 4096):
    m[i] = 1
children = []
for _ in range(40):  # each counts the shared pages again in its RSS: the sum passes --memory
    pid = os.fork()
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    children.append(pid)
start = time.time()
while time.time() - start < 12:
    time.sleep(0.005)
for pid in children:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
print('done')
"""


def test_the_wardens_own_cpu_is_charged_to_the_session():
    """The outside attack on round three: without a memory cgroup (an unprivileged user), the
    warden samples the sandbox's memory and reads every process's smaps_rollup once the sum of
    their RSS passes --memory; forks sharing 100 MiB kept it there, and its main thread spent 7 s
    per 10 s of the cell, charged to no one (only the broker thread was). All of the warden's
    own CPU is the session's now: the cell stops near --cpu."""
    with fresh_workspace("belljar-broker-warden-cpu-") as ws:
        with kernel("strict", ws, ["--cpu", "3", "--memory", "1G", "--pids", "1024"]) as (km, kc):
            warden = warden_of(km.provisioner.process.pid)
            before = cpu_of(f"/proc/{warden}/stat")
            reply, out = execute(kc, MEMORY_SAMPLES, timeout=90)
            spent = cpu_of(f"/proc/{warden}/stat") - before
            facts = reply["metadata"]["belljar"]
            assert spent <= facts["cpu_ms"] / 1000 + 1.0, (spent, facts)


LEASE = """
import fcntl
os.chdir({ws!r})
with open('leased.txt', 'w') as f:
    f.write('x')
fd = os.open('leased.txt', os.O_RDONLY)
attempt('lease', lambda: fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK))
attempt('flags', lambda: fcntl.fcntl(fd, fcntl.F_SETFL, os.O_NONBLOCK))
attempt('descriptor flags', lambda: fcntl.fcntl(fd, fcntl.F_SETFD, fcntl.FD_CLOEXEC))
"""


@pytest.mark.parametrize("mode", MODES)
def test_no_lease_is_taken_from_the_sandbox(mode):
    """A read of round three's last fixes: a lease the sandbox takes on a workspace file holds
    every other opener of it (another kernel's broker sharing the workspace, the host's editor)
    for up to lease-break-time, 45 s. fcntl's F_SETLEASE is refused; its other commands pass.
    Control: outside the sandbox the same lease is granted."""
    with fresh_workspace("belljar-broker-lease-") as ws:
        with kernel(mode, ws) as (km, kc):
            got, _ = results_of(kc, LEASE.format(ws=str(ws)))
        assert got == {"lease": "PermissionError", "flags": "done", "descriptor flags": "done"}, got
        done = subprocess.run([PYTHON, "-c", ATTEMPT + LEASE.format(ws=str(ws))
                               + "print(json.dumps(results))"], capture_output=True, text=True,
                              check=True)
        assert json.loads(done.stdout)["lease"] == "done", done.stdout


# --- the broker moves and removes no mount point of the sandbox, nor a folder above one ---
# (the outside red team's fourth pass: the broker renames in the host's mount namespace, where
# the sandbox's mounts are not busy, so the kernel carried them along with the folder)

ERRNO_ATTEMPT = attempt_prelude("errno.errorcode.get(e.errno, str(e.errno))")


def open_to_all_but_links(root):
    """open_to_all without following a link: a venv's bin/python leads to the host's own."""
    for dirpath, _, filenames in os.walk(root):
        os.chmod(dirpath, 0o777)
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, 0o666)


def errno_results_of(kc, code):
    reply, out = execute(kc, ERRNO_ATTEMPT + code + "\nprint(json.dumps(results))\n")
    assert reply["content"]["status"] == "ok", [m["content"].get("evalue") for m in out
                                                if m["msg_type"] == "error"] or out
    return json.loads(stdout_of(out).strip().splitlines()[-1]), stderr_of(out)


@pytest.mark.parametrize("mode", MODES)
def test_no_folder_above_the_workspace_is_renamed_to_take_it_out_of_the_rule(mode):
    # The workspace two levels under /tmp: renamed away, its venv's site-packages lay outside
    # the workspace, below the writable /tmp, and took a .pth the host's venv then ran.
    top = sandbox_writable_dir("belljar-broker-above-")
    ws = top / "ws"
    ws.mkdir()
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(ws / "venv")],
                   check=True)
    open_to_all_but_links(top)
    site = next((ws / "venv" / "lib").glob("python3*/site-packages"))
    moved = pathlib.Path(str(top) + "-moved")
    try:
        with kernel(mode, ws) as (km, kc):
            code = f"""
top, site, moved = {str(top)!r}, {str(site)!r}, {str(moved)!r}
attempt('plant in place', lambda: open(site + '/evil.pth', 'w').close())
attempt('rename the folder above', lambda: os.rename(top, moved))
if results['rename the folder above'] == 'done':
    attempt('plant moved', lambda: open(site.replace(top, moved, 1) + '/evil.pth', 'w').write('import os'))
    attempt('put back', lambda: os.rename(moved, top))
attempt('exchange it', lambda: (os.mkdir(top + '-other'), os.rename(top + '-other', top)))
attempt('remove it', lambda: os.rmdir(top))
"""
            got, notices = errno_results_of(kc, code)
        # Degraded, the host's /tmp is no writable root of the sandbox: refused as before.
        held = "EBUSY" if mode == "strict" else "EACCES"
        assert got == {"plant in place": "EACCES", "rename the folder above": held,
                       "exchange it": held, "remove it": held}, got
        if mode == "strict":
            assert "the workspace lies below it" in notices, notices
        assert not (site / "evil.pth").exists()
        assert (ws / "venv").is_dir() and not moved.exists()
    finally:
        shutil.rmtree(moved, ignore_errors=True)
        shutil.rmtree(str(top) + "-other", ignore_errors=True)
        shutil.rmtree(top, ignore_errors=True)


def host_dotfile_links(ws):
    """Links with protected names to ordinary places, as a dotfile manager makes them:
    .bashrc -> dotfiles/bashrc (a file), .vscode -> data (a folder)."""
    (ws / "dotfiles").mkdir()
    (ws / "dotfiles" / "bashrc").write_text("# mine\n")
    (ws / ".bashrc").symlink_to("dotfiles/bashrc")
    (ws / "data").mkdir()
    (ws / ".vscode").symlink_to("data")


def test_a_guard_is_not_renamed_away_nor_replaced():
    # A host link with a protected name to an ordinary place: the survey guards the target
    # read-only, and the broker, renaming in the host's namespace, moved the guard away with
    # it (the host's .bashrc then ran what the cell wrote in the new file).
    with fresh_workspace("belljar-broker-guard-move-") as ws:
        host_dotfile_links(ws)
        (ws / "new.txt").write_text("new\n")
        open_to_all_but_links(ws)
        with kernel("strict", ws) as (km, kc):
            code = f"""
os.chdir({str(ws)!r})
attempt('write the guarded target', lambda: open('dotfiles/bashrc', 'a').write('x'))
attempt('rename the guarded file', lambda: os.rename('dotfiles/bashrc', 'dotfiles/old'))
attempt('rename over it', lambda: os.rename('new.txt', 'dotfiles/bashrc'))
attempt('remove it', lambda: os.unlink('dotfiles/bashrc'))
attempt('rename its folder', lambda: os.rename('dotfiles', 'dotfiles-old'))
attempt('rename the guarded folder', lambda: os.rename('data', 'data_old'))
attempt('a new file in its place', lambda: (os.mkdir('data'), open('.vscode/tasks.json', 'w').close()))
"""
            got, notices = errno_results_of(kc, code)
        assert got == {"write the guarded target": "EROFS", "rename the guarded file": "EBUSY",
                       "rename over it": "EBUSY", "remove it": "EBUSY",
                       "rename its folder": "EBUSY", "rename the guarded folder": "EBUSY",
                       "a new file in its place": "EEXIST"}, got
        assert "a mount of the sandbox" in notices, notices
        assert (ws / "dotfiles" / "bashrc").read_text() == "# mine\n"
        assert (ws / ".bashrc").read_text() == "# mine\n"
        assert not (ws / "data" / "tasks.json").exists()


def test_an_ro_part_of_the_workspace_is_not_renamed_away_nor_replaced():
    with fresh_workspace("belljar-broker-ro-move-") as ws:
        (ws / "config.yaml").write_text("mine: 1\n")
        (ws / "ref").mkdir()
        (ws / "ref" / "a.txt").write_text("mine\n")
        (ws / "new.yaml").write_text("theirs: 1\n")
        open_to_all_but_links(ws)
        flags = ["--ro", str(ws / "config.yaml"), "--ro", str(ws / "ref")]
        with kernel("strict", ws, flags) as (km, kc):
            code = f"""
os.chdir({str(ws)!r})
attempt('write config.yaml', lambda: open('config.yaml', 'a').write('x'))
attempt('rename over config.yaml', lambda: os.rename('new.yaml', 'config.yaml'))
attempt('rename config.yaml away', lambda: os.rename('config.yaml', 'old.yaml'))
attempt('rename ref away', lambda: os.rename('ref', 'ref_old'))
attempt('remove ref/a.txt', lambda: os.unlink('ref/a.txt'))
attempt('a new ref/a.txt', lambda: (os.mkdir('ref'), open('ref/a.txt', 'w').write('x')))
"""
            got, notices = errno_results_of(kc, code)
        # Removed inside the read-only part: refused by the mount (the morgue lies on another).
        assert got.pop("remove ref/a.txt") != "done"
        assert got == {"write config.yaml": "EROFS", "rename over config.yaml": "EBUSY",
                       "rename config.yaml away": "EBUSY", "rename ref away": "EBUSY",
                       "a new ref/a.txt": "EEXIST"}, got
        assert (ws / "config.yaml").read_text() == "mine: 1\n"
        assert (ws / "ref" / "a.txt").read_text() == "mine\n"
        assert (ws / "new.yaml").exists()


def test_degraded_a_change_through_a_link_with_a_closed_name_is_that_names():
    # No namespaces, no guard over the link's target: a write through the host's .bashrc link
    # went straight to dotfiles/bashrc, an ordinary name, with no notice.
    with fresh_workspace("belljar-broker-link-name-") as ws:
        host_dotfile_links(ws)
        (ws / "plain").mkdir()
        (ws / "also-plain").symlink_to("plain")
        open_to_all_but_links(ws)
        with kernel("degraded", ws) as (km, kc):
            code = f"""
os.chdir({str(ws)!r})
attempt('append to .bashrc', lambda: open('.bashrc', 'a').write('echo planted'))
attempt('tasks through .vscode', lambda: open('.vscode/tasks.json', 'w').write('{{}}'))
attempt('through an ordinary link', lambda: open('also-plain/x.txt', 'w').write('x'))
"""
            got, notices = errno_results_of(kc, code)
        assert got == {"append to .bashrc": "EACCES", "tasks through .vscode": "EACCES",
                       "through an ordinary link": "done"}, got
        assert "the sandbox may not change .bashrc" in notices, notices
        assert (ws / "dotfiles" / "bashrc").read_text() == "# mine\n"
        assert not (ws / "data" / "tasks.json").exists()
        assert (ws / "plain" / "x.txt").read_text() == "x"


@pytest.mark.parametrize("mode", MODES)
def test_an_ro_part_of_the_workspace_is_read_only_in_both_modes(mode):
    # Degraded, --ro inside the workspace was not enforced at all: Landlock cannot take a part
    # of a writable folder back. The broker's rule holds it there, strict's mount here.
    with fresh_workspace("belljar-broker-ro-both-") as ws:
        (ws / "config.yaml").write_text("mine: 1\n")
        (ws / "ref").mkdir()
        (ws / "ref" / "a.txt").write_text("mine\n")
        (ws / "new.yaml").write_text("theirs: 1\n")
        open_to_all(ws)
        flags = ["--ro", str(ws / "config.yaml"), "--ro", str(ws / "ref")]
        with kernel(mode, ws, flags) as (km, kc):
            code = f"""
os.chdir({str(ws)!r})
attempt('write config.yaml', lambda: open('config.yaml', 'a').write('x'))
attempt('rename over config.yaml', lambda: os.rename('new.yaml', 'config.yaml'))
attempt('write ref/a.txt', lambda: open('ref/a.txt', 'w').write('x'))
attempt('a new file in ref', lambda: open('ref/b.txt', 'w').write('x'))
attempt('rename ref away', lambda: os.rename('ref', 'ref_old'))
"""
            got, notices = errno_results_of(kc, code)
        assert all(outcome != "done" for outcome in got.values()), got
        assert (ws / "config.yaml").read_text() == "mine: 1\n"
        assert (ws / "ref" / "a.txt").read_text() == "mine\n"
        assert not (ws / "ref" / "b.txt").exists()
        assert (ws / "new.yaml").exists()


@pytest.mark.parametrize("mode", MODES)
def test_an_ro_link_keeps_its_own_name(mode):
    # --ro given a link: the mount went on its target, and the link's own name was free to be
    # renamed away and made again as an ordinary folder the host then read (the outside pass,
    # B2).
    with fresh_workspace("belljar-broker-ro-link-") as ws:
        (ws / "realdir").mkdir()
        (ws / "realdir" / "a.txt").write_text("keep\n")
        (ws / "lnk").symlink_to("realdir")
        open_to_all_but_links(ws)
        with kernel(mode, ws, ["--ro", str(ws / "lnk")]) as (km, kc):
            code = f"""
os.chdir({str(ws)!r})
attempt('rename the link', lambda: os.rename('lnk', 'lnk_old'))
attempt('remove the link', lambda: os.unlink('lnk'))
attempt('write through it', lambda: open('lnk/a.txt', 'w').write('PWN'))
"""
            got, notices = errno_results_of(kc, code)
        assert all(outcome != "done" for outcome in got.values()), got
        assert (ws / "lnk").is_symlink()
        assert (ws / "lnk" / "a.txt").read_text() == "keep\n"


# --- the names on a protected link's way (held_names.hpp), and a file's second name ---

def all_refused(kc, code):
    """Runs the attempts in `code`; each must be refused. The notices on stderr."""
    got, notices = errno_results_of(kc, code)
    assert all(outcome != "done" for outcome in got.values()), got
    return notices

@pytest.mark.parametrize("mode", MODES)
def test_every_link_on_a_protected_links_way_is_held(mode):
    # B1 of the outside pass: .bashrc -> dotfiles/bashrc -> ../real/bashrc. Only the last target
    # was guarded; the middle link was renamed away and replaced, and the host's .bashrc ran it.
    with fresh_workspace("belljar-broker-chain-") as ws:
        (ws / "dotfiles").mkdir()
        (ws / "real").mkdir()
        (ws / "real" / "bashrc").write_text("orig\n")
        (ws / "dotfiles" / "bashrc").symlink_to("../real/bashrc")
        (ws / ".bashrc").symlink_to("dotfiles/bashrc")
        (ws / "notes").mkdir()
        open_to_all_but_links(ws)
        with kernel(mode, ws) as (km, kc):
            code = f"""
os.chdir({str(ws)!r})
attempt('rename the middle link', lambda: os.rename('dotfiles/bashrc', 'dotfiles/old'))
attempt('remove the middle link', lambda: os.unlink('dotfiles/bashrc'))
attempt('write the end by its name', lambda: open('real/bashrc', 'a').write('echo PWN\\n'))
attempt('rename the end', lambda: os.rename('real/bashrc', 'real/old'))
attempt('rename the folder of the link', lambda: os.rename('dotfiles', 'dotfiles_old'))
attempt('rename the folder of the end', lambda: os.rename('real', 'real_old'))
attempt('re-time the end', lambda: os.utime('real/bashrc', (0, 0)))
"""
            got, notices = errno_results_of(kc, code)
            ordinary, _ = errno_results_of(kc, "attempt('ordinary', lambda: open('notes/a.txt', 'w').write('x'))")
        assert all(outcome != "done" for outcome in got.values()), got
        assert ordinary == {"ordinary": "done"}
        assert os.readlink(ws / "dotfiles" / "bashrc") == "../real/bashrc"
        assert (ws / ".bashrc").read_text() == "orig\n"
        assert "on the way of the protected link .bashrc" in notices, notices


@pytest.mark.parametrize("mode", MODES)
def test_a_protected_link_to_a_missing_name_holds_that_name(mode):
    # B3: a protected name whose link leads nowhere yet. Its end was made by its ordinary name,
    # and the host's shell or editor read it. No link may stand on the way either.
    with fresh_workspace("belljar-broker-dangling-") as ws:
        (ws / "d2").mkdir()
        (ws / ".profile").symlink_to("d2/myprofile")
        (ws / ".vscode").symlink_to("data")
        (ws / ".zprofile").symlink_to("d4/zprofile")
        (ws / "notes").mkdir()
        open_to_all_but_links(ws)
        with kernel(mode, ws) as (km, kc):
            code = f"""
os.chdir({str(ws)!r})
attempt('make the end', lambda: open('d2/myprofile', 'w').write('echo PWN\\n'))
attempt('make the folder end', lambda: os.mkdir('data'))
attempt('a link on the way', lambda: os.symlink('notes', 'd4'))
os.symlink('notes', 'lnk')
attempt('a link moved onto the way', lambda: os.rename('lnk', 'd4'))
os.mkdir('x'); os.symlink('../notes/z', 'x/zprofile')
attempt('a folder with the end moved in', lambda: os.rename('x', 'd4'))
os.mkdir('d4')
attempt('make the end below a made folder', lambda: open('d4/zprofile', 'w').write('echo PWN\\n'))
"""
            all_refused(kc, code)
        assert not (ws / "d2" / "myprofile").exists()
        assert not (ws / "data").exists()
        assert (ws / "d4").is_dir() and not (ws / "d4").is_symlink()
        assert not (ws / "d4" / "zprofile").exists() and not (ws / "notes" / "zprofile").exists()


@pytest.mark.parametrize("mode", MODES)
def test_a_protected_links_end_is_closed_by_its_own_name_and_from_inside(mode):
    # Degraded mode held a change through the link by the link's name, but not the end's own
    # name, nor a change made from inside it (chdir('.vscode'), then a relative name).
    with fresh_workspace("belljar-broker-end-name-") as ws:
        (ws / "data").mkdir()
        (ws / "data" / "settings.json").write_text("{}\n")
        (ws / ".vscode").symlink_to("data")
        open_to_all_but_links(ws)
        with kernel(mode, ws) as (km, kc):
            code = f"""
os.chdir({str(ws)!r})
attempt('write the end by its name', lambda: open('data/settings.json', 'w').write('PWN'))
attempt('a new file in the end', lambda: open('data/tasks.json', 'w').write('PWN'))
os.chdir('.vscode')
attempt('a new file from inside', lambda: open('tasks.json', 'w').write('PWN'))
attempt('write from inside', lambda: open('settings.json', 'a').write('PWN'))
"""
            all_refused(kc, code)
        assert (ws / "data" / "settings.json").read_text() == "{}\n"
        assert not (ws / "data" / "tasks.json").exists()


@pytest.mark.parametrize("mode", MODES)
def test_a_link_inside_a_protected_folder_holds_its_way(mode):
    # `ln -s ../../hooks/pre-commit .git/hooks/pre-commit`, git's usual way to share a hook: the
    # host's git runs hooks/pre-commit, a plain name in the workspace.
    with fresh_workspace("belljar-broker-hook-link-") as ws:
        (ws / ".git" / "hooks").mkdir(parents=True)
        (ws / "hooks").mkdir()
        (ws / "hooks" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
        (ws / ".git" / "hooks" / "pre-commit").symlink_to("../../hooks/pre-commit")
        open_to_all_but_links(ws)
        with kernel(mode, ws) as (km, kc):
            code = f"""
os.chdir({str(ws)!r})
attempt('write the hook', lambda: open('hooks/pre-commit', 'a').write('touch /tmp/PWN\\n'))
attempt('replace the hook', lambda: os.rename('hooks', 'hooks_old'))
attempt('remove the hook', lambda: os.unlink('hooks/pre-commit'))
"""
            all_refused(kc, code)
        assert (ws / "hooks" / "pre-commit").read_text() == "#!/bin/sh\nexit 0\n"


@pytest.mark.parametrize("mode", MODES)
def test_a_link_the_host_makes_while_the_kernel_runs_is_held_at_the_next_cell(mode):
    with fresh_workspace("belljar-broker-late-link-") as ws:
        (ws / "dotfiles").mkdir()
        (ws / "dotfiles" / "bashrc").write_text("orig\n")
        open_to_all_but_links(ws)
        with kernel(mode, ws) as (km, kc):
            before, _ = errno_results_of(
                kc, f"attempt('before', lambda: open({str(ws / 'dotfiles' / 'bashrc')!r}, 'a'))")
            (ws / ".bashrc").symlink_to("dotfiles/bashrc")
            after, _ = errno_results_of(kc, f"""
attempt('after', lambda: open({str(ws / 'dotfiles' / 'bashrc')!r}, 'a').write('echo PWN'))
""")
        assert before == {"before": "done"}
        assert after["after"] != "done", after
        assert (ws / "dotfiles" / "bashrc").read_text() == "orig\n"


@pytest.mark.parametrize("mode", MODES)
def test_a_file_with_a_second_name_is_not_changed_through_it(mode):
    # B4: a hard link the host made is a second name for a guarded (or --ro) file. The sandbox
    # makes none itself (EPERM); the broker cannot tell which other name a file has.
    with fresh_workspace("belljar-broker-hard-link-") as ws:
        (ws / ".bashrc").write_text("orig\n")
        (ws / "notes").mkdir()
        os.link(ws / ".bashrc", ws / "notes" / "bashrc.bak")
        (ws / "config.yaml").write_text("cfg\n")
        os.link(ws / "config.yaml", ws / "notes" / "copy.yaml")
        (ws / "notes" / "plain.txt").write_text("plain\n")
        open_to_all(ws)
        mode_before = (ws / ".bashrc").stat().st_mode
        with kernel(mode, ws, ["--ro", str(ws / "config.yaml")]) as (km, kc):
            code = f"""
os.chdir({str(ws)!r})
attempt('append to the dot-file', lambda: open('notes/bashrc.bak', 'a').write('echo PWN\\n'))
attempt('truncate the dot-file', lambda: os.truncate('notes/bashrc.bak', 0))
attempt('re-mode the dot-file', lambda: os.chmod('notes/bashrc.bak', 0o600))
attempt('append to the --ro file', lambda: open('notes/copy.yaml', 'a').write('PWN\\n'))
"""
            got, notices = errno_results_of(kc, code)
            ordinary, _ = errno_results_of(kc, f"""
os.chdir({str(ws)!r})
attempt('read the second name', lambda: open('notes/bashrc.bak').read())
attempt('write a plain file', lambda: open('notes/plain.txt', 'a').write('more\\n'))
""")
        assert all(outcome != "done" for outcome in got.values()), got
        assert ordinary == {"read the second name": "done", "write a plain file": "done"}
        assert (ws / ".bashrc").read_text() == "orig\n"
        assert (ws / ".bashrc").stat().st_mode == mode_before
        assert (ws / "config.yaml").read_text() == "cfg\n"
        assert "another name (a hard link" in notices, notices


@pytest.mark.parametrize("mode", MODES)
def test_a_dot_names_link_is_held_though_no_pattern_names_it(mode):
    # The second pass on the held names: only pattern-named links were followed, so a home's
    # usual dotfile links (.gitconfig, .config/nvim, a stow-folded .local) led to plain names.
    with fresh_workspace("belljar-broker-dot-links-") as ws:
        (ws / "dotfiles" / "nvim").mkdir(parents=True)
        (ws / "dotfiles" / "gitconfig").write_text("[user]\n")
        (ws / "dotfiles" / "nvim" / "init.lua").write_text("-- mine\n")
        (ws / "dotlocal" / "bin").mkdir(parents=True)
        (ws / ".config").mkdir()
        (ws / ".gitconfig").symlink_to("dotfiles/gitconfig")
        (ws / ".config" / "nvim").symlink_to("../dotfiles/nvim")
        (ws / ".local").symlink_to("dotlocal")
        open_to_all_but_links(ws)
        with kernel(mode, ws) as (km, kc):
            code = f"""
os.chdir({str(ws)!r})
attempt('git config', lambda: open('dotfiles/gitconfig', 'a').write('[core]\\n\\tfsmonitor = x\\n'))
attempt('nvim init', lambda: open('dotfiles/nvim/init.lua', 'w').write('os.execute("x")'))
attempt('a command first on PATH', lambda: open('dotlocal/bin/ls', 'w').write('#!/bin/sh\\n'))
"""
            all_refused(kc, code)
        assert (ws / "dotfiles" / "gitconfig").read_text() == "[user]\n"
        assert not (ws / "dotlocal" / "bin" / "ls").exists()


@pytest.mark.parametrize("mode", MODES)
def test_links_inside_a_ways_end_are_followed(mode):
    # .git/hooks -> ../githooks, and githooks/pre-commit -> ../scripts/pc.sh: the host's git
    # runs scripts/pc.sh.
    with fresh_workspace("belljar-broker-end-links-") as ws:
        (ws / ".git").mkdir()
        (ws / "githooks").mkdir()
        (ws / "scripts").mkdir()
        (ws / "scripts" / "pc.sh").write_text("#!/bin/sh\nexit 0\n")
        (ws / ".git" / "hooks").symlink_to("../githooks")
        (ws / "githooks" / "pre-commit").symlink_to("../scripts/pc.sh")
        open_to_all_but_links(ws)
        with kernel(mode, ws) as (km, kc):
            code = f"""
os.chdir({str(ws)!r})
attempt('write the hook', lambda: open('scripts/pc.sh', 'a').write('touch /tmp/PWN\\n'))
attempt('a new hook', lambda: open('githooks/post-checkout', 'w').write('#!/bin/sh\\n'))
"""
            all_refused(kc, code)
        assert (ws / "scripts" / "pc.sh").read_text() == "#!/bin/sh\nexit 0\n"


@pytest.mark.parametrize("mode", MODES)
def test_what_git_follows_from_a_git_file_and_its_config_is_held(mode):
    # `git init --separate-git-dir` leaves sub/.git as a file naming the repository; its config
    # names where hooks run (core.hooksPath) and more config to read (include.path).
    with fresh_workspace("belljar-broker-gitfile-") as ws:
        (ws / "sub").mkdir()
        (ws / "sub" / ".git").write_text("gitdir: ../subgit\n")
        (ws / "subgit").mkdir()
        (ws / "subgit" / "config").write_text(
            "[core]\n\thooksPath = githooks\n[include]\n\tpath = ../shared.gitconfig\n")
        (ws / "shared.gitconfig").write_text("[user]\n")
        (ws / "sub" / "githooks").mkdir()
        open_to_all_but_links(ws)
        with kernel(mode, ws) as (km, kc):
            code = f"""
os.chdir({str(ws)!r})
attempt('the repository config', lambda: open('subgit/config', 'a').write('[core]\\n\\tfsmonitor = x\\n'))
attempt('a hook where hooks run', lambda: open('sub/githooks/pre-commit', 'w').write('#!/bin/sh\\n'))
attempt('an included config', lambda: open('shared.gitconfig', 'a').write('[core]\\n\\tpager = x\\n'))
"""
            all_refused(kc, code)
        assert "fsmonitor" not in (ws / "subgit" / "config").read_text()
        assert not (ws / "sub" / "githooks" / "pre-commit").exists()


@pytest.mark.parametrize("mode", MODES)
def test_a_folder_a_way_leaves_by_dotdot_stays_a_folder(mode):
    # .bashrc -> dir/../real: `..` was taken by name, so `dir` was free to become a link and
    # send the host's .bashrc to a file the sandbox wrote.
    with fresh_workspace("belljar-broker-dotdot-") as ws:
        (ws / "dir").mkdir()
        (ws / "real").write_text("orig\n")
        (ws / ".bashrc").symlink_to("dir/../real")
        open_to_all_but_links(ws)
        with kernel(mode, ws) as (km, kc):
            code = f"""
os.chdir({str(ws)!r})
os.makedirs('sub/deeper')
open('sub/real', 'w').write('touch PWN\\n')
attempt('remove the folder', lambda: os.rmdir('dir'))
attempt('a link in its place', lambda: os.symlink('sub/deeper', 'dir'))
os.symlink('sub/deeper', 'lnk')
attempt('a link moved in its place', lambda: os.rename('lnk', 'dir'))
"""
            got, notices = errno_results_of(kc, code)
        assert got["remove the folder"] == "done"  # an empty folder is the learner's to remove
        assert got["a link in its place"] != "done", got
        assert got["a link moved in its place"] != "done", got
        assert not (ws / "dir").is_symlink()
        assert (ws / "real").read_text() == "orig\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="a bind mount on the host needs root")
@pytest.mark.parametrize("mode", MODES)
def test_a_link_through_another_spelling_of_the_workspace_is_held(mode):
    # W/.bashrc -> A/dotfiles/bashrc, where A is a bind mount of W: the same folder by another
    # path, compared as text before.
    with fresh_workspace("belljar-broker-alias-") as ws:
        alias = sandbox_writable_dir("belljar-broker-alias-mnt-")
        try:
            subprocess.run(["mount", "--bind", str(ws), str(alias)], check=True)
            try:
                (ws / "dotfiles").mkdir()
                (ws / "dotfiles" / "bashrc").write_text("orig\n")
                (ws / ".bashrc").symlink_to(alias / "dotfiles" / "bashrc")
                open_to_all_but_links(ws)
                with kernel(mode, ws) as (km, kc):
                    got, notices = errno_results_of(kc, f"""
attempt('write the end', lambda: open({str(ws / 'dotfiles' / 'bashrc')!r}, 'a').write('x'))
""")
                assert got["write the end"] != "done", got
                assert (ws / "dotfiles" / "bashrc").read_text() == "orig\n"
            finally:
                subprocess.run(["umount", str(alias)], check=True)
        finally:
            alias.rmdir()


@pytest.mark.parametrize("mode", MODES)
def test_a_file_open_for_writing_when_the_host_links_to_it_stops_the_sandbox(mode):
    # The second pass: a descriptor opened before the host made .bash_logout -> later/bp wrote on
    # after the survey held the name. No descriptor can be taken back: the sandbox is stopped.
    with fresh_workspace("belljar-broker-open-writer-") as ws:
        (ws / "later").mkdir()
        (ws / "later" / "bp").write_text("orig\n")
        open_to_all_but_links(ws)
        with kernel(mode, ws) as (km, kc):
            reply, out = execute(
                kc, f"import os\nWFD = os.open({str(ws / 'later' / 'bp')!r}, os.O_WRONLY)")
            assert reply["content"]["status"] == "ok", out
            (ws / ".bash_logout").symlink_to("later/bp")
            reply, out = execute(kc, "os.write(WFD, b'touch PWN\\n')")
            assert reply["content"]["status"] == "error", out
            assert "open for writing" in stderr_of(out), out
            reply, out = execute(kc, "print(1 + 1)")
            assert reply["content"]["status"] == "ok", out
            assert stdout_of(out) == "2\n"
        assert (ws / "later" / "bp").read_text() == "orig\n"


def bare_repository(path):
    """A bare git repository's shape, as `git init --bare` leaves it."""
    for folder in ("objects", "refs/heads", "hooks"):
        (path / folder).mkdir(parents=True)
    (path / "HEAD").write_text("ref: refs/heads/master\n")
    (path / "config").write_text("[core]\n\tbare = true\n")


@pytest.mark.parametrize("mode", MODES)
def test_what_git_runs_from_a_repository_is_held(mode):
    # The third and fourth passes: a bare repository's hooks (the host's `git push` runs them),
    # also with its objects a link (a shared store) or its own config naming hooks; a worktree
    # whose shared repository (`commondir`) has an ordinary name; a config read as git reads it
    # (`[core] hooksPath = x` on one line); and the home's own .gitconfig, whose relative
    # hooksPath names a folder in every repository.
    with fresh_workspace("belljar-broker-git-runs-") as ws:
        bare_repository(ws / "remote.git")
        (ws / "remote.git" / "worktrees" / "wt").mkdir(parents=True)
        (ws / "remote.git" / "worktrees" / "wt" / "commondir").write_text("../..\n")
        (ws / "wt").mkdir()
        (ws / "wt" / ".git").write_text(f"gitdir: {ws / 'remote.git' / 'worktrees' / 'wt'}\n")
        bare_repository(ws / "shared.git")
        (ws / "shared.git" / "objects").rename(ws / "store")
        (ws / "shared.git" / "objects").symlink_to(ws / "store")
        bare_repository(ws / "app.git")
        (ws / "app.git" / "config").write_text(f"[core]\n\thooksPath = {ws / 'server-hooks'}\n")
        (ws / "server-hooks").mkdir()
        (ws / "proj" / ".git").mkdir(parents=True)
        (ws / "proj" / ".git" / "config").write_text("[core] hooksPath = one-line-hooks\n")
        (ws / "proj" / "one-line-hooks").mkdir()
        (ws / ".bashrc").write_text("# a home\n")
        (ws / ".gitconfig").write_text(
            "[core]\n\thooksPath = each-repo-hooks\n"
            f"[includeIf \"gitdir:{ws}/proj/\"]\n\tpath = {ws / 'gitconfig-work'}\n")
        (ws / "gitconfig-work").write_text("[user]\n")
        open_to_all_but_links(ws)
        with kernel(mode, ws) as (km, kc):
            all_refused(kc, f"""
os.chdir({str(ws)!r})
attempt('the hook of a bare repository', lambda: open('remote.git/hooks/post-receive', 'w'))
attempt('the config of a bare repository', lambda: open('remote.git/config', 'a').write('x'))
attempt('the shared repository of a worktree', lambda: open('remote.git/hooks/pre-commit', 'w'))
attempt('a bare repository with linked objects', lambda: open('shared.git/hooks/post-receive', 'w'))
attempt('the hooks a bare repository names', lambda: open('server-hooks/post-receive', 'w'))
attempt('a one-line hooksPath', lambda: open('proj/one-line-hooks/pre-commit', 'w'))
attempt('the home config: hooks in each repository', lambda: os.mkdir('proj/each-repo-hooks'))
attempt('the config the home includes', lambda: open('gitconfig-work', 'a').write('x'))
""")
            ordinary, _ = errno_results_of(kc, f"""
attempt('ordinary', lambda: open({str(ws / 'proj' / 'main.py')!r}, 'w').write('x'))
""")
        assert ordinary == {"ordinary": "done"}
        assert not (ws / "remote.git" / "hooks" / "post-receive").exists()


@pytest.mark.parametrize("mode", MODES)
def test_a_protected_link_through_proc_holds_the_whole_workspace(mode):
    # `.profile -> /proc/self/root/W/preal`: where /proc leads is the follower's own (its cwd, its
    # root), so nothing can be held by name: the whole workspace is (fails closed).
    with fresh_workspace("belljar-broker-proc-link-") as ws:
        (ws / "preal").write_text("orig\n")
        (ws / ".profile").symlink_to(f"/proc/self/root{ws}/preal")
        open_to_all_but_links(ws)
        with kernel(mode, ws) as (km, kc):
            notices = all_refused(kc, f"""
os.chdir({str(ws)!r})
attempt('the end', lambda: open('preal', 'a').write('echo PWN\\n'))
attempt('any file', lambda: open('other.txt', 'w').write('x'))
""")
        assert "leads to the workspace itself" in notices, notices
        assert (ws / "preal").read_text() == "orig\n"


@pytest.mark.parametrize("mode", MODES)
def test_the_sandbox_cannot_make_a_folder_a_git_repository(mode):
    # The fifth outside pass: a config, objects/ and refs/, then HEAD, made `data` a repository
    # the host's `git status` in data/raw found and obeyed (its fsmonitor ran on the host), in a
    # learner's repository too (git looks at data before it reaches ../.git). HEAD is refused by
    # name, made, linked, moved or written (git's spelling: `head` is a dataset's word); the
    # host's git then finds no repository there.
    with fresh_workspace("belljar-broker-no-repo-") as ws:
        (ws / "data" / "raw").mkdir(parents=True)
        (ws / "head-text").write_text("ref: refs/heads/master\n")
        open_to_all_but_links(ws)
        with kernel(mode, ws) as (km, kc):
            all_refused(kc, f"""
os.chdir({str(ws)!r})
open('data/config', 'w').write('[core]\\n\\tbare = false\\n\\tworktree = .\\n\\tfsmonitor = touch PWN\\n')
os.makedirs('data/objects', exist_ok=True)
os.makedirs('data/refs/heads', exist_ok=True)
attempt('HEAD made', lambda: open('data/HEAD', 'w').write('ref: refs/heads/master\\n'))
attempt('HEAD as a link', lambda: os.symlink('../head-text', 'data/HEAD'))
attempt('HEAD moved in', lambda: os.rename('head-text', 'data/HEAD'))
attempt('HEAD as a hard link', lambda: os.link('head-text', 'data/HEAD'))
attempt('HEAD as a folder', lambda: os.mkdir('data/HEAD'))
""")
        found = subprocess.run(["git", "-C", str(ws / "data" / "raw"), "rev-parse", "--git-dir"],
                               capture_output=True, text=True, check=False,
                               env={"PATH": os.environ["PATH"], "HOME": str(ws),
                                    "GIT_CEILING_DIRECTORIES": str(ws.parent)})
        assert found.returncode != 0, found.stdout
        assert not (ws / "data" / "raw" / "PWN").exists()


@pytest.mark.parametrize("mode", MODES)
def test_nodes_packages_are_closed(mode):
    # The fifth outside pass: node_modules/.bin/jest -> ../jest/bin/cli.js held cli.js alone
    # (an `rm -rf` of a package failed half way) while jest/lib/run.js, which cli.js requires and
    # the host's `npx jest` runs, stayed writable. node_modules is closed whole, as site-packages.
    with fresh_workspace("belljar-broker-node-") as ws:
        (ws / "web" / "node_modules" / "jest" / "lib").mkdir(parents=True)
        (ws / "web" / "node_modules" / "jest" / "lib" / "run.js").write_text("// jest\n")
        (ws / "web" / "node_modules" / ".bin").mkdir()
        (ws / "web" / "node_modules" / ".bin" / "jest").symlink_to("../jest/lib/run.js")
        (ws / "web" / "src").mkdir()
        open_to_all_but_links(ws)
        with kernel(mode, ws) as (km, kc):
            all_refused(kc, f"""
os.chdir({str(ws / 'web')!r})
attempt('a package file', lambda: open('node_modules/jest/lib/run.js', 'a').write('x'))
attempt('a new package', lambda: os.mkdir('node_modules/evil'))
attempt('a package removed', lambda: os.unlink('node_modules/jest/lib/run.js'))
attempt('node_modules moved', lambda: os.rename('node_modules', 'nm'))
attempt('node_modules made', lambda: os.mkdir('src/node_modules'))
""")
            ordinary, _ = errno_results_of(kc, f"""
attempt('the project', lambda: open({str(ws / 'web' / 'src' / 'index.js')!r}, 'w').write('x'))
""")
        assert ordinary == {"the project": "done"}
        assert (ws / "web" / "node_modules" / "jest" / "lib" / "run.js").read_text() == "// jest\n"


@pytest.mark.parametrize("mode", MODES)
def test_git_configs_reached_through_links_and_homes_below_are_followed(mode):
    # The fifth outside pass: configs git reads that the survey did not — a stow-linked
    # .gitconfig, a folded .config/git, a home below the workspace (git runs with HOME set
    # there), a `.git` that is a link, a `.git/config` that is a link, a byte order mark before
    # the first section, and init.templateDir (whose hooks a clone copies and runs).
    with fresh_workspace("belljar-broker-git-configs-") as ws:
        (ws / ".bashrc").write_text("# a home\n")
        (ws / "dotfiles" / "git").mkdir(parents=True)
        (ws / "dotfiles" / "git" / "gitconfig").write_text(
            f"[include]\n\tpath = {ws / 'dotfiles' / 'git' / 'gitconfig-work'}\n"
            f"[init]\n\ttemplateDir = {ws / 'git-templates'}\n")
        (ws / "dotfiles" / "git" / "gitconfig-work").write_text("[user]\n")
        (ws / ".gitconfig").symlink_to("dotfiles/git/gitconfig")
        (ws / "dotfiles" / "xdg-git").mkdir()
        (ws / "dotfiles" / "xdg-git" / "config").write_text("[core]\n\thooksPath = relhooks\n")
        (ws / ".config").mkdir()
        (ws / ".config" / "git").symlink_to("../dotfiles/xdg-git")
        (ws / "git-templates" / "hooks").mkdir(parents=True)
        (ws / "homes" / "bob").mkdir(parents=True)
        (ws / "homes" / "bob" / ".gitconfig").write_text(
            f"\ufeff[include]\n\tpath = {ws / 'homes' / 'bob' / 'extra'}\n")
        (ws / "homes" / "bob" / "extra").write_text("[user]\n")
        (ws / "gitdirs" / "linked.git").mkdir(parents=True)
        (ws / "gitdirs" / "linked.git" / "config").write_text("[core]\n\thooksPath = lhooks\n")
        (ws / "linked").mkdir()
        (ws / "linked" / ".git").symlink_to("../gitdirs/linked.git")
        (ws / "linked" / "lhooks").mkdir()
        (ws / "shared").mkdir()
        (ws / "shared" / "app-config").write_text("[core]\n\thooksPath = ahooks\n")
        (ws / "app" / ".git").mkdir(parents=True)
        (ws / "app" / ".git" / "config").symlink_to("../../shared/app-config")
        (ws / "app" / "ahooks").mkdir()
        open_to_all_but_links(ws)
        with kernel(mode, ws) as (km, kc):
            all_refused(kc, f"""
os.chdir({str(ws)!r})
attempt('what a linked .gitconfig includes', lambda: open('dotfiles/git/gitconfig-work', 'a').write('x'))
attempt('its templateDir', lambda: open('git-templates/hooks/post-checkout', 'w'))
attempt('a folded .config/git: hooks in each repository', lambda: os.mkdir('app/relhooks'))
attempt('a home below the workspace', lambda: open('homes/bob/extra', 'a').write('x'))
attempt('a .git that is a link', lambda: open('linked/lhooks/pre-commit', 'w'))
attempt('a .git/config that is a link', lambda: open('app/ahooks/pre-commit', 'w'))
""")
            ordinary, _ = errno_results_of(kc, f"""
attempt('ordinary', lambda: open({str(ws / 'app' / 'main.py')!r}, 'w').write('x'))
""")
        assert ordinary == {"ordinary": "done"}


@pytest.mark.parametrize("mode", MODES)
def test_a_git_config_too_large_to_read_holds_the_whole_workspace(mode):
    # The fifth outside pass: a config past the survey's bound was read cut short, and the
    # include at its end (where `git config include.path` appends) went unfollowed.
    with fresh_workspace("belljar-broker-big-config-") as ws:
        (ws / "big" / ".git").mkdir(parents=True)
        sections = "".join(f"[branch \"b{i}\"]\n\tremote = origin\n" for i in range(40000))
        (ws / "big" / ".git" / "config").write_text(
            sections + f"[include]\n\tpath = {ws / 'team.gitconfig'}\n")
        (ws / "team.gitconfig").write_text("[user]\n")
        open_to_all_but_links(ws)
        with kernel(mode, ws) as (km, kc):
            notices = all_refused(kc, f"""
os.chdir({str(ws)!r})
attempt('what it includes', lambda: open('team.gitconfig', 'a').write('x'))
attempt('any file', lambda: open('other.txt', 'w').write('x'))
""")
        assert "larger than 1 MiB" in notices, notices


@pytest.mark.parametrize("mode", MODES)
def test_a_folder_holding_head_is_closed_whole(mode):
    # The sixth outside pass walked around the exact shape (HEAD, objects/, refs/) three ways:
    # refs/ made beside a fixture's HEAD (git drops empty folders from clones), a dangling HEAD
    # link (core.preferSymlinkRefs), objects/ a link whose target was moved away for a moment;
    # and `commondir` written beside a HEAD. A HEAD is the host's: its folder is closed whole.
    with fresh_workspace("belljar-broker-head-") as ws:
        (ws / "fixture.git" / "objects" / "pack").mkdir(parents=True)
        (ws / "fixture.git" / "HEAD").write_text("ref: refs/heads/main\n")
        (ws / "fixture.git" / "config").write_text("[core]\n\tbare = true\n")
        (ws / "sym.git" / "objects").mkdir(parents=True)
        (ws / "sym.git" / "refs").mkdir()
        (ws / "sym.git" / "HEAD").symlink_to("refs/heads/unborn")
        bare_repository(ws / "norm.git")
        (ws / "store").mkdir()
        (ws / "norm.git" / "objects").rename(ws / "store" / "objects")
        (ws / "norm.git" / "objects").symlink_to("../store/objects")
        open_to_all_but_links(ws)
        with kernel(mode, ws) as (km, kc):
            all_refused(kc, f"""
os.chdir({str(ws)!r})
attempt('refs/ beside a HEAD', lambda: os.mkdir('fixture.git/refs'))
attempt('its config', lambda: open('fixture.git/config', 'a').write('x'))
attempt('commondir beside a HEAD', lambda: open('fixture.git/commondir', 'w').write('../store'))
attempt('a dangling HEAD link', lambda: open('sym.git/config', 'w').write('x'))
attempt('hooks beside a dangling HEAD', lambda: os.mkdir('sym.git/hooks'))
os.rename('store', 'store2')
attempt('objects/ moved away', lambda: open('norm.git/config', 'a').write('x'))
os.rename('store2', 'store')
""")
        assert (ws / "fixture.git" / "config").read_text() == "[core]\n\tbare = true\n"


@pytest.mark.parametrize("mode", MODES)
def test_writable_git_lets_the_sandbox_commit(mode):
    # The seventh outside pass: .git/logs holds the reflog's HEAD, and was taken for a repository
    # under a plain name, so `--writable .git` could not commit. Inside a dot-path a repository
    # is the dot rule's, which --writable opens.
    with fresh_workspace("belljar-broker-commit-") as ws:
        git = ["git", "-C", str(ws), "-c", "user.name=t", "-c", "user.email=t@example.org"]
        subprocess.run(["git", "init", "-q", str(ws)], check=True)
        (ws / "a.txt").write_text("a\n")
        subprocess.run([*git, "add", "a.txt"], check=True)
        subprocess.run([*git, "commit", "-qm", "host"], check=True)
        open_to_all_but_links(ws)
        with kernel(mode, ws, ["--writable", ".git"]) as (km, kc):
            reply, outputs = execute(kc, f"""
import os, subprocess
open({str(ws / 'b.txt')!r}, 'w').write('b')
done = subprocess.run(['git', '-C', {str(ws)!r}, '-c', 'user.name=s', '-c',
                       'user.email=s@example.org', '-c', 'safe.directory=*', 'commit', '-qam',
                       'sandbox', '--allow-empty'], capture_output=True, text=True,
                      env=dict(os.environ, GIT_CONFIG_NOSYSTEM='1'))
print(done.returncode, done.stderr)
""")
            assert reply["content"]["status"] == "ok", outputs
            assert stdout_of(outputs).startswith("0 "), stdout_of(outputs)
        log = subprocess.run(["git", "-C", str(ws), "-c", "safe.directory=*", "log", "--format=%s"],
                             capture_output=True, text=True, check=True).stdout
        assert log.split() == ["sandbox", "host"]
