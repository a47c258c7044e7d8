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
    """Each test's line is written once the test is over, so a run cut short still says what
    it ran; the last line, {"finished": true}, says the session ended."""

    def __init__(self, path):
        self.out = open(path, "w", encoding="utf-8")  # open for the session
        self.outcome = {}

    def pytest_runtest_logreport(self, report):
        outcome = report.outcome
        if hasattr(report, "wasxfail"):
            outcome = "skipped" if report.skipped else "passed"
        if report.when == "call" or outcome != "passed":
            seen = self.outcome.get(report.nodeid)
            if seen is None or _RANK[outcome] > _RANK[seen["outcome"]]:
                message = ""
                if outcome == "failed":
                    message = str(report.longrepr).strip().splitlines()[-1][:300]
                self.outcome[report.nodeid] = {"outcome": outcome, "message": message}
        if report.when == "teardown" and report.nodeid in self.outcome:
            self._write({"test": report.nodeid, **self.outcome.pop(report.nodeid)})

    def pytest_sessionfinish(self):
        for nodeid, result in self.outcome.items():
            self._write({"test": nodeid, **result})
        self._write({"finished": True})
        self.out.close()

    def _write(self, line):
        self.out.write(json.dumps(line) + "\n")
        self.out.flush()


def pytest_configure(config):
    path = os.environ.get("BELLJAR_PEER_OUTCOMES")
    if path:
        config.pluginmanager.register(_Outcomes(path), "belljar-peer-outcomes")
