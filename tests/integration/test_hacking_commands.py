"""HACKING.md stays true: its commands run as shown, its environment is ctest's, its paths exist.

A newcomer follows HACKING.md to run one test; a command that no longer works, a variable
ctest now sets that the one-line pytest command lacks, or a file the checklist names that was
moved, would leave them stuck. Each line of its shell blocks is run here from the checkout
(COMMANDS) or skipped for a reason (SKIPPED); a line in neither fails until it is handled.
The lines that run as nobody run only when the suite runs as root.
"""
import os
import pathlib
import re
import subprocess

import pytest

from belljar_testing import BELLJAR, SOURCE

HACKING = (SOURCE / "HACKING.md").read_text()
BUILD = pathlib.Path(BELLJAR).resolve().parent

SKIPPED = {
    "./scripts/install-deps.sh": "installs the machine's packages: scripts/test.sh runs it first",
    "./scripts/build.sh": "this suite runs on the build it made",
    "ctest --test-dir build -R '^unit:stop_on_error takes out' --output-on-failure":
        "ctest inside ctest would write the running ctest's logs; the same test is its own entry",
    "ctest --test-dir build -R '^integration: test_runner$' --output-on-failure":
        "ctest inside ctest; `integration: test_runner` is its own entry",
    "cd tests/browser && npm ci --no-audit --no-fund --prefer-offline --loglevel=error && "
    "XDG_STATE_HOME=$PWD/../../build/test-state BELLJAR_ARTIFACTS=$PWD/../../build/tests/artifacts "
    "BELLJAR_FRONTEND=lab node --test jupyterlab.test.mjs":
        "a browser suite (a minute and more, npm): `browser: lab` is its own entry",
}
# What each command run here must print.
COMMANDS = {
    'build/tests/unit_tests "[request_queue]"': "All tests passed",
    'build/tests/unit_tests "stop_on_error takes out the queued executes and keeps the rest in order"':
        "All tests passed (8 assertions in 1 test case)",
    'build/tests/unit_tests -# "[#jail_plan]"': "All tests passed",
    "build/tests/unit_tests --list-tags": "[request_queue]",  # its status is the tags' count
}
PYTEST_PASSED = "1 passed, 20 deselected"


def shell_lines():
    """Each command of HACKING.md's shell blocks, without its trailing comment."""
    lines = []
    for body in re.findall(r"```sh\n(.*?)```", HACKING, re.S):
        for line in body.splitlines():
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            if line:
                lines.append(line)
    return lines


def ctest_env_names():
    """TEST_ENV's variable names, as tests/CMakeLists.txt sets them for the suites."""
    cmake = (SOURCE / "tests" / "CMakeLists.txt").read_text()
    value = re.search(r'set\(TEST_ENV "([^"]*)"\)', cmake).group(1)
    return {item.split("=", 1)[0] for item in value.split(";")}


def assigned(line):
    """The names a command line assigns before running (`env A=1 B=2 cmd`)."""
    return set(re.findall(r"(?:^|\s)([A-Z_][A-Z0-9_]*)=", line))


def pytest_lines():
    return [line for line in shell_lines() if "-m pytest" in line]


def run(line):
    if BUILD != SOURCE / "build":
        pytest.skip(f"HACKING.md's commands name the checkout's build/; this build is {BUILD}")
    done = subprocess.run(["bash", "-c", line], cwd=SOURCE, capture_output=True, text=True,
                          timeout=300)
    return done.returncode, done.stdout + done.stderr


def nobody_lines():
    return [line for line in shell_lines() if "runuser -u nobody" in line]


def test_every_hacking_command_is_run_or_skipped_for_a_reason():
    lines = set(shell_lines())
    handled = set(COMMANDS) | set(SKIPPED) | set(pytest_lines()) | set(nobody_lines())
    assert lines == handled, (
        f"HACKING.md commands not handled here: {sorted(lines - handled)}; handled but no "
        f"longer in HACKING.md: {sorted(handled - lines)}")


@pytest.mark.parametrize("line", sorted(COMMANDS))
def test_a_unit_test_command_works_as_shown(line):
    _, output = run(line)
    assert COMMANDS[line] in output, f"{line}\n{output}"


def test_the_one_line_pytest_command_works_as_shown():
    line = next(line for line in pytest_lines() if "runuser" not in line)
    status, output = run(line)
    assert status == 0 and PYTEST_PASSED in output, f"{line}\n{output}"


def test_the_nobody_commands_work_as_shown():
    if os.geteuid() != 0:
        pytest.skip("runuser needs root: these lines are run when the suite runs as root")
    assert len(nobody_lines()) == 2
    for line in nobody_lines():
        status, output = run(line)
        expected = PYTEST_PASSED if "-m pytest" in line else "All tests passed"
        assert status == 0 and expected in output, f"{line}\n{output}"


def test_the_pytest_commands_set_what_ctest_sets():
    want = ctest_env_names()
    for line in pytest_lines():
        own = {"HOME", "TMPDIR"} if "runuser" in line else set()
        assert assigned(line) == want | own, (
            f"HACKING.md's command sets {sorted(assigned(line))}, ctest sets {sorted(want)}: {line}")


def test_the_environment_table_has_every_variable_ctest_sets():
    section = HACKING.split("## The environment the tests read", 1)[1].split("\n## ", 1)[0]
    table = set(re.findall(r"^\| `([A-Za-z_]+)` \|", section, re.M))
    assert ctest_env_names() <= table, (
        f"not in HACKING.md's table: {sorted(ctest_env_names() - table)}")


def test_every_file_hacking_names_exists():
    tops = ("kernel/", "sandbox/", "tests/", "scripts/", "worker/", "requirements/", "docs/")
    named = set(re.findall(r"`([^`\s]+)`", HACKING))
    paths = [span.rstrip(".,:") for span in named if span.startswith(tops)]
    # Patterns and placeholders name a kind of file, not one.
    paths = [p for p in paths if not re.search(r"[*]|NAME|COPY|test_X|\{", p)]
    assert len(paths) > 30
    missing = [p for p in paths if not (SOURCE / p).exists()]
    assert not missing, f"HACKING.md names files that are not there: {missing}"
