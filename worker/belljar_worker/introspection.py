"""complete, inspect and is_complete requests, answered from the live namespace.

Names are only looked up (dotted attribute chains), never called or evaluated, so asking
for completions cannot run arbitrary user code beyond attribute access.
"""
import builtins
import keyword
import os
import sys

from .ipython_bridge import looks_like_ipython

RED, RESET = "\x1b[0;31m", "\x1b[0m"
_MISSING = object()


# -- complete ----------------------------------------------------------------------------

def complete(session, code, cursor_pos):
    text = code[:cursor_pos]
    line = text[text.rfind("\n") + 1:]
    string_start = _open_string_start(line)
    if string_start is not None:
        fragment = line[string_start:]
        return _reply(_complete_path(fragment), cursor_pos - len(fragment), cursor_pos, "path")
    start = len(line)
    while start > 0 and (line[start - 1].isalnum() or line[start - 1] in "_."):
        start -= 1
    token = line[start:]
    before = line[:start]
    if before.strip() in ("%", "%%") and session.shell is not None:
        from .ipython_bridge import magic_names
        line_magics, cell_magics = magic_names(session.shell)
        prefix = before.strip() + token
        names = [m for m in (cell_magics if prefix.startswith("%%") else line_magics + cell_magics)
                 if m.startswith(prefix)]
        return _reply(sorted(names), cursor_pos - len(prefix), cursor_pos, "magic")
    words = before.split()
    if words and words[0] in ("import", "from") and (
            len(words) == 1 or (words[0] == "import" and before.rstrip().endswith(","))):
        return _reply(_module_names(token), cursor_pos - len(token), cursor_pos, "module")
    if len(words) >= 3 and words[0] == "from" and words[2] == "import":
        names = _module_attributes(words[1])
        return _reply(_filter(names, token), cursor_pos - len(token), cursor_pos, None)
    if "." in token:
        base, _, partial = token.rpartition(".")
        obj = resolve(session, base)
        if obj is _MISSING:
            return _reply([], cursor_pos, cursor_pos, None)
        try:
            names = dir(obj)
        except Exception:
            names = []
        matches = _filter(names, partial)
        return _reply(matches, cursor_pos - len(partial), cursor_pos, None, session, base)
    names = set(session.namespace) | set(vars(builtins)) | set(keyword.kwlist)
    names = {n for n in names if not (n.startswith("_") and n[1:].isdigit())}  # _12 etc.
    return _reply(_filter(names, token), cursor_pos - len(token), cursor_pos, None, session)


def _filter(names, partial):
    matches = [n for n in names if isinstance(n, str) and n.startswith(partial)
               and (partial.startswith("_") or not n.startswith("_"))]
    return sorted(set(matches), key=lambda n: (n.startswith("_"), n.lower(), n))


def _reply(matches, start, end, kind, session=None, base=None):
    types = []
    for match in matches[:500]:
        types.append({"start": start, "end": end, "text": match,
                      "type": kind or _kind_of(session, base, match)})
    return {"matches": matches, "cursor_start": start, "cursor_end": end,
            "metadata": {"_jupyter_types_experimental": types}}


def _kind_of(session, base, name):
    if session is None:
        return "instance"
    if base is None and keyword.iskeyword(name):
        return "keyword"
    obj = resolve(session, name if base is None else base + "." + name)
    if obj is _MISSING:
        return "instance"
    if isinstance(obj, type(sys)):
        return "module"
    if isinstance(obj, type):
        return "class"
    return "function" if callable(obj) else "instance"


def _open_string_start(line):
    """Index in line just after an unclosed quote, or None (a crude scan, no tokenizer)."""
    quote, start, i = None, None, 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "'\"":
            quote, start = ch, i + 1
        elif ch == "#":
            return None
        i += 1
    return start if quote else None


def _complete_path(fragment):
    directory, _, partial = fragment.rpartition("/")
    path = os.path.expanduser(directory) if directory else "."
    if fragment.startswith("/") and not directory:
        path = "/"
    try:
        entries = os.listdir(path or "/")
    except OSError:
        return []
    matches = []
    for entry in sorted(entries):
        if entry.startswith(partial) and (partial.startswith(".") or not entry.startswith(".")):
            full = (directory + "/" if directory or fragment.startswith("/") else "") + entry
            if os.path.isdir(os.path.join(path or "/", entry)):
                full += "/"
            matches.append(full)
    return matches


def _module_names(token):
    import pkgutil
    if "." in token:
        package_name, _, partial = token.rpartition(".")
        try:
            package = __import__(package_name, fromlist=["_"])
            paths = getattr(package, "__path__", None) or []
            names = [package_name + "." + m.name for m in pkgutil.iter_modules(paths)]
        except Exception:
            return []
    else:
        names = [m.name for m in pkgutil.iter_modules()] + list(sys.builtin_module_names)
    return _filter(set(names), token)


def _module_attributes(module_name):
    import pkgutil
    try:
        module = __import__(module_name, fromlist=["_"])
    except Exception:
        return []
    names = set(getattr(module, "__all__", None) or dir(module))
    for info in pkgutil.iter_modules(getattr(module, "__path__", None) or []):
        names.add(info.name)
    return names


def resolve(session, dotted):
    """The object a dotted name refers to in the session, or _MISSING. Attribute access
    only: nothing is called or evaluated."""
    parts = dotted.split(".")
    if not all(part.isidentifier() for part in parts):
        return _MISSING
    head = parts[0]
    if head in session.namespace:
        obj = session.namespace[head]
    elif hasattr(builtins, head):
        obj = getattr(builtins, head)
    else:
        return _MISSING
    for part in parts[1:]:
        try:
            obj = getattr(obj, part)
        except Exception:
            return _MISSING
    return obj


