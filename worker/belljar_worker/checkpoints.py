"""Checkpoints: the session's memory kept by a copy-on-write fork, and made the session again.

    %checkpoint [name]        keep the session as it is now
    %rollback [name]          return to a checkpoint (the newest without a name)
    %checkpoints              list them
    %drop_checkpoint name     let one go

The supervisor decides (it names each checkpoint with a handle, bounds how many, keeps the
execution count, refuses what the policy cannot charge); the worker only asks, in a cell of its
own, and does what only this process can (worker/PROTOCOL.md, "Checkpoints"):

  holder   `%checkpoint` forks the worker. The child is the checkpoint: it keeps only the main
           thread, closes fds 1-4, ignores SIGINT and waits on a socket of its own. Its pages are
           the parent's until one side writes them (the kernel copies on write), and the sandbox's
           memory cgroup charges each copied page, so a checkpoint costs what diverged since.
  resume   `%rollback` hands the live worker's fds 1-4 (and the other checkpoints' sockets) to
           the holder over that socket (SCM_RIGHTS). The holder forks again — it stays the
           checkpoint, so one can be returned to many times — and the fork becomes the session:
           it takes the fds, restarts the worker's own threads and finishes the rollback's cell.
           The worker that asked ends.
  anchor   init (jail_init.cpp) waits for the worker it started and reports its exit. After the
           first rollback that first worker execs a small reaper (ANCHOR below) under the same
           pid: a child subreaper that learns each new live worker's pid on a pipe and, when the
           live one dies, dies the same way, so init reports a crash or the memory limit as it
           always did.

What a checkpoint cannot carry: threads other than the main one (belljar's own are made again;
a cell's are not), and whatever lives outside the process: subprocesses, sockets' peers, the
workspace's files (a rollback lists the names made, removed and renamed since the checkpoint),
and widgets the frontend shows.
"""
import json
import os
import signal
import socket
import sys
import warnings

MAGICS = ("%checkpoint", "%rollback", "%checkpoints", "%drop_checkpoint")
_OPS = {"%checkpoint": "make", "%rollback": "rollback", "%checkpoints": "list",
        "%drop_checkpoint": "drop"}
CHECKPOINT_JSON = "application/vnd.belljar.checkpoint+json"
_HANDOVER_WAIT = 20.0  # seconds a rollback waits for the holder's fork
_MAX_LISTED = 10000  # workspace names compared; a larger workspace is not listed
PR_SET_CHILD_SUBREAPER = 36

# The reaper the first worker becomes at the first rollback: `python -I -S -c ANCHOR live fd`.
ANCHOR = r"""
import os, signal, sys
live, pipe = int(sys.argv[1]), int(sys.argv[2])
signal.signal(signal.SIGINT, signal.SIG_IGN)
try:
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
except Exception:
    pass
os.set_blocking(pipe, False)
held = b""
def learn():
    global held, live
    ended = False
    while True:
        try:
            chunk = os.read(pipe, 4096)
        except BlockingIOError:
            break
        if not chunk:
            ended = True
            break
        held += chunk
    *lines, held = held.split(b"\n")
    for line in lines:
        if line.strip().isdigit():
            live = int(line)
    return ended
while True:
    try:
        pid, status = os.wait()
    except ChildProcessError:
        import select
        select.select([pipe], [], [])
        if learn():
            os._exit(1)  # no child, and no worker left to name one: the session is over
        continue
    learn()
    if pid != live:
        continue
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL) if sig not in (9, 19) else None
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)
"""


class CheckpointError(Exception):
    """A checkpoint operation the supervisor refused or the holder could not do."""


