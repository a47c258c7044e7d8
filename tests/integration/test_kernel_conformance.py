"""Debian's jupyter_kernel_test (0.4, with jupyter_client 7.4), the Jupyter conformance suite,
against belljar in its sandbox. Every test it has gets a sample (clients/kernel_samples.py), so
none is skipped; test_jupyter_kernel_test runs PyPI's against belljar and ipykernel."""
import os
import shutil
import tempfile
import unittest

import jupyter_kernel_test

from belljar_testing import install_kernelspec, sandbox_writable_dir
from clients.kernel_samples import PythonSamples

_prefix = tempfile.mkdtemp(prefix="belljar-kt-")
_workspace = str(sandbox_writable_dir("belljar-kt-ws-"))


class BelljarConformance(PythonSamples, jupyter_kernel_test.KernelTests):
    kernel_name = "belljar-conformance"
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
