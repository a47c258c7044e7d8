"""The worker package's imports form a tree: no module imports another that imports it back.

A cycle (main -> session -> display -> session, or session -> main for the backend's name) makes
what a module sees at import time depend on which module a cell happened to import first, and
hides a module's real cost behind another's. The package is read with `ast`: every `import` and
`from ... import` of a belljar_worker module, at module level and inside functions and methods
(the worker imports most of its modules lazily), plus `__import__("belljar_worker...")`.
Then every module is imported on its own in a fresh interpreter started as the supervisor starts
the worker, and every name the package imports from one of its modules must be there.
"""
import ast
import json
import os
import subprocess
from pathlib import Path

import pytest

PYTHON = "/usr/bin/python3"
SOURCE = Path(os.environ.get("BELLJAR_SOURCE") or Path(__file__).resolve().parents[2])
WORKER_DIR = SOURCE / "worker"
PACKAGE = "belljar_worker"
PACKAGE_DIR = WORKER_DIR / PACKAGE


def module_names():
    """Every module of the package, its subpackages' (debugger/) included."""
    names = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = path.relative_to(WORKER_DIR).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


MODULES = module_names()


def imports_of(name, path):
    """[(imported module, names taken from it, line)] for every import of a package module
    anywhere in the file (ast.walk reaches function and method bodies too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    found.append((alias.name, (), node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                # Relative to the module's own package (`..` from a subpackage: its parent).
                package = name if path.name == "__init__.py" else name.rpartition(".")[0]
                parts = package.split(".")
                assert node.level <= len(parts), "%s:%d: import above the package" % (
                    path, node.lineno)
                base = ".".join(parts[:len(parts) - node.level + 1])
                base += "." + node.module if node.module else ""
            elif node.module and (node.module == PACKAGE or node.module.startswith(PACKAGE + ".")):
                base = node.module
            else:
                continue
            taken = []
            for alias in node.names:
                submodule = base + "." + alias.name
                if submodule in MODULES:
                    found.append((submodule, (), node.lineno))  # from . import session
                else:
                    taken.append(alias.name)
            if taken:
                found.append((base, tuple(taken), node.lineno))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id == "__import__" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and node.args[0].value.startswith(PACKAGE)):
            found.append((node.args[0].value, (), node.lineno))
    return found


def import_graph():
    graph = {}
    for name, path in MODULES.items():
        edges = graph.setdefault(name, {})
        for target, _, line in imports_of(name, path):
            assert target in MODULES, "%s:%d imports %s, which is not a module of the package" % (
                path, line, target)
            if target != PACKAGE:  # importing a submodule runs __init__ first; it imports nothing
                edges.setdefault(target, line)
    return graph


def find_cycle(graph):
    """One cycle as [a, b, ..., a], or None (depth-first search, colouring nodes)."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph.get(node, {})):
            if state.get(target) == "open":
                return stack[stack.index(target):] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_walker_sees_imports_inside_functions():
    # Guards the test itself: these imports are all inside functions, so a walker that read
    # only the module level would find no cycle anywhere and prove nothing.
    graph = import_graph()
    assert "belljar_worker.session" in graph["belljar_worker.main"]        # serve()
    assert "belljar_worker.introspection" in graph["belljar_worker.session"]  # complete()
    assert "belljar_worker.figures" in graph["belljar_worker.formatting"]     # a figure's bundle
    assert find_cycle({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": 1}, "b": {}, "c": {"a": 1, "b": 1}}) is None


def test_the_package_imports_form_no_cycle():
    graph = import_graph()
    cycle = find_cycle(graph)
    if cycle:
        steps = ["%s (%s:%d)" % (a, MODULES[a].name, graph[a][b]) for a, b in zip(cycle, cycle[1:])]
        pytest.fail("import cycle: %s -> %s" % (" -> ".join(steps), cycle[-1]))


@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_module_imports_on_its_own_in_a_fresh_interpreter(module):
    if module == "belljar_worker.inline_backend":
        pytest.importorskip("matplotlib")  # a matplotlib backend: it imports matplotlib
    # The names the package takes from this module anywhere (e.g. `from .current import
    # INLINE_BACKEND` inside a method) must exist once the module is imported on its own.
    wanted = sorted({taken for name, path in MODULES.items()
                     for target, names, _ in imports_of(name, path) if target == module
                     for taken in names})
    check = ("import sys, json, importlib; sys.path.insert(0, %r); "
             "m = importlib.import_module(%r); "
             "print(json.dumps([n for n in %r if not hasattr(m, n)]))"
             % (str(WORKER_DIR), module, wanted))
    # As the supervisor starts the worker (-s -E); -B: the test leaves the source tree alone.
    run = subprocess.run([PYTHON, "-s", "-E", "-B", "-c", check], capture_output=True,
                         text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == [], "names imported from %s that it lacks" % module
