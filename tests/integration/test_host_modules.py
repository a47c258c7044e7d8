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
    # What a learner's notebook does in its first minutes: cells, an error (IPython's traceback
    # looks up astroid through stack_data), completion on an object with a docstring (jedi looks
    # up numpydoc), inspection, and the everyday magics (%matplotlib, %load_ext autoreload,
    # %uv runs `python -m uv` in the folder, %notebook loads nbformat and jsonschema).
    for code in ["1 + 1", "1 / 0",
                 'def area(r):\\n    "The area of a circle of radius r."\\n    return 3.14 * r * r',
                 "%matplotlib inline", "%load_ext autoreload", "%autoreload 2", "%notebook n.ipynb",
                 "%uv --version", "%pip --version", "%timeit -n1 -r1 1", "%who", "%history -l 1",
                 "!true"]:
        kc.execute_interactive(code, timeout=120)
    for text in ("impo", "area(2).", "import os; os.pa"):
        kc.complete(text)
        kc.get_shell_msg(timeout=60)
    for text in ("print", "area"):
        kc.inspect(text, detail_level=1)
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
    # The recording is real: the launcher itself, the kernel's own packages, and what the error,
    # the completion and the magics look up (the outside attack on round three ran astroid.py,
    # numpydoc/docscrape.py, matplotlib/, autoreload.py and uv.py from the folder).
    assert {"ipykernel_launcher", "ipykernel", "zmq", "IPython", "astroid", "numpydoc",
            "matplotlib", "autoreload", "uv"} <= got, sorted(got)
    assert missing(got) == []


def test_what_matplotlib_inline_imports_is_in_the_table():
    """%matplotlib inline in a stock kernel whose environment has matplotlib: the learner's venv
    (requirements/sandbox-python.txt) stands in for it, drawing a figure as the backend does."""
    code = ("import matplotlib\nmatplotlib.use('agg')\nimport matplotlib.pyplot as plt\n"
            "plt.plot([1, 2])\nplt.savefig('/dev/null', format='png')\n")
    got = recorded(lambda folder, recorder, record: subprocess.run(
        [SANDBOX_VENV_PYTHON, "-c", code], cwd=folder, check=True, capture_output=True,
        env=python_env(recorder, record), timeout=120))
    assert {"matplotlib", "numpy", "PIL"} <= got, sorted(got)
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
