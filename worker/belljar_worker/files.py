"""Workspace files for the agent front doors (`belljar mcp`: list_files, read_file, write_file).

They run here, inside the sandbox, so the jail's mounts and secret masks apply to them as to
any cell: the supervisor never resolves a path on the host. It evaluates
`call(<request JSON>)` as a user expression of a silent execute and reads back the repr of
the answer, which is JSON: {"ok": true, ...} or {"ok": false, "error": "..."}.

A path is resolved with os.path.realpath against the workspace the supervisor names, and
refused when it lands outside it (`..`, absolute paths elsewhere, symlinks out) or on a file
the sandbox masks as a secret (.env, .ssh, *.pem, --hide ...). The check on the patterns
gives a plain refusal where the jail's mask would give an empty, unreadable file.
"""
import base64
import fnmatch
import json
import os
import stat

MAX_READ_BYTES = 8 << 20      # a read_file answer, before base64
DEFAULT_READ_BYTES = 1 << 20
MAX_LIST_ENTRIES = 2000


class Refused(Exception):
    """The request is not allowed or makes no sense; the text says why."""


class Answer:
    """What the supervisor reads: its repr is the answer's JSON (ASCII, one line)."""
    __slots__ = ("text",)

    def __init__(self, value):
        self.text = json.dumps(value, ensure_ascii=True)

    def __repr__(self):
        return self.text


def call(request_text):
    try:
        request = json.loads(request_text)
        operation = _OPERATIONS.get(request.get("op"))
        if operation is None:
            raise Refused("unknown file operation %r" % request.get("op"))
        workspace = Workspace(request["workspace"], request.get("hide") or ())
        result = operation(workspace, request.get("args") or {})
        result["ok"] = True
    except Refused as exc:
        result = {"ok": False, "error": str(exc)}
    except OSError as exc:
        result = {"ok": False, "error": _describe_os_error(exc)}
    except Exception as exc:
        result = {"ok": False, "error": "%s: %s" % (type(exc).__name__, exc)}
    return Answer(result)


class Workspace:
    def __init__(self, root, hide_patterns):
        self.root = os.path.realpath(root)
        self.patterns = [str(p) for p in hide_patterns if p]

    def contains(self, real):
        return real == self.root or real.startswith(self.root.rstrip(os.sep) + os.sep)

    def relative(self, real):
        return "." if real == self.root else os.path.relpath(real, self.root)

    def resolve(self, path):
        """(real path, path relative to the workspace) of `path`, or Refused."""
        if not isinstance(path, str) or not path or "\0" in path:
            raise Refused("path must be a non-empty string")
        joined = os.path.join(self.root, path)  # an absolute path stays as it is
        real = os.path.realpath(joined)
        if not self.contains(real):
            raise Refused("%s is outside the workspace %s: refused" % (path, self.root))
        # The jail masks a secret and, for a secret-named symlink, what it points to.
        lexical = os.path.normpath(joined)
        for candidate in (real, lexical):
            if self.contains(candidate) and self.masked(self.relative(candidate)):
                raise Refused("%s is a secret file, masked inside the sandbox: refused" % path)
        return real, self.relative(real)

    def masked(self, relative):
        """True when `relative` or a folder above it matches a hide pattern; the rules are
        the supervisor's (sandbox/layers/workspace_guard.hpp): a name glob matches at any depth, "a/b"
        matches trailing components, a leading "/" anchors at the workspace root."""
        if relative in (".", ""):
            return False
        parts = relative.split(os.sep)
        return any(_matches(pattern, parts[:end])
                   for end in range(1, len(parts) + 1) for pattern in self.patterns)


def _matches(pattern, parts):
    anchored = pattern.startswith("/")
    wanted = [p for p in pattern.strip("/").split("/") if p]
    if not wanted or len(wanted) > len(parts) or (anchored and len(wanted) != len(parts)):
        return False
    tail = parts[len(parts) - len(wanted):]
    return all(fnmatch.fnmatchcase(name, glob) for name, glob in zip(tail, wanted))


# -- operations ----------------------------------------------------------------------------

