"""The `ipykernel` that code in the worker imports: comms, without a ZMQ kernel.

Widget code written for ipykernel (Debian's ipywidgets 6, matplotlib's nbagg backend) does
`from ipykernel.comm import Comm`. The real package cannot work in the worker (it is a kernel
of its own, on ZMQ sockets the sandbox does not have) and importing it costs a quarter of a
second (jupyter_client, zmq, tornado). So the worker builds `ipykernel` and `ipykernel.comm`
(with its `comm` and `manager` submodules) itself, the first time something imports them:
`ipykernel.comm` is the worker's comms (comms.py). The package's other submodules still load
from the real package's directory when it is installed, and its top-level names (version,
connection-file helpers) are read from the real modules on first use, so code that only reads
`ipykernel.__version__` keeps working and pays for nothing more.
"""
import importlib

# Where the real package keeps the names its __init__ re-exports: the versions (cheap), and
# the connection-file helpers (they import jupyter_client: only for a name not found before).
_REAL_NAME_MODULES = ("ipykernel._version", "ipykernel.connect")


def build(module):
    """Fill in a stand-in module created by import_hooks.StandInModules."""
    if module.__name__ == "ipykernel":
        _build_package(module)
    else:
        from . import comms
        module.Comm = comms.Comm
        module.CommManager = comms.CommManager
        module.__all__ = ["Comm", "CommManager"]


def _build_package(module):
    from importlib.machinery import PathFinder
    real = PathFinder.find_spec("ipykernel")  # found on sys.path, not imported
    locations = list(real.submodule_search_locations or []) if real is not None else []
    module.__path__ = locations
    module.__spec__.submodule_search_locations = locations
    if real is not None and real.origin:
        module.__file__ = real.origin
    module.__getattr__ = _real_name
    module.belljar_stand_in = True


def _real_name(name):
    """PEP 562 fallback of the stand-in package: a name the real __init__ would provide.
    Dunder names (which tools probe: __wrapped__, __all__) only from the versions module."""
    sources = _REAL_NAME_MODULES[:1] if name.startswith("__") else _REAL_NAME_MODULES
    for source in sources:
        try:
            real = importlib.import_module(source)
        except ImportError:
            continue
        if hasattr(real, name):
            return getattr(real, name)
    raise AttributeError("module 'ipykernel' has no attribute %r" % name)