# -- inspect -----------------------------------------------------------------------------

def name_at_cursor(code, cursor_pos):
    """The dotted name under the cursor, or the callable whose arguments it is in."""
    cursor_pos = max(0, min(cursor_pos, len(code)))
    line_start = code.rfind("\n", 0, cursor_pos) + 1
    line_end = code.find("\n", cursor_pos)
    line = code[line_start:line_end if line_end >= 0 else len(code)]
    col = cursor_pos - line_start
    start, end = col, col
    while start > 0 and (line[start - 1].isalnum() or line[start - 1] in "_."):
        start -= 1
    while end < len(line) and (line[end].isalnum() or line[end] == "_"):
        end += 1
    name = line[start:end].strip(".")
    if name and all(p.isidentifier() for p in name.split(".")):
        return name
    depth = 0
    for i in range(col - 1, -1, -1):  # inside a call's parentheses: the callable
        ch = line[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            if depth == 0:
                j = i
                while j > 0 and line[j - 1] == " ":
                    j -= 1
                k = j
                while k > 0 and (line[k - 1].isalnum() or line[k - 1] in "_."):
                    k -= 1
                name = line[k:j].strip(".")
                return name if name and all(p.isidentifier() for p in name.split(".")) else None
            depth -= 1
    return None


def inspect_reply(session, code, cursor_pos, detail_level):
    name = name_at_cursor(code, cursor_pos)
    not_found = {"found": False, "data": {}, "metadata": {}}
    if not name:
        return not_found
    if session.shell is not None:
        try:
            bundle = session.shell.object_inspect_mime(name, detail_level=detail_level)
            return {"found": True, "data": bundle, "metadata": {}}
        except KeyError:
            return not_found
    obj = resolve(session, name)
    if obj is _MISSING:
        return not_found
    return {"found": True, "data": {"text/plain": describe(name, obj, detail_level)},
            "metadata": {}}


def describe(name, obj, detail_level=0):
    import inspect

    def field(title, value):
        return "%s%s%s %s" % (RED, (title + ":").ljust(10), RESET, value)

    lines = []
    is_class = isinstance(obj, type)
    if callable(obj):
        try:
            signature = str(inspect.signature(obj))
        except (TypeError, ValueError):
            signature = None
        if signature:
            lines.append(field("Init signature" if is_class else "Signature", name + signature))
    else:
        lines.append(field("Type", type(obj).__name__))
        try:
            text = repr(obj)
        except Exception:
            text = "<repr failed>"
        if len(text) > 200:
            text = text[:100] + "..." + text[-50:]
        lines.append(field("String form", text))
        try:
            lines.append(field("Length", len(obj)))
        except Exception:
            pass
    source = None
    if detail_level >= 1:
        try:
            source = inspect.getsource(obj)
        except (TypeError, OSError):
            source = None
    if source:
        lines.append(field("Source", ""))
        lines.append(source.rstrip("\n"))
    else:
        doc = inspect.getdoc(obj)
        if doc and not callable(obj) and doc == inspect.getdoc(type(obj)):
            lines.append(field("Class docstring" if doc else "Docstring", ""))
            lines.append(doc)
        else:
            lines.append(field("Docstring", "" if doc else "<no docstring>"))
            if doc:
                lines.append(doc)
    try:
        path = inspect.getsourcefile(obj) or inspect.getfile(obj)
    except TypeError:
        path = None
    if path and not path.startswith("<"):
        lines.append(field("File", path))
    if callable(obj):
        lines.append(field("Type", type(obj).__name__))
    return "\n".join(lines)


# -- is_complete -------------------------------------------------------------------------

def is_complete(session, code):
    """(status, indent): 'complete', 'incomplete' (with the next line's indent), 'invalid'."""
    if session.shell is not None:
        from .ipython_bridge import check_complete
        status, indent = check_complete(session.shell, code)
        return status, indent if status == "incomplete" else ""
    first = next((line for line in code.split("\n") if line.strip()), "")
    if first.lstrip().startswith("%%"):  # a cell magic ends with a blank line, as in IPython
        return ("complete", "") if code.endswith("\n\n") else ("incomplete", "")
    source = _mask_ipython_lines(code)
    import codeop
    import warnings
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = codeop.compile_command(source, "<input>", "exec")
    except (SyntaxError, OverflowError, ValueError):
        return "invalid", ""
    last = source.split("\n")[-1]
    if compiled is None:
        return "incomplete", _next_indent(source)
    if last.strip() and last[:1] in " \t":  # still inside an indented block
        return "incomplete", last[:len(last) - len(last.lstrip())]
    return "complete", ""


def _mask_ipython_lines(code):
    """IPython-only lines (magics, !cmd, obj?) as `pass`, so codeop can judge the rest."""
    lines = code.split("\n")
    for i, line in enumerate(lines):
        if line.strip() and looks_like_ipython(line):
            lines[i] = line[:len(line) - len(line.lstrip())] + "pass"
    return "\n".join(lines)


def _next_indent(source):
    for line in reversed(source.split("\n")):
        if line.strip():
            indent = line[:len(line) - len(line.lstrip())]
            code_part = line.split("#", 1)[0].rstrip()
            return indent + "    " if code_part.endswith(":") else indent
    return ""