def list_files(workspace, args):
    real, rel = workspace.resolve(args.get("path") or ".")
    if not os.path.isdir(real):
        raise Refused("%s is not a directory" % (args.get("path") or "."))
    recursive = bool(args.get("recursive", False))
    entries, truncated = [], False
    pending = [real]
    while pending and not truncated:
        folder = pending.pop(0)
        try:
            with os.scandir(folder) as scan:
                children = sorted(scan, key=lambda e: e.name)
        except PermissionError:
            continue  # a masked folder: listed by its parent, never entered
        for entry in children:
            if len(entries) >= MAX_LIST_ENTRIES:
                truncated = True
                break
            path = workspace.relative(os.path.join(folder, entry.name))
            entries.append(_describe_entry(entry, path, workspace.masked(path)))
            if recursive and entries[-1]["type"] == "directory" and not entries[-1]["masked"]:
                pending.append(os.path.join(folder, entry.name))
    return {"path": rel, "entries": entries, "truncated": truncated}


def _describe_entry(entry, path, masked):
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return {"path": path, "type": "unknown", "size": None, "masked": masked}
    if stat.S_ISLNK(info.st_mode):
        kind = "symlink"
    elif stat.S_ISDIR(info.st_mode):
        kind = "directory"
    elif stat.S_ISREG(info.st_mode):
        kind = "file"
    else:
        kind = "other"
    described = {"path": path, "type": kind, "size": info.st_size if kind == "file" else None,
                 "masked": masked}
    if kind == "symlink":
        try:
            described["target"] = os.readlink(entry.path)
        except OSError:
            pass
    return described


def read_file(workspace, args):
    real, rel = workspace.resolve(args.get("path"))
    info = os.stat(real)
    if stat.S_ISDIR(info.st_mode):
        raise Refused("%s is a directory: use list_files" % args.get("path"))
    if not stat.S_ISREG(info.st_mode):
        raise Refused("%s is not a regular file" % args.get("path"))
    offset = _non_negative(args, "offset", 0)
    limit = min(_non_negative(args, "max_bytes", DEFAULT_READ_BYTES), MAX_READ_BYTES)
    with open(real, "rb") as f:
        f.seek(offset)
        data = f.read(limit)
    truncated = offset + len(data) < info.st_size
    text = _utf8_text(data, truncated)
    result = {"path": rel, "size": info.st_size, "offset": offset, "bytes": len(data),
              "truncated": truncated}
    if text is not None:
        result.update(encoding="utf-8", content=text)
    else:
        result.update(encoding="base64", content=base64.b64encode(data).decode("ascii"))
    return result


def _utf8_text(data, truncated):
    if b"\0" in data:
        return None  # valid UTF-8 perhaps, but a binary file all the same
    # A read cut short may split a character: up to 3 trailing bytes may be a partial one.
    for cut in range(0, 4 if truncated else 1):
        try:
            return data[:len(data) - cut].decode("utf-8") if cut else data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return None


def write_file(workspace, args):
    real, rel = workspace.resolve(args.get("path"))
    content = args.get("content")
    if not isinstance(content, str):
        raise Refused("content must be a string")
    encoding = args.get("encoding") or "utf-8"
    if encoding == "utf-8":
        data = content.encode("utf-8")
    elif encoding == "base64":
        try:
            data = base64.b64decode(content, validate=True)
        except ValueError:
            raise Refused("content is not valid base64") from None
    else:
        raise Refused("encoding must be utf-8 or base64")
    if os.path.isdir(real):
        raise Refused("%s is a directory" % args.get("path"))
    parent = os.path.dirname(real)
    if args.get("create_dirs", True):
        os.makedirs(parent, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    flags |= os.O_APPEND if args.get("append") else os.O_TRUNC
    fd = os.open(real, flags, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    return {"path": rel, "bytes_written": len(data), "size": size}


def _non_negative(args, key, default):
    value = args.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Refused("%s must be a non-negative integer" % key)
    return value


def _describe_os_error(exc):
    reason = exc.strerror or type(exc).__name__
    name = exc.filename
    if isinstance(exc, PermissionError):
        return "%s: permission denied (read-only or masked inside the sandbox)" % (name or "path")
    return "%s: %s" % (name, reason) if name else reason


_OPERATIONS = {"list_files": list_files, "read_file": read_file, "write_file": write_file}
