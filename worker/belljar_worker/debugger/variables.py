"""The session's variables for the debugger's panel, when no breakpoint holds the cell.

JupyterLab asks `inspectVariables` after each output of a running cell and `variables` to
expand one; ipykernel answers both from pydevd's own variable tree over a stand-in frame
whose globals are the user's namespace, so names, values, types and expansion look exactly
as they do at a breakpoint. This does the same.
"""
import json
import re

# Names the session keeps in the namespace, not the user's (ipykernel hides the same ones).
_HIDDEN = frozenset((
    "__name__", "__doc__", "__package__", "__loader__", "__spec__", "__annotations__",
    "__builtins__", "__builtin__", "__display__", "get_ipython", "debugpy", "exit", "quit",
    "In", "Out", "_oh", "_dh", "_", "__", "___", "_ih"))
_NUMBERED = re.compile(r"^_\d")


def shown(name):
    """Whether the panel lists a variable of this name."""
    return name not in _HIDDEN and not _NUMBERED.match(name) and not name.startswith("_i")


class _Code:
    def __init__(self, filename):
        self.co_filename = filename
        self.co_name = "<module>"


class _Frame:
    """Enough of a frame for pydevd's tracker: the namespace as globals and locals."""

    def __init__(self, namespace, filename):
        self.f_code = _Code(filename)
        self.f_globals = self.f_locals = namespace
        self.f_back = None
        self.f_lineno = 1


class _Presentation:
    def __init__(self):
        from _pydevd_bundle.pydevd_api import PyDevdAPI
        self.variable_presentation = PyDevdAPI.VariablePresentation()


class NamespaceExplorer:
    """pydevd's variable tree over the namespace, rebuilt at each inspectVariables."""

    def __init__(self):
        self._manager = self._tracker = self._frame = None

    def inspect(self, namespace, filename):
        from _pydevd_bundle.pydevd_frame_utils import create_frames_list_from_frame
        from _pydevd_bundle.pydevd_suspended_frames import SuspendedFramesManager, _FramesTracker
        if self._tracker is not None:
            self._tracker.untrack_all()
        self._manager = SuspendedFramesManager()
        self._tracker = _FramesTracker(self._manager, _Presentation())
        self._frame = _Frame(namespace, filename)
        self._tracker.track("belljar-namespace", create_frames_list_from_frame(self._frame))
        return self.children(id(self._frame))

    def children(self, reference):
        """The variables under a reference this explorer gave, or None for one it didn't."""
        if self._manager is None:
            return None
        try:
            variable = self._manager.get_variable(reference)
        except KeyError:
            return None
        found = (v.get_var_data() for v in variable.get_children_variables())
        return [data for data in found if shown(str(data.get("name", "")))]


def rich(value):
    """At a breakpoint, on the stopped thread: value's display formats, as JSON text."""
    from .. import current
    data, metadata = current.session.format(value)
    return json.dumps([data, metadata], default=str)
