"""Error frames: ename, evalue and traceback lines, laid out like IPython 8's.

Frames of the worker itself (and of the event loop that ran an async cell) are dropped:
the user sees their cell and the libraries it called, nothing of the machinery around it.
"""
import linecache
import os

RED, GREEN, CYAN, RESET = "\x1b[0;31m", "\x1b[0;32m", "\x1b[0;36m", "\x1b[0m"

_WORKER_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STDLIB_DIR = os.path.dirname(os.__file__)
_EVENT_LOOP_FILES = (os.path.join(_STDLIB_DIR, "asyncio") + os.sep,
                     os.path.join(_STDLIB_DIR, "selectors.py"))

# pydevd's compiled trace function names its frames by these relative paths.
_DEBUGGER_BUILT = ("_pydevd_bundle" + os.sep, "_pydevd_frame_eval" + os.sep)

_CAUSE = "The above exception was the direct cause of the following exception:"
_CONTEXT = "During handling of the above exception, another exception occurred:"


def safe_str(value):
    try:
        return str(value)
    except Exception:
        return "<unprintable %s object>" % type(value).__name__


def error_content(exc, cell_labels):
    """{ename, evalue, traceback} for an exception raised by user code.

    cell_labels maps the cells' code filenames to "In[N]"."""
    ename = type(exc).__name__
    evalue = safe_str(exc)
    try:
        render = getattr(exc, "_render_traceback_", None)  # IPython's protocol
        if render is not None:
            lines = [str(line) for line in render()]
        elif ename == "UsageError":
            lines = ["%s%s%s: %s" % (RED, ename, RESET, evalue)]
        else:
            lines = _format_chain(exc, cell_labels)
    except Exception:
        lines = ["%s%s%s: %s" % (RED, ename, RESET, evalue)]
    return {"ename": ename, "evalue": evalue, "traceback": lines}


def simple_error(ename, evalue):
    return {"ename": ename, "evalue": evalue,
            "traceback": ["%s%s%s: %s" % (RED, ename, RESET, evalue)]}


def _format_chain(exc, cell_labels):
    chain, seen, current, note = [], set(), exc, None
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append((current, note))
        if current.__cause__ is not None:
            current, note = current.__cause__, _CAUSE
        elif current.__context__ is not None and not current.__suppress_context__:
            current, note = current.__context__, _CONTEXT
        else:
            current = None
    lines = []
    for error, note in reversed(chain):
        lines.extend(_format_one(error, cell_labels))
        if note:
            lines.append("\n%s\n" % note)  # one entry, as IPython has it
    return lines


def _format_one(exc, cell_labels):
    """IPython's shape, which frontends and nbclient join and parse: a rule and a header, one
    entry per frame (its lines, ending in a newline), and the exception's own lines as one."""
    frames = _user_frames(exc.__traceback__)
    entries = []
    if frames:  # no frames left (a SyntaxError, the worker's own errors): the message alone
        name = type(exc).__name__
        entries.append(RED + "-" * 75 + RESET)
        entries.append("%s%s%s%sTraceback (most recent call last)"
                       % (RED, name, RESET, " " * max(1, 42 - len(name))))
    for frame, last_line in frames:
        entries.append("\n".join(_format_frame(frame, last_line, cell_labels)) + "\n")
    entries.append("\n".join(_exception_only(exc, cell_labels)))
    return entries


def _user_frames(tb):
    """(FrameSummary, the last line of its code) of each frame of user code."""
    import traceback
    walked = [frame for frame, _ in traceback.walk_tb(tb)]
    frames = []
    for f, frame in zip(traceback.extract_tb(tb), walked):
        if _in_debugger(f.filename):
            break  # an interrupt at a breakpoint: raised in the debugger's wait, under the cell
        if f.filename.startswith(_WORKER_DIR):
            continue
        if frames and frames[-1][2] is frame:
            continue  # raised in the trace function the debugger called from this frame
        frames.append((f, frame.f_code, frame))
    while frames and frames[0][0].filename.startswith(_EVENT_LOOP_FILES):
        frames.pop(0)  # the event loop that ran an async cell, above the cell itself
    return [(f, _last_line(code)) for f, code, _ in frames]


def _in_debugger(filename):
    """A frame of pydevd, JupyterLab's debugger in the worker (debugger/): never user code."""
    import sys
    debugpy = sys.modules.get("debugpy")
    if debugpy is None:
        return False
    return filename.startswith(_DEBUGGER_BUILT) or filename.startswith(
        os.path.dirname(getattr(debugpy, "__file__", "") or "/nonexistent") + os.sep)


def _last_line(code):
    """The last source line of a function or cell: context shown after the failing line stops
    there, as IPython's does (a function's frame does not show the cell's next lines)."""
    import dis
    return max((line for _, line in dis.findlinestarts(code) if line), default=0)


def _format_frame(frame, last_line, cell_labels):
    label = cell_labels.get(frame.filename)
    if label:
        head = "%sCell %s, line %s%s" % (GREEN, label, frame.lineno, RESET)
        if frame.name != "<module>":
            head += ", in %s%s%s" % (CYAN, frame.name, RESET)
    else:
        head = "File %s%s:%s%s, in %s%s%s" % (GREEN, frame.filename, frame.lineno, RESET,
                                             CYAN, frame.name, RESET)
    lines = [head]
    source = linecache.getlines(frame.filename)
    lineno = frame.lineno or 0
    if source and 0 < lineno <= len(source):
        first, last = max(1, lineno - 2), min(len(source), max(lineno, min(lineno + 2, last_line)))
        width = len(str(last))
        for n in range(first, last + 1):
            text = source[n - 1].rstrip("\r\n")
            if n == lineno:
                lines.append("%s---->%s %*d %s" % (GREEN, RESET, width, n, text))
            else:
                lines.append("      %*d %s" % (width, n, text))
    elif frame.line:
        lines.append("%s---->%s %s" % (GREEN, RESET, frame.line))
    return lines


def _exception_only(exc, cell_labels):
    import traceback
    text = "".join(traceback.format_exception_only(type(exc), exc))
    lines = text.rstrip("\n").split("\n")
    if isinstance(exc, SyntaxError) and exc.filename in cell_labels:
        where = 'File "%s", line' % exc.filename
        lines = [line.replace(where, "Cell %s, line" % cell_labels[exc.filename], 1)
                 for line in lines]
    cls = type(exc)
    module = cls.__module__
    python_name = cls.__qualname__ if module in ("__main__", "builtins") else "%s.%s" % (
        module, cls.__qualname__)
    shown = cls.__qualname__ if _is_worker_error(cls) else python_name
    for i, line in enumerate(lines):
        if line == python_name or line.startswith(python_name + ":"):
            # IPython always writes "name: value", an empty value included ("KeyboardInterrupt: ").
            lines[i] = RED + shown + RESET + (line[len(python_name):] or ": ")
            break
    return lines


def _is_worker_error(cls):
    """The worker's own errors (LimitError, UsageError, ...) read as plain messages."""
    return cls.__module__.startswith("belljar_worker")
