"""A hardening call that fails is a refusal, not a shrug: the supervisor's and the warden's
prctl calls are made to fail for real (tests/tools/refuse_prctl.cpp: a seccomp filter that
answers one prctl option with EPERM) and belljar must refuse to start, in one line naming the
call and errno, with nothing run.
"""
import os
import pathlib
import subprocess

from belljar_testing import BELLJAR, NO_NAMESPACES, PYTHON, SOURCE, sandbox_writable_dir

REFUSE_PRCTL = os.environ.get("BELLJAR_REFUSE_PRCTL",
                              str(SOURCE / "build" / "tests" / "refuse_prctl"))
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


def run_refused(option, *args, wrapper=()):
    workspace = sandbox_writable_dir("belljar-ws-")
    marker = pathlib.Path(workspace) / "ran"
    done = subprocess.run([REFUSE_PRCTL, str(option), *wrapper, BELLJAR, "run", "--python", PYTHON,
                           "--workspace", workspace, *args, "-c",
                           f"open({str(marker)!r}, 'w').write('ran')"],
                          capture_output=True, text=True, timeout=120)
    return done, marker.exists()


def test_supervisor_refuses_to_start_when_it_cannot_be_made_undumpable():
    done, ran = run_refused(PR_SET_DUMPABLE, "--isolation", "none")
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert "prctl(PR_SET_DUMPABLE, 0): Operation not permitted" in done.stderr, done.stderr
    assert "refusing to start" in done.stderr
    assert not ran, "the cell ran although the supervisor stayed dumpable"


def test_warden_refuses_when_it_cannot_become_the_subreaper():
    # Degraded mode without namespaces (a default pod: the Landlock warden) makes itself the
    # session's subreaper; only it calls PR_SET_CHILD_SUBREAPER, so the supervisor starts and
    # the warden's refusal is what is seen.
    done, ran = run_refused(PR_SET_CHILD_SUBREAPER, "--isolation", "degraded",
                            wrapper=[NO_NAMESPACES])
    assert done.returncode != 0, (done.returncode, done.stdout, done.stderr)
    assert "prctl(PR_SET_CHILD_SUBREAPER, 1)" in done.stderr, done.stderr
    assert "Operation not permitted" in done.stderr, done.stderr
    assert not ran, "the cell ran although the warden could not reap the session's orphans"


def test_the_filter_alone_refuses_nothing_else():
    # Control: the same wrapper refusing an option belljar never uses lets the cell run.
    done, ran = run_refused(1000, "--isolation", "none")
    assert done.returncode == 0, done.stderr
    assert ran
