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
        except KeyError:
            return not_found
        # ipykernel sends the text only (its enable_html_pager is off): frontends then show
        # the same help whether or not IPython was loaded.
        bundle.pop("text/html", None)
        return {"found": True, "data": bundle, "metadata": {}}
    obj = resolve(session, name)
    if obj is _MISSING:
        return not_found
    namespace = "Interactive" if name.split(".")[0] in session.namespace else "Python builtin"
    return {"found": True, "data": {"text/plain": describe(name, obj, detail_level, namespace)},
            "metadata": {}}


def describe(name, obj, detail_level=0, namespace="Interactive"):
    """`name?` as IPython's inspector writes it (IPython.core.oinspect, which ipykernel's
    inspect_reply carries): the same fields in the same order, so help reads the same before
    and after a session loads IPython. Titles are red and values start after the longest title;
    a value of several lines starts on the next line."""
    import inspect
    import types

    is_class = inspect.isclass(obj)
    # IPython's "simple callables": shown like classes (signature first, no string form).
    simple = is_class or inspect.isfunction(obj) or inspect.ismethod(obj) or isinstance(
        obj, (types.BuiltinFunctionType, types.MethodDescriptorType))
    own_doc = inspect.getdoc(obj)
    if own_doc is None:
        own_doc = "<no docstring>"
    path, source, doc = _file_source_and_doc(obj, own_doc, detail_level)
    signature = None if is_class else _signature(obj, name)
    fields = []

    def add(title, value):
        if value is not None:
            fields.append((title, value))

    add("Signature", signature)
    if simple:
        add("Init signature", _init_signature(obj, name) if is_class else None)
        add("Docstring", doc)
        if detail_level and source:
            add("Source", source)
        else:
            add("Init docstring", _init_docstring(obj))
        add("File", path)
        add("Type", type(obj).__name__)
        add("Subclasses", _subclass_names(obj) if is_class else None)
        return _layout(fields)
    call_signature, call_doc = _call_parts(obj, name, signature)
    add("Call signature", call_signature)
    add("Type", type(obj).__name__)
    add("String form", _string_form(obj, detail_level))
    if namespace != "Interactive":
        add("Namespace", namespace)
    try:
        add("Length", str(len(obj)))
    except Exception:
        pass
    add("File", path)
    if detail_level and source:
        add("Source", source)
    else:
        add("Docstring", doc)
    add("Class docstring", _class_docstring(obj, own_doc))
    add("Init docstring", _init_docstring(obj))
    add("Call docstring", call_doc or None)
    return _layout(fields)


def _file_source_and_doc(obj, own_doc, detail_level):
    """(File, Source, Docstring) as IPython shows them: the file under ~, the source only at
    detail level 1, the docstring left out when the source already holds it."""
    path = _defining_file(obj)
    source = None
    if detail_level and path is not None and not path.endswith((".so", ".dll", ".pyd")):
        source = _source(obj)
    doc = None if _source_holds_docstring(source, own_doc) else own_doc or None
    if path is not None and path.endswith("<string>"):
        path = "Dynamically generated function. No source code available."
    elif path is not None:
        home = os.path.expanduser("~")
        path = "~" + path[len(home):] if path.startswith(home) else path
    return path, source, doc


def _call_parts(obj, name, signature):
    """(Call signature, Call docstring) of a callable instance: what calling it takes, where
    that differs from its own signature, and its __call__'s own docstring."""
    import inspect
    import types
    if not callable(obj):
        return None, None
    call = obj.__call__
    call_signature = _signature(call, name)
    if call_signature == signature:
        call_signature = None
    call_doc = inspect.getdoc(call)
    if call_doc == types.FunctionType.__call__.__doc__:
        call_doc = None
    return call_signature, call_doc


def _class_docstring(obj, own_doc):
    """An instance's own docstring comes first; its class's follows when it says more."""
    import inspect
    try:
        class_doc = inspect.getdoc(obj.__class__) if own_doc else None
    except Exception:
        class_doc = None
    if class_doc and class_doc != own_doc and class_doc not in _generic_docstrings():
        return class_doc
    return None


