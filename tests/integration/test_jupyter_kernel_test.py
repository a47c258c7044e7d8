"""jupyter_kernel_test 0.7, the Jupyter conformance suite from PyPI (the frontends venv, with
jupyter_client 8), against belljar in its sandbox and, in the same run, against ipykernel 7 as
the control, with the same samples (tests/clients/kernel_tests.py, run under the venv's Python).

belljar passes every case and subtest. The control passes every one too, but for the deviations
listed here with their reason: each is a case the suite can fail, shown failing on a real kernel.
Outcomes are compared case by case, so a case belljar fails that ipykernel passes names itself."""
import json
import os
import subprocess

from belljar_testing import FRONTENDS, SOURCE

# Case -> why the control does not pass it.
CONTROL_FAILS = {
    "test_history (hist_access_type='range')":
        "IPython answers a range of its current session as session 0, not the number its tail "
        "reply gave (ipykernel 7.4, IPython 9)",
    "test_history": "its range subtest above",
}
# Case -> why belljar does not claim it (the suite skips it).
BELLJAR_SKIPS = {
    "Welcome.test_recv_iopub_welcome_msg":
        "iopub_welcome is protocol 5.5's (an XPUB iopub socket, JEP 65); belljar speaks 5.3",
}


def outcomes_by_case(outcomes):
    """{case: {kernel: outcome}} from the run's {"Class.case": outcome}: the classes Belljar and
    Ipykernel (and their Welcome suites) run the same cases."""
    table = {}
    for name, outcome in outcomes.items():
        suite, case = name.split(".", 1)
        kernel = "belljar" if suite.startswith("Belljar") else "ipykernel"
        suite = suite.removeprefix("Belljar").removeprefix("Ipykernel")
        table.setdefault(f"{suite}.{case}".lstrip("."), {})[kernel] = outcome
    return table


def test_belljar_passes_the_conformance_suite_ipykernel_passes(tmp_path):
    report = tmp_path / "outcomes.json"
    done = subprocess.run([FRONTENDS / "bin" / "python", SOURCE / "tests" / "clients" / "kernel_tests.py",
                           report], env=dict(os.environ, PYTHONPATH=str(SOURCE / "tests")),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and report.exists(), done.stderr[-4000:]
    table = outcomes_by_case(json.loads(report.read_text()))

    def expected(case, kernel):
        if kernel == "belljar":
            return "skip" if case in BELLJAR_SKIPS else "pass"
        return "fail" if case in CONTROL_FAILS else "pass"

    rows = "\n".join(f"{case:<72} belljar: {row.get('belljar', '(not run)'):<24} "
                     f"ipykernel: {row.get('ipykernel', '(not run)')}" for case, row in sorted(table.items()))
    unexpected = [(case, kernel, outcome) for case, row in table.items()
                  for kernel in ("belljar", "ipykernel")
                  if not (outcome := row.get(kernel, "(not run)")).startswith(expected(case, kernel))]
    assert not unexpected, f"{unexpected}\n{rows}"
    # Every case of the suite ran on both, the listed ones included.
    assert len([case for case in table if " (" not in case]) >= 13, rows
    assert set(CONTROL_FAILS) | set(BELLJAR_SKIPS) <= set(table), rows
