"""The table of module names a host Python imports from the folder it starts in
(sandbox/layers/host_modules.cpp), against the host tools themselves: a stock ipykernel started
the way JupyterLab starts it (`python -m ipykernel_launcher`, run a cell, complete, inspect),
`python -m pip` and `python -i` each run with a recorder at the front of sys.meta_path, which
writes down every top-level name looked up (optional imports that fail included). A name they
look up that the table lacks would be one the sandbox could plant in a notebook's folder and
have the host run: the test fails the day a new version looks up a new one."""
import os
import re
import subprocess
import sys
import tempfile

from belljar_testing import FRONTENDS, PYTHON, SANDBOX_VENV_PYTHON, SOURCE

RECORDER = """
import os, sys
_record = os.environ["BELLJAR_TEST_IMPORTS_RECORD"]
_seen = set()
class _Recorder:
    def find_spec(self, fullname, path=None, target=None):
        top = fullname.partition(".")[0]
        if top not in _seen:
            _seen.add(top)
            with open(_record, "a") as f:
                f.write(top + "\\n")
        return None
sys.meta_path.insert(0, _Recorder())
"""

KERNEL_ROUND = """
import os, sys
from jupyter_client.manager import start_new_kernel
folder, recorder, record = sys.argv[1:]
env = dict(os.environ, PYTHONPATH=recorder, BELLJAR_TEST_IMPORTS_RECORD=record)
km, kc = start_new_kernel(kernel_name="python3", cwd=folder, env=env)
try:
    kc.execute_interactive("1 + 1", timeout=60)
    kc.complete("impo")
    kc.get_shell_msg(timeout=60)
    kc.inspect("print")
    kc.get_shell_msg(timeout=60)
finally:
    kc.stop_channels()
    km.shutdown_kernel()
"""


def table():
    text = (SOURCE / "sandbox/layers/host_modules.cpp").read_text()
    names = re.search(r'R"names\((.*?)\)names"', text, re.S).group(1).split()
    prefixes = re.search(r"kPrefixes\[\] = \{(.*?)\};", text, re.S).group(1)
    return set(names), re.findall(r'"([^"]+)"', prefixes)


def missing(looked_up):
    names, prefixes = table()
    return sorted(n for n in looked_up if n not in names and not any(n.startswith(p) for p in prefixes))


def recorded(run):
    with tempfile.TemporaryDirectory(prefix="belljar-host-modules-") as scratch:
        recorder = os.path.join(scratch, "recorder")
        folder = os.path.join(scratch, "notebooks")
        os.mkdir(recorder)
        os.mkdir(folder)
        with open(os.path.join(recorder, "sitecustomize.py"), "w") as f:
            f.write(RECORDER)
        record = os.path.join(scratch, "record")
        run(folder, recorder, record)
        with open(record) as f:
            return set(f.read().split())


def python_env(recorder, record):
    return dict(os.environ, PYTHONPATH=recorder, BELLJAR_TEST_IMPORTS_RECORD=record)


def test_a_stock_kernel_looks_up_no_name_the_table_lacks():
    python = str(FRONTENDS / "bin" / "python")
    got = recorded(lambda folder, recorder, record: subprocess.run(
        [python, "-c", KERNEL_ROUND, folder, recorder, record], check=True, capture_output=True,
        timeout=180))
    # The recording is real: the launcher itself, and the kernel's own packages, were looked up.
    assert {"ipykernel_launcher", "ipykernel", "zmq", "IPython"} <= got, sorted(got)
    assert missing(got) == []


def test_pip_and_the_repl_look_up_no_name_the_table_lacks():
    python = str(FRONTENDS / "bin" / "python")

    def pip(folder, recorder, record):
        subprocess.run([python, "-m", "pip", "--version"], cwd=folder, check=True,
                       capture_output=True, env=python_env(recorder, record), timeout=120)
        subprocess.run([python, "-i"], cwd=folder, input="x = 1\n", text=True, check=True,
                       capture_output=True, env=python_env(recorder, record), timeout=120)

    got = recorded(pip)
    assert {"pip", "readline", "rlcompleter"} <= got, sorted(got)
    assert missing(got) == []


def test_the_standard_librarys_names_are_in_the_table():
    for python in (PYTHON, SANDBOX_VENV_PYTHON, str(FRONTENDS / "bin" / "python"), sys.executable):
        names = subprocess.run([python, "-c", "import sys; print(*sys.stdlib_module_names)"],
                               capture_output=True, text=True, check=True).stdout.split()
        assert len(names) > 200, python
        assert missing(names) == [], python
