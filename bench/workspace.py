#!/usr/bin/python3
"""What the workspace broker costs: work that makes names, brokered against the same work with
the broker off, and ipykernel (no sandbox) beside both, in one run.

    /usr/bin/python3 bench/workspace.py             # writes bench/WORKSPACE.md
    /usr/bin/python3 bench/workspace.py --reps 1 --output -

Each figure is timed inside the cell (time.perf_counter around the work alone), so the
messaging each kernel adds is not in it; repetitions alternate kernels, and the median is
reported. Beside the figures, build/unotify_floor measures what the kernel's hand-over of a
call costs on this machine with no broker work at all (a plain reply, and a descriptor handed
back as a brokered open() is). The broker is turned off with the policy flag
--bench-unbrokered-workspace in that kernel's kernelspec, which exists for this comparison only
(the banner and kernel_info's notes say it is off; no environment variable can turn it off).
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile

from jupyter_client.manager import KernelManager

HERE = pathlib.Path(__file__).resolve().parent
BELLJAR = os.environ.get("BELLJAR", str(HERE.parent / "build" / "belljar"))
FLOOR = pathlib.Path(BELLJAR).parent / "unotify_floor"
PYTHON = "/usr/bin/python3"
TIMEOUT = 300

# kernel -> (label, policy flags added to its kernelspec's argv)
KERNELS = {
    "brokered": ("belljar (strict)", []),
    "unbrokered": ("belljar (strict), broker off", ["--bench-unbrokered-workspace"]),
    "ipykernel": ("ipykernel", []),
}

# figure -> (what, target for brokered / unbrokered, code timed in the cell; `fresh` is a new
# empty folder in the workspace for each repetition)
FIGURES = {
    "files": ("create 10,000 small files", 2.0, """
for n in range(10000):
    with open(f'{fresh}/f{n}.txt', 'w') as f:
        f.write('x' * 100)
"""),
    "to_csv": ("pandas DataFrame.to_csv of 100 files", 2.0, """
for n in range(100):
    frame.to_csv(f'{fresh}/frame{n}.csv')
"""),
    "unzip": ("zipfile.extractall of 2,000 entries", 2.0, """
zipfile.ZipFile(archive).extractall(fresh)
"""),
    "pip": ("pip install --target of a local wheel", 2.0, """
done = subprocess.run([sys.executable, '-m', 'pip', 'install', '--quiet', '--no-index',
                       '--no-deps', '--no-cache-dir', '--target', fresh, wheel],
                      capture_output=True, text=True)
assert done.returncode == 0, done.stderr
"""),
    "compute": ("a cell that makes no name (compute, reads)", 1.1, """
total = sum(i * i for i in range(2_000_000))
for name in sorted(os.listdir(inputs))[:200]:
    open(os.path.join(inputs, name)).read()
