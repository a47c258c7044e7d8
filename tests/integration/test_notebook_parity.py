"""A course notebook executed by nbclient on ipykernel and on belljar (in its sandbox), in the
same kind of workspace: cell by cell, the same kinds of output with the same mime types.

Only what must differ is normalized: ipykernel may split one stream into several chunks, so
adjacent stream outputs of the same name are merged before comparing. Timings, paths and
tracebacks differ by nature and are not compared; results and error names are.

Also here: the authors notebook quotes files belljar writes (a kernel.json, an audit log);
the quotes are checked against what this belljar writes, so they can't drift."""
import json
import os
import pathlib
import shutil
import tempfile

import nbformat
import pytest
from nbclient import NotebookClient

from belljar_testing import (
    BELLJAR,
    PYTHON,
    SOURCE,
    belljar,
    install_kernelspec,
    running_kernel,
    sandbox_writable_dir,
)
from belljar_testing import execute as run_cell

COURSE = SOURCE / "notebooks" / "course_example.ipynb"
AUTHORS = SOURCE / "notebooks" / "authors.ipynb"
IPYKERNEL_SPEC = "ipykernel-parity"
BELLJAR_SPEC = "belljar-parity"


@pytest.fixture(scope="module")
def kernels():
    """Both kernelspecs in one private prefix; yields its share/jupyter (for JUPYTER_PATH)."""
    prefix = pathlib.Path(tempfile.mkdtemp(prefix="belljar-parity-"))
    install_kernelspec(prefix, BELLJAR_SPEC, ["--timeout", "60"])
    state = prefix / "ipykernel-state"  # IPython's and matplotlib's own files, off the real HOME
    state.mkdir()
    spec = prefix / "share" / "jupyter" / "kernels" / IPYKERNEL_SPEC
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [PYTHON, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (ipykernel, parity)",
        "language": "python",
        "env": {"IPYTHONDIR": str(state / "ipython"), "MPLCONFIGDIR": str(state / "matplotlib"),
                "PYDEVD_DISABLE_FILE_VALIDATION": "1"},
    }))
    yield prefix / "share" / "jupyter"
    shutil.rmtree(prefix, ignore_errors=True)


class TracingClient(NotebookClient):
    """Also keeps every iopub message type per cell: update_display_data and clear_output
    leave no trace in the saved outputs, yet a frontend sees them."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.messages = {}

    def process_message(self, msg, cell, cell_index):
        if msg["msg_type"] not in ("status", "execute_input"):
            kind = msg["msg_type"]
            if kind == "stream":
                kind += ":" + msg["content"]["name"]
            trace = self.messages.setdefault(cell_index, [])
            if not (kind.startswith("stream") and trace and trace[-1] == kind):
                trace.append(kind)
        return super().process_message(msg, cell, cell_index)


def execute(kernel_name):
    """The course notebook executed on kernel_name in a fresh workspace of its own; the
    notebook and the iopub message types of each cell (by cell index)."""
    workspace = sandbox_writable_dir(f"{kernel_name}-ws-")
    (workspace / ".env").write_text("COURSE_API_KEY=sk-parity-secret-0123456789\n")
    try:
        nb = nbformat.read(COURSE, as_version=4)
        client = TracingClient(nb, kernel_name=kernel_name, timeout=120,
                               resources={"metadata": {"path": str(workspace)}})
        client.execute()
        return nb, client.messages
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


def shape(outputs):
    """What a cell showed, kind by kind: ('stream', name), (output_type, mime types) for
    displays and results, ('error', ename); adjacent streams of one name count once."""
    shapes = []
    for output in outputs:
        if output.output_type == "stream":
            entry = ("stream", output.name)
            if shapes and shapes[-1] == entry:
                continue
        elif output.output_type == "error":
            entry = ("error", output.ename)
        else:
            entry = (output.output_type, tuple(sorted(output.data)))
        shapes.append(entry)
    return shapes


def results(outputs):
    """The text of execute results and errors: deterministic in this notebook (seeded data)."""
    return [output.data.get("text/plain") if output.output_type == "execute_result"
            else f"{output.ename}: {output.evalue}"
            for output in outputs if output.output_type in ("execute_result", "error")]


def describe(outputs):
    lines = []
    for output in outputs:
        if output.output_type == "stream":
            lines.append(f"  stream {output.name}: {output.text[:200]!r}")
        elif output.output_type == "error":
            lines.append(f"  error {output.ename}: {output.evalue[:200]!r}")
        else:
            lines.append(f"  {output.output_type} {sorted(output.data)}: "
                         f"{str(output.data.get('text/plain', ''))[:200]!r}")
    return "\n".join(lines) or "  (no output)"


@pytest.fixture(scope="module")
def executed(kernels):
    saved = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(kernels)
    try:
        yield {"ipykernel": execute(IPYKERNEL_SPEC), "belljar": execute(BELLJAR_SPEC)}
    finally:
        if saved is None:
            del os.environ["JUPYTER_PATH"]
        else:
            os.environ["JUPYTER_PATH"] = saved


def code_cells(nb):
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def notebooks(executed):
    return {kernel: nb for kernel, (nb, _) in executed.items()}


def test_every_cell_shows_the_same_kinds_of_output_on_both_kernels(executed):
    reference, sandboxed = (code_cells(executed[k][0]) for k in ("ipykernel", "belljar"))
    differences = []
    for index, (ours, theirs) in enumerate(zip(sandboxed, reference)):
        if shape(ours.outputs) != shape(theirs.outputs):
            differences.append(f"cell {index}:\n{ours.source}\n-- ipykernel:\n"
                               f"{describe(theirs.outputs)}\n-- belljar:\n{describe(ours.outputs)}")
    assert not differences, "\n\n".join(differences)


def test_results_and_errors_have_the_same_text_on_both_kernels(executed):
    reference, sandboxed = (code_cells(executed[k][0]) for k in ("ipykernel", "belljar"))
    for ours, theirs in zip(sandboxed, reference):
        assert results(ours.outputs) == results(theirs.outputs), (
            f"{ours.source}\n-- ipykernel: {results(theirs.outputs)}\n-- belljar: {results(ours.outputs)}")


def test_the_course_notebook_exercises_what_it_claims(executed):
    """Guards the comparison itself: every kind of output the notebook is meant to produce is
    there (on ipykernel, hence on belljar too), so a notebook edit can't hollow the test out."""
    cells = code_cells(executed["ipykernel"][0])
    kinds = {entry for cell in cells for entry in shape(cell.outputs)}
    mimes = {mime for cell in cells for o in cell.outputs for mime in o.get("data", {})}
    assert {("stream", "stdout"), ("stream", "stderr"), ("error", "IndexError")} <= kinds
    assert {"image/png", "text/html", "text/markdown", "text/plain"} <= mimes
    assert {o.output_type for cell in cells for o in cell.outputs} >= {
        "stream", "display_data", "execute_result", "error"}