def checkpoint_magic(code):
    """(op, name) when the cell is one checkpoint magic alone, else None. ValueError for a
    magic used wrongly (arguments, or other code beside it)."""
    lines = [line for line in code.strip().splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        return None
    words = lines[0].split()
    if words[0] not in MAGICS:
        for line in lines[1:]:
            if line.split()[0] in MAGICS:
                raise ValueError("%s must be the only code in its cell" % line.split()[0])
        return None
    magic = words[0]
    if len(lines) > 1:
        raise ValueError("%s must be the only code in its cell" % magic)
    args = words[1:]
    if magic == "%checkpoints" and args:
        raise ValueError("usage: %checkpoints   (lists this session's checkpoints)")
    if magic == "%drop_checkpoint" and len(args) != 1:
        raise ValueError("usage: %drop_checkpoint NAME")
    if len(args) > 1:
        raise ValueError("usage: %s [NAME]" % magic)
    return _OPS[magic], (args[0] if args else "")


def serve_magic(session, ctx, op, name):
    """A checkpoint magic's cell: the supervisor's answer, then what the worker does."""
    channel = session.channel
    if op == "make" and "pydevd" in sys.modules:
        # Its threads would not be in the checkpoint, and its state would say they are.
        raise CheckpointError("the debugger ran in this session, and its threads cannot be "
                              "carried into a checkpoint: restart the kernel to use checkpoints")
    channel.send({"type": "checkpoint_request", "id": ctx.id, "op": op, "name": name})
    reply = channel.wait_for("checkpoint_reply")
    if reply.get("error"):
        raise CheckpointError(str(reply.get("error")))
    for handle in reply.get("drop") or []:
        holders().drop(str(handle))
    handle = str(reply.get("handle") or "")
    text = str(reply.get("text") or "")
    if op == "make":
        resumed = holders().make(handle, session)
        if resumed is not None:
            _finish_rollback(session, ctx, resumed)
            return
    elif op == "rollback":
        holders().hand_over(handle, session, ctx, text)  # returns only when it failed
    print(text)


def _finish_rollback(session, ctx, resumed):
    """In the new live worker: the rollback's cell is this one now; say what changed."""
    cell = resumed["cell"]
    ctx.id = session.channel.request_id = cell["id"]
    ctx.silent, ctx.store_history = cell["silent"], cell["store_history"]
    ctx.execution_count = cell["execution_count"]
    session.parent_msg_id = cell["msg_id"]
    session.parents.serve(cell["msg_id"])
    changes = workspace_changes(resumed["names_then"], _workspace_names(resumed["workspace"]))
    lines = [resumed["text"]]
    if changes is None:
        lines.append("the workspace holds more than %d names: its changes are not listed"
                     % _MAX_LISTED)
    else:
        for kind in ("made", "removed"):
            if changes[kind]:
                lines.append("%s since: %s" % (kind, ", ".join(changes[kind])))
        if changes["renamed"]:
            lines.append("renamed since: " + ", ".join(
                "%s -> %s" % tuple(pair) for pair in changes["renamed"]))
        if not any(changes.values()):
            lines.append("no name in the workspace changed since")
    text = "\n".join(lines)
    session.channel.send({"type": "display", "data": {
        "text/plain": text,
        CHECKPOINT_JSON: {"checkpoint": resumed["handle"], "workspace": changes}},
        "metadata": {}, "transient": {}})


def _workspace_names(root):
    """{relative path: (device, inode, mtime)} of every name under the workspace, symlinks not
    followed; None past _MAX_LISTED names."""
    names = {}
    stack = [""]
    while stack:
        folder = stack.pop()
        try:
            entries = os.scandir(os.path.join(root, folder) if folder else root)
        except OSError:
            continue
        with entries:
            for entry in entries:
                path = os.path.join(folder, entry.name) if folder else entry.name
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                names[path] = (st.st_dev, st.st_ino, st.st_mtime_ns)
                if len(names) > _MAX_LISTED:
                    return None
                if entry.is_dir(follow_symlinks=False):
                    stack.append(path)
    return names


def workspace_changes(then, now):
    """{made, removed, renamed} between two listings. A name gone and a name new that hold the
    same file (device, inode and modification time: an inode number alone is reused) were a
    rename; a name that now holds another file was made again. None when either listing was
    too large."""
    if then is None or now is None:
        return None
    gone = {path: key for path, key in then.items() if path not in now}
    new = {path: key for path, key in now.items() if path not in then}
    by_key = {key: path for path, key in sorted(gone.items(), reverse=True)}
    renamed = []
    for path, key in sorted(new.items()):
        old = by_key.pop(key, None)
        if old is not None:
            renamed.append([old, path])
            del gone[old]
            del new[path]
    replaced = [path for path, key in now.items() if path in then and then[path][:2] != key[:2]]
    return {"made": sorted(list(new) + replaced), "removed": sorted(gone), "renamed": renamed}


class Holders:
    """The checkpoints this worker knows: handle -> (holder pid, socket to it)."""

    def __init__(self):
        self.table = {}
        self.anchor_pipe = None  # write end to the anchor, once there is one
        from . import current
        self.workspace = current.workspace or os.getcwd()
        self.session = None

    # -- checkpoint ----------------------------------------------------------------------
    def make(self, handle, session):
        """Fork a holder for `handle`. Returns None in the live worker; in a worker resumed
        from this checkpoint later, the rollback's facts."""
        names = _workspace_names(self.workspace)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        if self.anchor_pipe is None:
            _become_subreaper()  # so the workers a rollback makes are reaped by the first one
        streams = session.streams
        with streams.quiet_fork(), warnings.catch_warnings():
            # Python 3.12+ warns of fork() in a threaded process: the holder keeps one thread
            # and touches no lock another thread could hold (quiet_fork).
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            return self._park(handle, ours, theirs, names, session)
        ours.close()
        self.table[handle] = (pid, theirs)
        return None

    def drop(self, handle):
        entry = self.table.pop(handle, None)
        if entry is None:
            return
        pid, sock = entry
        sock.close()
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ChildProcessError, ProcessLookupError, PermissionError):
            pass  # not our child (the anchor reaps it), or already gone

    # -- the holder ------------------------------------------------------------------------
    def _park(self, handle, ours, theirs, names, session):
        """The checkpoint's process: waits until a rollback hands it the session."""
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        session.streams.forking_quietly = True  # its forks start no flusher: _resume does
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (1, 2):
            os.dup2(null, fd)
        os.close(null)
        for fd in (3, 4):
            try:
                os.close(fd)
            except OSError:
                pass
        for _, sock in self.table.values():
            sock.close()
        self.table = {}
        while True:
            bundle, fds = _receive_bundle(ours)
            if bundle is None:
                continue
            middle = os.fork()
            if middle == 0:
                live = os.fork()
                if live == 0:
                    ours.close()
                    theirs.close()
                    return self._resume(handle, bundle, fds, names, session)
                try:
                    ours.sendall(("%s %d\n" % (bundle["nonce"], live)).encode())
                finally:
                    os._exit(0)
            os.waitpid(middle, 0)
            for fd in fds:
                os.close(fd)

    def _resume(self, handle, bundle, fds, names, session):
        """In the fork that becomes the session: the live worker's fds, state and threads."""
        ends = bundle["fds"]  # names of the fds, in the order they came
        at = {name: fd for name, fd in zip(ends, fds)}
        for target in (1, 2, 3, 4):
            fd = at.pop("fd%d" % target, None)
            if fd is not None:
                os.dup2(fd, target)
                os.close(fd)
        self.anchor_pipe = at.pop("anchor")
        self.table = {}
        for key, fd in at.items():
            other = key[len("checkpoint:"):]
            self.table[other] = (bundle["pids"][other], socket.socket(fileno=fd))
        channel, streams, gate = session.channel, session.streams, session.gate
        streams.written[:] = bundle["written"]
        channel.restore(bundle["channel"])
        gate.reinstall()
        streams.restart_after_rollback()
        return {"handle": handle, "text": bundle["text"], "names_then": names,
                "workspace": self.workspace, "cell": bundle["cell"]}

    # -- rollback --------------------------------------------------------------------------
    def hand_over(self, handle, session, ctx, text):
        """Make the checkpoint the session and end this worker; returns only on failure
        (CheckpointError, or what interrupted it before anything was sent: nothing changed).
        Once the holder has the session's descriptors this worker never serves again: a failure
        past that point ends the session (fails closed) rather than leave two workers on fd 3."""
        entry = self.table.get(handle)
        if entry is None:
            raise CheckpointError("this worker holds no checkpoint %s" % handle)
        pid, sock = entry
        channel = session.channel
        anchor_read = anchor_write = None
        if self.anchor_pipe is None:
            anchor_read, anchor_write = os.pipe()
        # From here an interrupt would leave the hand-over half done: it is ignored until this
        # worker is gone (or the hand-over failed before anything was sent).
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        sent = [False]
        try:
            session.streams.flush()
            channel.hold_writes()  # no frame half written, and none from this worker after
            bundle, fds, nonce = self._bundle(session, ctx, text,
                                              anchor_write or self.anchor_pipe)
            live = _send_bundle(sock, bundle, fds, nonce, sent)
        except BaseException as exc:
            if sent[0]:
                os.write(2, b"[belljar] a rollback failed after the session was handed to its "
                            b"checkpoint: the session ends\n")
                os._exit(1)
            channel.release_writes()
            signal.signal(signal.SIGINT, previous)
            for fd in (anchor_read, anchor_write):
                if fd is not None:
                    os.close(fd)
            if not isinstance(exc, OSError):
                raise
            self.drop(handle)
            _forget(channel, ctx, handle)
            raise CheckpointError("checkpoint %s is gone (%s)" % (handle, exc)) from None
        # The new worker serves fd 3 from here on: this one only ends.
        if anchor_read is not None:
            _become_anchor(live, anchor_read)
        os.write(self.anchor_pipe, b"%d\n" % live)
        os._exit(0)

    def _bundle(self, session, ctx, text, anchor):
        """What the holder needs to become the session: (bundle, its fds, the ack's nonce)."""
        nonce = os.urandom(8).hex()
        names, fds = ["fd1", "fd2", "fd3"], [1, 2, 3]
        if _is_open(4):
            names.append("fd4")
            fds.append(4)
        names.append("anchor")
        fds.append(anchor)
        for other, (_, other_sock) in self.table.items():
            names.append("checkpoint:" + other)
            fds.append(other_sock.fileno())
        bundle = {"nonce": nonce, "fds": names, "text": text,
                  "pids": {other: entry[0] for other, entry in self.table.items()},
                  "written": list(session.streams.written),
                  "channel": session.channel.state(),
                  "cell": {"id": ctx.id, "silent": ctx.silent,
                           "store_history": ctx.store_history,
                           "execution_count": ctx.execution_count,
                           "msg_id": session.parent_msg_id}}
        return bundle, fds, nonce


