"""Runs a peer's own test suite against belljar, with ipykernel as the control, and compares.

    run_peer_suites.py SUITE        SUITE: a table of suites.toml (ipykernel, jupyter_client, nbclient)

The suite is the one its sdist ships (scripts/peer-sources.sh unpacks it into the build tree),
run by the frontends venv's pytest against the venv's packages of the same version. It runs
twice: once as it is, where the native kernel `python3` is ipykernel; once with a kernelspec
named `python3` that starts belljar (written by `belljar install`, found first through
JUPYTER_PATH, so kernels the suite starts in subprocesses are belljar's too; its audit log
proves they were). suites.toml names the files run, the tests that cannot apply to a sandboxed
kernel and those that start only the suite's own test kernels (both deselected in both runs,
each with its reason), and belljar's known gaps (run, and reported). The run fails on a test that fails with belljar but not with ipykernel and is not a
known gap, and on a listed test the suite no longer has; a known gap that passes is reported.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent
BELLJAR = Path(os.environ["BELLJAR"])
FRONTENDS = Path(os.environ["BELLJAR_FRONTENDS"])
SANDBOX_PYTHON = os.environ["BELLJAR_SANDBOX_VENV_PYTHON"]
PEER_SUITES = BELLJAR.parent / "peer-suites"
KERNELS = ("ipykernel", "belljar")
# Each run is bounded, so a hang fails with its log rather than at ctest's timeout.
RUN_DEADLINE = 600


def venv_version(package):
    return subprocess.run(
        [FRONTENDS / "bin/python", "-c",
         f"import importlib.metadata as m; print(m.version({package!r}))"],
        check=True, capture_output=True, text=True).stdout.strip()


def sdist_version(suite):
    sdists = [p.name for p in (PEER_SUITES / "sdists").glob(f"{suite}-*.tar.gz")]
    if len(sdists) != 1:
        sys.exit(f"peer suites: no single sdist of {suite} in {PEER_SUITES}/sdists "
                 "(scripts/peer-sources.sh makes them)")
    return sdists[0][len(suite) + 1:-len(".tar.gz")]


def listed(entries):
    """{test id: reason} from a list of {reason, tests} tables."""
    return {test: entry["reason"] for entry in entries for test in entry["tests"]}


def names(listed_id, test):
    """Whether a listed id names the test: itself, its parameters, or its file or class."""
    return test == listed_id or test.startswith((listed_id + "[", listed_id + "::"))


def belljar_kernelspec(work):
    """A kernelspec named python3 that starts belljar on the learner's venv."""
    prefix = work / "belljar-prefix"
    audit = work / "belljar-audit.jsonl"
    subprocess.run([BELLJAR, "install", "--prefix", prefix, "--name", "python3",
                    "--python", SANDBOX_PYTHON, "--audit-log", audit],
                   check=True, stdout=subprocess.DEVNULL)
    return prefix / "share/jupyter", audit


def environment(work, kernel, jupyter_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "BELLJAR_PEER"))}
    home = work / f"home-{kernel}"
    home.mkdir()
    env.update(HOME=str(home), PYTHONPATH=str(HERE), PYTHONDONTWRITEBYTECODE="1",
               BELLJAR_PEER_OUTCOMES=str(work / f"{kernel}.jsonl"))
    if jupyter_path:
        env["JUPYTER_PATH"] = str(jupyter_path)
    return env


def pytest_command(suite_dir, suite_config, deselected, extra):
    """The suite's pytest, its settings and node ids from the suite's root whatever the working
    directory (each run has its own: some tests make unix sockets with relative names)."""
    command = [str(FRONTENDS / "bin/python"), "-m", "pytest", "-p", "peer_outcomes",
               "--rootdir", str(suite_dir), "-c", str(suite_dir / "pyproject.toml"),
               "-p", "no:cacheprovider", "-o", "addopts=-ra", "-o", "console_output_style=classic",
               # pytest-asyncio 1.x warns (an error under the suites' filterwarnings) when unset
               "-o", "asyncio_default_fixture_loop_scope=function",
               # a test past its timeout fails alone (the "thread" method ends the whole run)
               "-o", "timeout_method=signal", *extra]
    for test in deselected:
        command += ["--deselect", test]
    return command + [str(suite_dir / f) for f in suite_config["files"]]


def collected(suite_dir, suite_config, env):
    """Every node id the suite's files hold."""
    run = subprocess.run(pytest_command(suite_dir, suite_config, [], ["--collect-only", "-q"]),
                         cwd=suite_dir, env=env, capture_output=True, text=True, timeout=120)
    ids = [line for line in run.stdout.splitlines() if "::" in line]
    if run.returncode != 0 or not ids:
        sys.exit(f"peer suites: collecting {suite_dir} failed:\n{run.stdout}\n{run.stderr}")
    return ids


