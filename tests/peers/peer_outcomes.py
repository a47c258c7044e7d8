"""pytest plugin for the peers' suites: each test's outcome, by node id, as a JSON line.

run_peer_suites.py loads it (`-p peer_outcomes`) into a peer's own pytest run and compares
the lines of the belljar run with those of the ipykernel run. A test failed when any of its
phases (set-up, call, tear-down) failed; it was skipped when set-up skipped it; an expected
failure (xfail) that failed counts as skipped, one that passed as passed.
"""

import json
import os

_RANK = {"passed": 0, "skipped": 1, "failed": 2}


class _Outcomes:
    def __init__(self, path):
        self.path = path
        self.tests = {}

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            outcome = report.outcome
            if hasattr(report, "wasxfail"):
                outcome = "skipped" if report.skipped else "passed"
            message = ""
            if outcome == "failed":
                message = str(report.longrepr).strip().splitlines()[-1][:300]
            seen = self.tests.get(report.nodeid)
            if seen is None or _RANK[outcome] > _RANK[seen["outcome"]]:
                self.tests[report.nodeid] = {"outcome": outcome, "message": message}

    def pytest_sessionfinish(self):
        with open(self.path, "w", encoding="utf-8") as out:
            for nodeid, result in self.tests.items():
                out.write(json.dumps({"test": nodeid, **result}) + "\n")


def pytest_configure(config):
    path = os.environ.get("BELLJAR_PEER_OUTCOMES")
    if path:
        config.pluginmanager.register(_Outcomes(path), "belljar-peer-outcomes")