def _forget(channel, ctx, handle):
    """The supervisor forgets a checkpoint whose process is gone."""
    channel.send({"type": "checkpoint_request", "id": ctx.id, "op": "forget", "name": handle})
    channel.wait_for("checkpoint_reply")


def _is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def _become_subreaper():
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except Exception:
        pass


def _become_anchor(live, anchor_read):
    """The first worker, whose pid init waits for: exec the reaper (all threads and memory
    go), keeping only the pipe it learns live workers on."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.set_inheritable(anchor_read, True)
    os.closerange(3, anchor_read)
    os.closerange(anchor_read + 1, 1 << 16)
    os.execv(sys.executable, [sys.executable, "-I", "-S", "-c", ANCHOR,
                              str(live), str(anchor_read)])


def _send_bundle(sock, bundle, fds, nonce, sent):
    payload = json.dumps(bundle).encode()
    data = len(payload).to_bytes(8, "big") + payload
    socket.send_fds(sock, [data[:1 << 16]], fds)
    sent[0] = True  # the holder has the descriptors: it may become the session
    if len(data) > 1 << 16:
        sock.sendall(data[1 << 16:])
    sock.settimeout(_HANDOVER_WAIT)
    held = b""
    while True:
        chunk = sock.recv(256)
        if not chunk:
            raise ConnectionResetError("the holder closed its socket")
        held += chunk
        while b"\n" in held:
            line, held = held.split(b"\n", 1)
            words = line.decode(errors="replace").split()
            if len(words) == 2 and words[0] == nonce and words[1].isdigit():
                return int(words[1])


def _receive_bundle(sock):
    data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 256)
    if not data:
        os._exit(0)  # every live worker that could ask is gone: nothing to wait for
    while len(data) < 8:
        data += sock.recv(8 - len(data))
    size = int.from_bytes(data[:8], "big")
    data = data[8:]
    while len(data) < size:
        chunk = sock.recv(min(1 << 20, size - len(data)))
        if not chunk:
            break
        data += chunk
    try:
        return json.loads(data), fds
    except ValueError:
        for fd in fds:
            os.close(fd)
        return None, []


HOLDERS = None


def holders():
    global HOLDERS
    if HOLDERS is None:
        HOLDERS = Holders()
    return HOLDERS
