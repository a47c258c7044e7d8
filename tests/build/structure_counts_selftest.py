"""The structure counts' self-test: scripts/structure_counts.py passes a tree at its limits
(tests/build/structure_counts/) and fails it, on that rule alone, once one line breaks a rule.
A count that missed a shape of declaration, or a rule that could not fail, fails here.

  build/venvs/lint/bin/python tests/build/structure_counts_selftest.py
"""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = HERE.parent.parent / "scripts" / "structure_counts.py"
FIXTURE = HERE / "structure_counts"
MARKER = "// structure_counts_selftest: "

# Each rule (the start of its line in the script's report) and the one line that breaks it:
# the file, the marker the line goes after, the line.
BREAKS = [
    ("Kernel's member functions", "kernel/session/kernel.hpp", "a member function here",
     "  void one_more(int (*callback)(int));"),
    ("Kernel's fields", "kernel/session/kernel.hpp", "a field here",
     "  std::function<void(int)> one_more_;"),
    ("files outside the Kernel's core defining Kernel:: methods",
     "kernel/session/worker_link.cpp", "a Kernel method here",
     "void Kernel::reach_in() {}"),
    ("functions over 120 lines", "sandbox/jail/long_function.cpp", "a line here",
     "  total += 1;"),
    # lizard would drop the function from its list: the long one would pass unseen.
    ("comments that hide code from lizard", "sandbox/jail/long_function.cpp", "a line here",
     "  // #lizard forgive"),
]
RULES = [rule for rule, *_ in BREAKS]


def report(root):
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False,
    )
    return run.returncode, run.stdout


def verdicts(output):
    """Each rule's verdict, from the report's rule lines."""
    found = {}
    for line in output.splitlines():
        for rule in RULES:
            if line.startswith(rule):
                found[rule] = line.rsplit(" ", 1)[-1]
    missing = set(RULES) - set(found)
    if missing:
        raise AssertionError("no line for {} in:\n{}".format(sorted(missing), output))
    return found


def insert_after_marker(path, marker, line):
    text = path.read_text(encoding="utf-8")
    anchor = MARKER + marker + "\n"
    if text.count(anchor) != 1:
        raise AssertionError("{} has no single marker {!r}".format(path, marker))
    path.write_text(text.replace(anchor, anchor + line + "\n"), encoding="utf-8")


def main():
    failures = []
    with tempfile.TemporaryDirectory(prefix="structure-counts-") as scratch:
        control = Path(scratch) / "control"
        shutil.copytree(str(FIXTURE), str(control))
        status, output = report(control)
        exact = ("Kernel's member functions: 40 " in output) and ("Kernel's fields: 20 " in output)
        if status != 0 or not exact or set(verdicts(output).values()) != {"ok"}:
            failures.append("the tree at the limits did not pass as 40 and 20:\n" + output)
        for rule, file, marker, line in BREAKS:
            broken = Path(scratch) / "broken"
            shutil.rmtree(str(broken), ignore_errors=True)
            shutil.copytree(str(FIXTURE), str(broken))
            insert_after_marker(broken / file, marker, line)
            status, output = report(broken)
            expected = {r: "EXCEEDED" if r == rule else "ok" for r in RULES}
            if status != 1 or verdicts(output) != expected:
                failures.append("{!r} in {} should fail {!r} alone (exit {}):\n{}".format(
                    line.strip(), file, rule, status, output))
    for failure in failures:
        print("FAILED: " + failure)
    print("{} of {} cases passed".format(len(BREAKS) + 1 - len(failures), len(BREAKS) + 1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