def _layout(fields):
    width = max(len(title) for title, _ in fields)
    lines = []
    for title, value in fields:
        value = value.strip("\n")
        lines.append("%s%s:%s%s%s%s" % (RED, title, RESET, " " * (width - len(title)),
                                       "\n" if "\n" in value else " ", value))
    return "\n".join(lines)


def _signature(obj, name):
    """name(parameters) as IPython renders a signature: one parameter a line once the
    whole would not fit behind its title; None for what has no signature."""
    import inspect
    try:
        signature = inspect.signature(obj)
    except Exception:
        return None
    kinds = inspect.Parameter
    parts, previous = [], None
    for parameter in signature.parameters.values():
        if previous == kinds.POSITIONAL_ONLY and parameter.kind != previous:
            parts.append("/")
        if parameter.kind == kinds.KEYWORD_ONLY and previous not in (kinds.VAR_POSITIONAL,
                                                                    kinds.KEYWORD_ONLY):
            parts.append("*")
        parts.append(str(parameter))
        previous = parameter.kind
    if previous == kinds.POSITIONAL_ONLY:
        parts.append("/")
    if len(name) + sum(len(part) + 2 for part in parts) > 75:
        text = "%s(\n%s)" % (name, "".join("    %s,\n" % part for part in parts))
    else:
        text = "%s(%s)" % (name, ", ".join(parts))
    if signature.return_annotation is not signature.empty:
        text += " -> " + inspect.formatannotation(signature.return_annotation)
    return text


def _init_signature(cls, name):
    """A class's call signature, or its __init__'s where the class has none (built-in types)."""
    text = _signature(cls, name)
    if text is None:
        try:
            text = _signature(cls.__init__, name)
        except AttributeError:
            pass
    return text


def _init_docstring(obj):
    import inspect
    try:
        doc = inspect.getdoc(obj.__init__)
    except AttributeError:
        return None
    return None if doc == object.__init__.__doc__ else doc or None  # Python's stock text


def _subclass_names(cls):
    try:
        names = [sub.__name__ for sub in type.__subclasses__(cls)]
    except Exception:
        return None
    return ", ".join(names if len(names) < 10 else names[:10] + ["..."])


def _generic_docstrings():
    """What a module, method, function or property says of itself when it has no docstring
    (the docstring of its type, which IPython does not repeat as an instance's class's)."""
    import inspect
    import types
    return {inspect.getdoc(t) for t in (types.ModuleType, types.MethodType,
                                        types.FunctionType, property)}


def _string_form(obj, detail_level):
    try:
        text = str(obj)
    except Exception:
        return None
    if not detail_level and len(text) > 200:  # the middle left out, as IPython does
        text = text[:97] + " <...> " + text[-97:]
        text = ("\n" + " " * 11).join(line.strip() for line in text.split("\n"))
    return text


def _unwrapped(obj):
    """The function behind decorators that set __wrapped__ (a bounded walk: some objects make
    up any attribute asked for)."""
    current = obj
    for _ in range(100):
        try:
            inner = getattr(current, "__wrapped__", _MISSING)
        except Exception:
            inner = _MISSING
        if inner is _MISSING:
            return current
        current = inner
    return obj


def _defining_file(obj):
    """The absolute path of the file obj (or, for an instance, its class) was defined in."""
    import inspect
    obj = _unwrapped(obj)
    try:
        return inspect.getabsfile(obj)
    except TypeError:
        try:
            return inspect.getabsfile(obj.__class__)
        except Exception:
            return None
    except Exception:
        return None


def _source(obj):
    import inspect
    import linecache
    linecache.checkcache()  # a module edited since it was imported: its current text
    obj = _unwrapped(obj)
    try:
        return inspect.getsource(obj).rstrip()
    except TypeError:  # an instance: its class's source
        try:
            return inspect.getsource(obj.__class__).rstrip()
        except Exception:
            return None
    except Exception:
        return None


def _source_holds_docstring(source, doc):
    """Whether source is one definition whose docstring is doc (then it is not shown twice)."""
    if not source:
        return False
    import ast
    import textwrap
    try:
        (definition,) = ast.parse(textwrap.dedent(source)).body
        return ast.get_docstring(definition) == doc
    except Exception:
        return False


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
