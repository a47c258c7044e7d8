"""`belljar run`: one execution in a fresh sandbox, printed as a terminal user expects, with
exit status 0 (ran), 1 (raised) or 2 (bad usage), and --json for programs."""
import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile

import pytest

from belljar_testing import BELLJAR, ISOLATION, PYTHON, SOURCE, belljar, sandbox_writable_dir

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def workspace():
    ws = sandbox_writable_dir("belljar-run-")
    yield ws
    shutil.rmtree(ws, ignore_errors=True)


def run(workspace, *args, **kwargs):
    kwargs.setdefault("cwd", workspace)
    return belljar("run", "--python", PYTHON, "--isolation", ISOLATION, "--workspace", str(workspace),
                   "--timeout", "20", *args, **kwargs)


def test_stdout_and_result_go_to_stdout(workspace):
    done = run(workspace, "-c", "print('hello')\n6 * 7")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hello\n42\n"
    assert done.stderr == ""


def test_stderr_goes_to_stderr(workspace):
    done = run(workspace, "-c", "import sys\nprint('out')\nprint('err', file=sys.stderr)")
    assert done.returncode == 0
    assert done.stdout == "out\n"
    assert done.stderr == "err\n"


def test_an_exception_exits_1_with_a_plain_traceback_on_stderr(workspace):
    done = run(workspace, "-c", "print('before')\ndef f():\n    return 1 / 0\nf()")
    assert done.returncode == 1
    assert done.stdout == "before\n"
    assert "ZeroDivisionError: division by zero" in done.stderr
    assert "return 1 / 0" in done.stderr
    assert "\x1b" not in done.stderr  # not a terminal: no colours


def test_a_file_runs_in_the_workspace(workspace):
    script = workspace / "script.py"
    script.write_text("import os\nprint(os.getcwd())\nwith open('made.txt', 'w') as f:\n    f.write('x')\n")
    done = run(workspace, str(script))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{workspace}\n"
    assert (workspace / "made.txt").read_text() == "x"