def run_both(suite_dir, suite_config, deselected, envs, logs):
    """Both runs side by side (they mostly wait on kernels); {kernel: finished in time}."""
    runs = {}
    for kernel in KERNELS:
        out = open(logs[kernel], "w")
        cwd = Path(envs[kernel]["HOME"]).parent / f"cwd-{kernel}"
        cwd.mkdir()
        runs[kernel] = (subprocess.Popen(pytest_command(suite_dir, suite_config, deselected, []),
                                         cwd=cwd, env=envs[kernel], stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True), out)
    finished = {}
    for kernel, (process, out) in runs.items():
        try:
            process.wait(timeout=RUN_DEADLINE)
            finished[kernel] = True
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()
            out.write(f"\n[run_peer_suites] the run passed its {RUN_DEADLINE} s deadline\n")
            finished[kernel] = False
        out.close()
    return finished


def outcomes(path):
    """({test id: outcome}, whether the session ended) from peer_outcomes.py's lines."""
    if not path.exists():
        return {}, False
    with open(path) as lines:
        records = [json.loads(line) for line in lines]
    return ({r["test"]: r for r in records if "test" in r},
            any(r.get("finished") for r in records))


def counts(results):
    return {kind: sum(r["outcome"] == kind for r in results.values())
            for kind in ("passed", "failed", "skipped")}


def main():
    suite = sys.argv[1]
    config = tomllib.loads((HERE / "suites.toml").read_text())[suite]
    suite_dir = PEER_SUITES / suite
    version = sdist_version(suite)
    if venv_version(suite) != version:
        sys.exit(f"peer suites: the {suite} sdist is {version}, the venv has "
                 f"{venv_version(suite)}: bump requirements/peer-sources.txt with frontends.txt")
    not_applicable = listed(config.get("not_applicable", []))
    own_kernels = listed(config.get("own_kernels_only", []))
    known_gaps = listed(config.get("known_gaps", []))
    problems = []

    work = Path(tempfile.mkdtemp(prefix=f"belljar-peers-{suite}-"))
    try:
        jupyter_path, audit = belljar_kernelspec(work)
        all_ids = collected(suite_dir, config, environment(work, "collect", None))
        for test in [*not_applicable, *own_kernels, *known_gaps]:
            if not any(names(test, i) for i in all_ids):
                problems.append(f"listed in suites.toml but not in the suite: {test}")

        envs = {kernel: environment(work, kernel, jupyter_path if kernel == "belljar" else None)
                for kernel in KERNELS}
        logs = {kernel: work / f"{kernel}.log" for kernel in KERNELS}
        finished = run_both(suite_dir, config, [*not_applicable, *own_kernels], envs, logs)
        results = {}
        for kernel in KERNELS:
            results[kernel], ended = outcomes(work / f"{kernel}.jsonl")
            if not finished[kernel] or not ended:
                problems.append(f"the {kernel} run did not finish; its log ends:\n" +
                                "\n".join(logs[kernel].read_text().splitlines()[-40:]))

        starts = sum('"kernel_start"' in line for line in audit.read_text().splitlines()) \
            if audit.exists() else 0
        if starts == 0:
            problems.append("no belljar kernel started in the belljar run: the switch failed")

        control, ours = results["ipykernel"], results["belljar"]
        excluded = sum(any(names(t, i) for t in not_applicable) for i in all_ids)
        own = sum(any(names(t, i) for t in own_kernels) for i in all_ids)
        print(f"{suite} {version}: {len(all_ids)} tests in the files run, {excluded} not "
              f"applicable, {own} starting only the suite's own kernels; "
              f"belljar kernels started: {starts}")
        for kernel, results_of in (("belljar", ours), ("ipykernel", control)):
            c = counts(results_of)
            print(f"  {kernel:9}  passed {c['passed']:3}  failed {c['failed']:3}  "
                  f"skipped {c['skipped']:3}")

        def gap_reason(test):
            return next((r for t, r in known_gaps.items() if names(t, test)), None)

        for test, result in sorted(ours.items()):
            theirs = control.get(test, {"outcome": "missing"})["outcome"]
            reason = gap_reason(test)
            if result["outcome"] == "failed" and theirs == "failed":
                print(f"  fails with both: {test}: {result['message']}")
            elif result["outcome"] == "failed" and reason:
                print(f"  known gap: {test} ({reason})")
            elif result["outcome"] == "failed":
                problems.append(f"fails with belljar only: {test}: {result['message']}")
            elif reason and result["outcome"] == "passed":
                # Said, not failed: a gap that passes only sometimes must not fail the build.
                print(f"  known gap passed this time (remove it once it always does): {test}")
        for test, result in sorted(control.items()):
            if result["outcome"] == "failed" and ours.get(test, {}).get("outcome") != "failed":
                print(f"  fails with ipykernel only: {test}: {result['message']}")

        if problems:
            print("\nFAILED:\n  " + "\n  ".join(problems))
            print(f"\nlogs: {work}")
            work = None  # kept for reading
            return 1
        return 0
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
