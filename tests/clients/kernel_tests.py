"""jupyter_kernel_test, the Jupyter conformance suite, against belljar in its sandbox and, as the
control, against ipykernel, with the same samples: a case belljar fails and ipykernel passes is
belljar's to fix, and a case both fail is the sample's.

Run by tests/integration/test_jupyter_kernel_test.py under the frontends venv's Python
(jupyter_kernel_test 0.7, jupyter_client 8, ipykernel 7), which compares the outcomes this
writes, one per case and subtest:

    $BELLJAR_FRONTENDS/bin/python tests/clients/kernel_tests.py OUTCOMES.json

The samples (clients/kernel_samples.py) are test_kernel_conformance's too (Debian's 0.4 on
belljar)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
import unittest

import jupyter_kernel_test

from belljar_testing import install_kernelspec, sandbox_writable_dir
from clients.kernel_samples import PythonSamples


def setUpModule():
    """Both kernelspecs in one prefix, found through JUPYTER_PATH by the suite's
    start_new_kernel; ipykernel's history in a directory of its own, not the user's."""
    global _prefix, _workspace
    _prefix = tempfile.mkdtemp(prefix="belljar-kt-")
    _workspace = str(sandbox_writable_dir("belljar-kt-ws-"))
    install_kernelspec(_prefix, "belljar-kt", ["--workspace", _workspace])
    subprocess.run([sys.executable, "-m", "ipykernel", "install", "--prefix", _prefix,
                    "--name", "ipykernel-kt"], check=True, capture_output=True)
    os.environ["JUPYTER_PATH"] = os.path.join(_prefix, "share", "jupyter")
    os.environ["IPYTHONDIR"] = os.path.join(_prefix, "ipython")


def tearDownModule():
    shutil.rmtree(_prefix, ignore_errors=True)
    shutil.rmtree(_workspace, ignore_errors=True)


class Belljar(PythonSamples, jupyter_kernel_test.KernelTests):
    kernel_name = "belljar-kt"


class Ipykernel(PythonSamples, jupyter_kernel_test.KernelTests):
    kernel_name = "ipykernel-kt"


class BelljarWelcome(jupyter_kernel_test.IopubWelcomeTests):
    kernel_name = "belljar-kt"
    support_iopub_welcome = False  # protocol 5.5's (an XPUB iopub); belljar speaks 5.3


class IpykernelWelcome(jupyter_kernel_test.IopubWelcomeTests):
    kernel_name = "ipykernel-kt"
    support_iopub_welcome = True  # ipykernel 7.2 and later


class Outcomes(unittest.TestResult):
    """Each case's and subtest's outcome by name ("Belljar.test_history (hist_access_type='range')"):
    "pass", "skip: REASON", or "fail: " / "error: " and the exception's last line."""

    def __init__(self):
        super().__init__()
        self.by_name = {}

    def _record(self, test, outcome):
        self.by_name[test.id().removeprefix(__name__ + ".")] = outcome

    @staticmethod
    def _last_line(err):
        return "".join(traceback.format_exception_only(err[0], err[1])).strip()

    def addSuccess(self, test):
        self._record(test, "pass")

    def addFailure(self, test, err):
        self._record(test, "fail: " + self._last_line(err))

    def addError(self, test, err):
        self._record(test, "error: " + self._last_line(err))

    def addSkip(self, test, reason):
        self._record(test, "skip: " + reason)

    def stopTest(self, test):
        """A case whose subtests failed gets no outcome of its own from unittest: it failed."""
        self.by_name.setdefault(test.id().removeprefix(__name__ + "."), "fail: a subtest failed")
        super().stopTest(test)

    def addSubTest(self, test, subtest, err):
        if err is None:
            self._record(subtest, "pass")
        else:
            kind = "fail: " if issubclass(err[0], test.failureException) else "error: "
            self._record(subtest, kind + self._last_line(err))


if __name__ == "__main__":
    result = Outcomes()
    unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__]).run(result)
    with open(sys.argv[1], "w") as out:
        json.dump(result.by_name, out, indent=1, sort_keys=True)
