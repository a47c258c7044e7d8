"""Debian's jupyter_kernel_test, the Jupyter conformance suite, against belljar in its sandbox.
Every test it has gets a sample, so none is skipped."""
import os
import shutil
import tempfile
import unittest

import jupyter_kernel_test

from belljar_testing import install_kernelspec, sandbox_writable_dir

_prefix = tempfile.mkdtemp(prefix="belljar-kt-")
_workspace = str(sandbox_writable_dir("belljar-kt-ws-"))


class BelljarConformance(jupyter_kernel_test.KernelTests):
    kernel_name = "belljar-conformance"
    language_name = "python"
    file_extension = ".py"

    code_hello_world = "print('hello, world')"
    code_stderr = "import sys; print('test', file=sys.stderr)"
    completion_samples = [
        {"text": "zi", "matches": {"zip"}},
        {"text": "pri", "matches": {"print"}},
    ]
    complete_code_samples = ["1", "print('hello, world')", "def f(x):\n  return x*2\n\n\n"]
    incomplete_code_samples = ["print('''hello", "def f(x):\n  x*2"]
    invalid_code_samples = ["import = 7q"]
    code_page_something = "print?"
    code_generate_error = "raise ValueError('boom')"
    code_execute_result = [
        {"code": "1+2+3", "result": "6"},
        {"code": "[n*n for n in range(1, 4)]", "result": "[1, 4, 9]"},
    ]
    code_display_data = [
        {"code": "from IPython.display import HTML, display; display(HTML('<b>test</b>'))",
         "mime": "text/html"},
        {"code": "from IPython.display import Math, display; display(Math('\\\\frac{1}{2}'))",
         "mime": "text/latex"},
    ]
    code_history_pattern = "1?2*"
    supported_history_operations = ("tail", "range", "search")
    code_inspect_sample = "zip"
    code_clear_output = "from IPython.display import clear_output; clear_output()"

    @classmethod
    def setUpClass(cls):
        spec = install_kernelspec(_prefix, cls.kernel_name, ["--workspace", _workspace])
        os.environ["JUPYTER_PATH"] = str(spec.parent.parent)
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(_prefix, ignore_errors=True)
        shutil.rmtree(_workspace, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