def test_code_from_standard_input(workspace):
    done = run(workspace, "-", input="total = sum(range(10))\nprint(total)\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "45\n"


def test_input_reads_the_terminal(workspace):
    done = run(workspace, "-c", "a = input('first? ')\nb = input('second? ')\nprint(a, b)",
               input="one\ntwo\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "first? second? one two\n"


def test_input_at_the_end_of_standard_input_is_eof(workspace):
    done = run(workspace, "-", input="input('more? ')\n")
    assert done.returncode == 1
    assert "EOFError" in done.stderr


def test_a_figure_is_saved_in_the_workspace(workspace):
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\nplt.plot([3, 1])\nplt.show()"
    done = run(workspace, "-c", code)
    assert done.returncode == 0, done.stderr
    first, second = workspace / "belljar-output-1.png", workspace / "belljar-output-2.png"
    assert done.stdout == f"[image/png saved to {first}]\n[image/png saved to {second}]\n"
    assert first.read_bytes().startswith(PNG_MAGIC)
    assert second.read_bytes().startswith(PNG_MAGIC)


def test_svg_displays_are_saved_too(workspace):
    code = ("from IPython.display import SVG, display\n"
            "display(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"4\" height=\"4\"/>'))")
    done = run(workspace, "-c", code)
    assert done.returncode == 0, done.stderr
    saved = workspace / "belljar-output-1.svg"
    assert done.stdout == f"[image/svg+xml saved to {saved}]\n"
    assert saved.read_text().startswith("<svg")


def test_a_symlink_planted_by_the_code_is_replaced_not_followed(workspace):
    # A link out of the workspace is refused when the code makes it (the workspace broker)...
    outside = pathlib.Path(tempfile.mkdtemp(prefix="belljar-victim-"))
    victim = outside / "victim.txt"
    victim.write_text("untouched")
    try:
        done = run(workspace, "-c", f"import os\nos.symlink({str(victim)!r}, 'belljar-output-1.png')")
        assert done.returncode != 0 and "PermissionError" in done.stderr, done.stderr
        assert "a link that leads out of the workspace" in done.stderr
        assert not (workspace / "belljar-output-1.png").exists()
        assert victim.read_text() == "untouched"
    finally:
        shutil.rmtree(outside, ignore_errors=True)
    # ...and one that stays inside it is replaced by the saved output, never written through.
    inside = workspace / "victim.txt"
    inside.write_text("untouched")
    code = ("import os\nos.symlink('victim.txt', 'belljar-output-1.png')\n"
            "import matplotlib.pyplot as plt\nplt.plot([1])\nplt.show()")
    done = run(workspace, "-c", code)
    assert done.returncode == 0, done.stderr
    assert inside.read_text() == "untouched"
    saved = workspace / "belljar-output-1.png"
    assert not saved.is_symlink()
    assert saved.read_bytes().startswith(PNG_MAGIC)


def test_json_output_has_the_structured_shape(workspace):
    done = run(workspace, "--json", "-c", "print('hi')\nimport sys; print('warn', file=sys.stderr)\n6 * 7")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(result) == {"status", "execution_count", "outputs", "error", "facts"}
    assert result["status"] == "ok"
    assert result["execution_count"] == 1
    assert result["error"] is None
    assert result["outputs"] == [
        {"type": "stream", "name": "stdout", "text": "hi\n"},
        {"type": "stream", "name": "stderr", "text": "warn\n"},
        {"type": "result", "data": {"text/plain": "42"}},
    ]
    facts = result["facts"]
    for key in ("wall_ms", "cpu_ms", "peak_memory_bytes", "limits", "limit_hit", "output_truncated",
                "egress_denied"):
        assert key in facts, key
    assert facts["limits"]["timeout_seconds"] == 20


def test_json_output_of_an_error_and_an_image(workspace):
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\nraise ValueError('nope')"
    done = run(workspace, "--json", "-c", code)
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["status"] == "error"
    assert result["error"]["ename"] == "ValueError"
    assert result["error"]["evalue"] == "nope"
    assert "\x1b" not in result["error"]["traceback"]
    display = next(o for o in result["outputs"] if o["type"] == "display")
    image = display["images"][0]
    assert image["mime_type"] == "image/png"
    assert "image/png" not in display["data"]
    assert pathlib.Path(image["file"]).read_bytes().startswith(PNG_MAGIC)
    assert image["bytes"] == pathlib.Path(image["file"]).stat().st_size


def test_a_timeout_exits_1_naming_the_limit(workspace):
    done = run(workspace, "--timeout", "1", "-c", "import time\ntime.sleep(30)")
    assert done.returncode == 1
    assert "TimeoutError" in done.stderr
    assert "--timeout" in done.stderr


@pytest.mark.parametrize("args, message", [
    ([], "needs FILE.py"),
    (["--bogus", "-c", "1"], "unknown option --bogus"),
    (["-c"], "-c: missing value"),
    (["--timeout", "soon", "-c", "1"], "--timeout"),
    (["/nonexistent/script.py"], "/nonexistent/script.py: cannot read it"),
    (["/"], "/: not a regular file"),
    (["a.py", "-c", "1"], "takes one of"),
])
def test_bad_usage_exits_2_with_one_line(workspace, args, message):
    done = belljar("run", *args, cwd=workspace)
    assert done.returncode == 2
    assert done.stdout == ""
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def readme_shell_snippet():
    readme = (SOURCE / "README.md").read_text()
    at = readme.index("For one-shot runs")
    block = re.search(r"```sh\n(.*?)```", readme[at:], re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_the_readme_examples_work(workspace):
    lines = readme_shell_snippet()
    assert len(lines) == 2
    env = dict(os.environ, PATH="/usr/bin:/bin")  # the sandbox's python3 is the system one
    extra = f"--python {PYTHON} --isolation {ISOLATION}"
    outputs = []
    for line in lines:
        command = line.replace("build/belljar run", f"{BELLJAR} run {extra}")
        done = subprocess.run(["sh", "-c", command], cwd=workspace, env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, (command, done.stderr)
        outputs.append(done.stdout)
    assert re.match(r"^3\.\d+", outputs[0])
    structured = json.loads(outputs[1])
    assert structured["outputs"] == [{"type": "stream", "name": "stdout", "text": "42\n"}]
