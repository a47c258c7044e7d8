"""What the worker's parts share without importing each other: the session being served, the
names of the inline matplotlib backend and the modules the worker stands in for.

display(), input(), the matplotlib backend and IPython's %matplotlib reach the session from
code the user calls, long after start-up; main and session import them. Reading the session
here instead of from main or session keeps the package's imports a tree (a cycle would make
which module runs first depend on which one a cell happened to import first). No imports: it
costs nothing at start-up.
"""

# The worker's Session once main built it (None outside the worker, e.g. a module imported by
# a plain interpreter: display() then prints).
session = None

# The workspace: the folder the worker started in (a cell may chdir elsewhere).
workspace = None

# matplotlib's names for inline_backend.py: matplotlib_inline's where that is installed (code
# and libraries compare matplotlib.get_backend() with it; the worker then stands in for its
# module), else one of its own.
MATPLOTLIB_INLINE = "matplotlib_inline.backend_inline"
MATPLOTLIB_INLINE_BACKEND = "module://" + MATPLOTLIB_INLINE
OWN_INLINE_BACKEND = "module://belljar_worker.inline_backend"


def inline_backend():
    """The inline backend's name in this interpreter: the default backend once matplotlib is
    imported, and what %matplotlib selects. (Asked only then: a look along sys.path, no import.)"""
    from importlib.util import find_spec
    try:
        installed = find_spec("matplotlib_inline") is not None
    except (ImportError, ValueError):
        installed = False
    return MATPLOTLIB_INLINE_BACKEND if installed else OWN_INLINE_BACKEND


# The modules of ipykernel the worker builds itself when something imports them (see
# ipykernel_stand_in.py): the finder is installed at start-up, the builder loaded on first use.
IPYKERNEL_STAND_INS = ("ipykernel", "ipykernel.comm", "ipykernel.comm.comm",
                       "ipykernel.comm.manager")