def test_every_cell_sends_the_same_kinds_of_messages_on_both_kernels(executed):
    """Displays updated in place and cleared outputs included (adjacent streams merged)."""
    (nb, reference), (_, sandboxed) = executed["ipykernel"], executed["belljar"]
    differences = [f"cell {index}:\n{nb.cells[index].source}\n-- ipykernel: {reference.get(index)}"
                   f"\n-- belljar:   {sandboxed.get(index)}"
                   for index in sorted(set(reference) | set(sandboxed))
                   if reference.get(index) != sandboxed.get(index)]
    assert not differences, "\n\n".join(differences)


def test_a_display_updated_in_place_ends_with_its_last_update_on_both_kernels(executed):
    for kernel, nb in notebooks(executed).items():
        [cell] = [c for c in code_cells(nb) if "progress.update" in c.source]
        [output] = cell.outputs
        assert output.data["text/markdown"] == "**step 3** of 3", kernel


def test_magics_and_shell_escapes_print_what_ipython_prints(executed):
    for kernel, nb in notebooks(executed).items():
        # ipykernel runs !commands on a pseudo-terminal, hence its \r\n line ends
        text = {c.source.split("\n")[0]: "".join(o.get("text", "") for o in c.outputs)
                .replace("\r\n", "\n") for c in code_cells(nb)}
        assert "Wall time" in text["%time total = int(np.arange(10**6).sum())"], kernel
        assert "1 loop" in text["%timeit -n1 -r1 sorted(readings)"], kernel
        assert text["%%writefile sensor_tools.py"] == "Writing sensor_tools.py\n", kernel
        assert text['!echo "hello from the shell"'] == "hello from the shell\nsensor_tools.py\n", kernel


def written_file(notebook, name):
    """The body of the notebook's `%%writefile NAME` cell."""
    for cell in nbformat.read(notebook, as_version=4).cells:
        first, _, body = cell.source.partition("\n")
        if cell.cell_type == "code" and first.split() == ["%%writefile", name]:
            return body
    raise AssertionError(f"{notebook.name} has no %%writefile {name} cell")


def test_the_authors_notebook_quotes_the_kernel_json_that_install_writes(tmp_path):
    quoted = json.loads(written_file(AUTHORS, "course-x-kernel.json"))
    done = belljar("install", "--prefix", str(tmp_path), "--name", "course-x",
                   "--display-name", "Course X (sandboxed)", "--allow-net", "api.example.com",
                   "--timeout", "10", "--memory", "512M", "--python", PYTHON)
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / "share/jupyter/kernels/course-x/kernel.json").read_text())
    assert os.path.realpath(written["argv"][0]) == os.path.realpath(BELLJAR)
    written["argv"][0] = quoted["argv"][0]  # where belljar is installed
    written["metadata"]["belljar"]["version"] = quoted["metadata"]["belljar"]["version"]
    assert quoted == written


def test_the_authors_notebook_quotes_audit_records_shaped_as_belljar_writes_them(tmp_path):
    quoted = [json.loads(line) for line in written_file(AUTHORS, "audit-sample.jsonl").splitlines()]
    log = tmp_path / "audit.jsonl"
    with running_kernel(flags=["--timeout", "10", "--audit-log", str(log)]) as (_, kc):
        run_cell(kc, "x = 1")
        run_cell(kc, "1 / 0")
    real = [json.loads(line) for line in log.read_text().splitlines()]

    def keys_by_event(records):
        shapes = {}
        for record in records:  # ename only comes with an error
            shapes.setdefault(record["event"], set()).update(set(record) - {"ename"})
            if "policy" in record:
                shapes["policy"] = set(record["policy"])
        return shapes

    assert keys_by_event(quoted) == keys_by_event(real)
    assert {r.get("ename") for r in quoted} >= {"TimeoutError"}