"""),
}

SETUP = """
import os, sys, time, subprocess, zipfile
import pandas
frame = pandas.DataFrame({'a': range(100), 'b': [str(i) * 3 for i in range(100)]})
archive = %(archive)r
wheel = %(wheel)r
inputs = %(inputs)r
"""


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def make_inputs(workspace):
    """A zip of 2,000 entries, a small wheel, and 200 files to read, in the workspace."""
    archive = workspace / "inputs" / "entries.zip"
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as z:
        for n in range(2000):
            z.writestr(f"data/part{n % 20}/entry{n}.txt", "y" * 200)
    wheel = workspace / "inputs" / "benchpkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        files = {f"benchpkg/mod{n}.py": f"VALUE = {n}\n" for n in range(40)}
        files["benchpkg/__init__.py"] = ""
        files["benchpkg-1.0.dist-info/METADATA"] = "Metadata-Version: 2.1\nName: benchpkg\nVersion: 1.0\n"
        files["benchpkg-1.0.dist-info/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: belljar-bench\n"
                                                "Root-Is-Purelib: true\nTag: py3-none-any\n")
        record = [f"{name},," for name in files] + ["benchpkg-1.0.dist-info/RECORD,,"]
        files["benchpkg-1.0.dist-info/RECORD"] = "\n".join(record) + "\n"
        for name, text in files.items():
            z.writestr(name, text)
    reads = workspace / "inputs" / "reads"
    reads.mkdir()
    for n in range(200):
        (reads / f"r{n}.txt").write_text("z" * 1000)
    for path in workspace.rglob("*"):
        os.chmod(path, 0o777 if path.is_dir() else 0o666)
    return archive, wheel, reads


class Kernel:
    def __init__(self, name, spec_dirs, workspace):
        self.name = name
        self.km = KernelManager(kernel_name="bench-ws-" + name)
        self.km.kernel_spec_manager.kernel_dirs.insert(0, str(spec_dirs))
        self.km.start_kernel(cwd=str(workspace))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def run(self, code):
        """The value of `_elapsed` after `code` ran; raises with the error otherwise."""
        reply = self.kc.execute_interactive(code, timeout=TIMEOUT, user_expressions={"e": "_elapsed"},
                                            output_hook=lambda msg: None)
        content = reply["content"]
        if content["status"] != "ok":
            raise RuntimeError("%s: %s: %s" % (self.name, content.get("ename"), content.get("evalue")))
        return float(content["user_expressions"]["e"]["data"]["text/plain"])

    def close(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def install(spec_dirs, name):
    directory = spec_dirs / ("bench-ws-" + name)
    directory.mkdir(parents=True)
    if name == "ipykernel":
        argv = [PYTHON, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    else:
        argv = [BELLJAR, "kernel", "-f", "{connection_file}", "--python", PYTHON,
                "--timeout", "300", "--workspace-quota", "4G", *KERNELS[name][1]]
    (directory / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": KERNELS[name][0], "language": "python"}))


def timed(code, fresh):
    body = "\n".join("    " + line for line in code.strip().splitlines())
    return (f"fresh = {str(fresh)!r}\nos.makedirs(fresh)\n_start = time.perf_counter()\n"
            f"if True:\n{body}\n_elapsed = time.perf_counter() - _start\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5, help="repetitions of each figure [5]")
    ap.add_argument("--output", default=str(HERE / "WORKSPACE.md"),
                    help="markdown report to write ('-' for none) [bench/WORKSPACE.md]")
    args = ap.parse_args()
    floor = json.loads(subprocess.run([str(FLOOR)], capture_output=True, text=True,
                                      check=True).stdout)

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="belljar-bench-ws-"))
    workspace = tmp / "workspace"
    workspace.mkdir()
    os.chmod(workspace, 0o777)  # the strict sandbox may run the code as another uid
    spec_dirs = tmp / "kernels"
    archive, wheel, reads = make_inputs(workspace)
    samples = {k: {f: [] for f in FIGURES} for k in KERNELS}
    kernels = {}
    try:
        for name in KERNELS:
            install(spec_dirs, name)
            kernels[name] = Kernel(name, spec_dirs, workspace)
            kernels[name].run(SETUP % {"archive": str(archive), "wheel": str(wheel),
                                       "inputs": str(reads)} + "_elapsed = 0")
        order = list(kernels)
        for rep in range(args.reps):
            for figure, (_, _, code) in FIGURES.items():
                for name in order:
                    # Kept until the run ends: ext4 skips inodes freed in the last 30 s when it
                    # allocates, so removing 10,000 files would slow whoever creates next.
                    fresh = workspace / f"{name}-{figure}-{rep}"
                    samples[name][figure].append(kernels[name].run(timed(code, fresh)))
                    log(f"  {figure} {name}: {samples[name][figure][-1] * 1000:.0f} ms")
            order = order[1:] + order[:1]  # each kernel goes first in turn
            log(f"repetition {rep + 1} of {args.reps} done")
    finally:
        for kernel in kernels.values():
            kernel.close()
        shutil.rmtree(tmp, ignore_errors=True)

    rows = []
    for figure, (what, target, _) in FIGURES.items():
        b, u, i = (statistics.median(samples[k][figure]) for k in KERNELS)
        ratio = b / u
        verdict = "met" if ratio <= target else "MISSED"
        rows.append(f"| {what} | {b * 1000:.0f} ms | {u * 1000:.0f} ms | {ratio:.2f}x "
                    f"(target <= {target:g}x: {verdict}) | {i * 1000:.0f} ms | {b / i:.2f}x |")
    report = "\n".join([
        "# The workspace broker's cost",
        "",
        f"`bench/workspace.py`, {datetime.date.today().isoformat()}, {platform.node()}: "
        f"{os.cpu_count()} cores, Linux {platform.release()}; median of {args.reps} repetitions, "
        "timed inside the cell.",
        "",
        "| work | belljar, brokered | belljar, broker off | brokered / off | ipykernel | brokered / ipykernel |",
        "| --- | --- | --- | --- | --- | --- |",
        *rows, "",
        "What the kernel's hand-over alone adds to each call on this machine (`build/unotify_floor`: "
        "a call answered at once, no broker work, 20 µs of work between calls): "
        f"{floor['reply_added_us']:.1f} µs with a plain reply, {floor['fd_added_us']:.1f} µs "
        "when a descriptor is handed back as a brokered open() is (SECCOMP_ADDFD_FLAG_SEND). "
        "Only the plain reply can ask for a same-CPU wake-up (SYNC_WAKE_UP: "
        f"{'on' if floor['sync_wake_up'] else 'refused'}); handing back a descriptor wakes the "
        "cell on whichever CPU is idle, which on a VM whose idle CPUs halt costs tens of µs.",
        ""])
    print(report)
    if args.output != "-":
        pathlib.Path(args.output).write_text(report)


if __name__ == "__main__":
    main()
