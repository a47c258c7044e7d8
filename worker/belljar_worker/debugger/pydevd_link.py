"""pydevd in the worker's own process, speaking DAP on one end of a socketpair.

debugpy's `listen()` would start an adapter process and open loopback TCP ports that any
local user could connect to (in degraded isolation the loopback is the host's). pydevd itself
answers DAP (debugpy's in-process adapter mode, HTTP_JSON protocol): we start it the way that
mode does, and only hand it our socket in place of the TCP connection it would open. No port
is listened on or connected to, and nothing crosses the sandbox but our frames on fd 4.

The parts of pydevd used here (`pydevd.start_client`, `PyDB.connect`, `settrace`,
`enable_tracing`) are the same in Debian's debugpy 1.6.3 (pydevd 2.9.5) and in 1.8.x.
"""
import _thread
import json
import os
import socket
import sys
import threading

ANSWER_TIMEOUT = 30.0
# The debugger's threads (pydevd's reader, writer and helpers, our reader) take 2 MiB stacks, not
# 8: an --memory enforced as RLIMIT_AS (no memory cgroup) counts every thread's whole stack.
THREAD_STACK = 2 << 20
M_ARENA_MAX = -8  # glibc's mallopt parameter


class DebuggerUnavailable(Exception):
    """pydevd could not be started here: the reason, for the initialize reply."""


def mark_not_traced(thread=None):
    """Keep pydevd from tracing or suspending a thread of belljar's own (its attributes are
    what pydevd checks on its own daemon threads)."""
    thread = thread or threading.current_thread()
    thread.pydev_do_not_trace = True
    thread.is_pydev_daemon_thread = True


class PydevdLink:
    def __init__(self, on_event, log_dir):
        self._on_event = on_event
        self._log_dir = log_dir
        self._seq = 0
        self._seq_lock = _thread.allocate_lock()
        self._waiting = {}  # request seq -> [threading.Event, response]
        self._sock = None
        self.pydb = None

    # -- starting ----------------------------------------------------------------------
    def start(self):
        """Import and connect pydevd (the first `initialize` only: about 0.5 s)."""
        os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # else a stderr warning
        os.environ.setdefault("PYDEVD_DEBUG_FILE", os.path.join(self._log_dir, "pydevd.log"))
        hook = sys.breakpointhook
        try:
            import debugpy._vendored.force_pydevd  # noqa: F401  (pydevd speaks DAP)
            import pydevd
        except Exception as exc:
            raise DebuggerUnavailable("debugpy could not be imported: %s" % exc) from None
        finally:
            sys.breakpointhook = hook  # breakpoint() stays belljar's pdb
        ours, theirs = socket.socketpair()
        handed = []

        def hand_over(host, port):
            handed.append(theirs)
            return theirs

        original = getattr(pydevd, "start_client", None)
        if original is None:
            raise DebuggerUnavailable("unsupported debugpy version (no pydevd.start_client)")
        _share_malloc_arenas()
        pydevd.start_client = hand_over
        stack_size = threading.stack_size(THREAD_STACK)  # pydevd's threads, and ours
        try:
            # In a thread that then ends: settrace traces the thread it runs in.
            connecting = threading.Thread(target=self._connect, args=(pydevd,),
                                          name="belljar-debug-connect")
            mark_not_traced(connecting)
            failure = []
            connecting.run = _catching(connecting.run, failure)
            connecting.start()
            connecting.join()
        finally:
            pydevd.start_client = original
        if not handed:
            threading.stack_size(stack_size)
            ours.close()
            theirs.close()
            raise DebuggerUnavailable("unsupported debugpy version (pydevd did not connect)%s"
                                      % (": %s" % failure[0] if failure else ""))
        self._sock = ours
        self.pydb = pydevd.get_global_debugger()
        reader = threading.Thread(target=self._read, name="belljar-debug-reader", daemon=True)
        mark_not_traced(reader)
        try:
            reader.start()
        finally:
            threading.stack_size(stack_size)

    @staticmethod
    def _connect(pydevd):
        pydevd.settrace(host="belljar", port=0, stdout_to_server=False, stderr_to_server=False,
                        suspend=False, trace_only_current_thread=True,
                        patch_multiprocessing=False, block_until_connected=True,
                        wait_for_ready_to_run=False, notify_stdin=False)
        pydevd.get_global_debugger().disable_tracing()

    # -- the main thread ---------------------------------------------------------------
    def arm_this_thread(self):
        """Trace the calling thread's next frames (a cell's code) for breakpoints."""
        pydb = self.pydb
        if pydb is not None and sys.gettrace() is None:
            pydb.enable_tracing()

    def disarm_this_thread(self):
        if self.pydb is not None and sys.gettrace() is not None:
            self.pydb.disable_tracing()

    def resume_all(self):
        """Let every suspended thread run (an interrupt at a breakpoint ends the pause)."""
        from _pydevd_bundle.pydevd_api import PyDevdAPI
        PyDevdAPI().request_resume_thread("*")

    # -- requests ----------------------------------------------------------------------
    def request(self, command, arguments=None, timeout=ANSWER_TIMEOUT):
        """Send a DAP request to pydevd and wait for its response (a dict)."""
        with self._seq_lock:
            self._seq += 1
            seq = self._seq
        waiter = [threading.Event(), None]
        self._waiting[seq] = waiter
        msg = {"seq": seq, "type": "request", "command": command}
        if arguments is not None:
            msg["arguments"] = arguments
        body = json.dumps(msg).encode("utf-8")
        try:
            self._sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            if not waiter[0].wait(timeout):
                return _failure(command, "the debugger did not answer %s within %d s"
                                % (command, timeout))
        finally:
            self._waiting.pop(seq, None)
        return waiter[1]

    def _read(self):
        buf = bytearray()
        sock = self._sock
        while True:
            chunk = sock.recv(1 << 16)
            if not chunk:
                return
            buf += chunk
            while True:
                head_end = buf.find(b"\r\n\r\n")
                if head_end < 0:
                    break
                length = _content_length(buf[:head_end])
                start = head_end + 4
                if length is None or len(buf) < start + length:
                    break
                body, buf = bytes(buf[start:start + length]), buf[start + length:]
                try:
                    msg = json.loads(body)
                except ValueError:
                    continue
                self._dispatch(msg)

    def _dispatch(self, msg):
        kind = msg.get("type")
        if kind == "response":
            waiter = self._waiting.get(msg.get("request_seq"))
            if waiter is not None:
                waiter[1] = msg
                waiter[0].set()
        elif kind == "event":
            try:
                self._on_event(msg)
            except Exception:
                pass


def _share_malloc_arenas():
    """Each new thread that allocates would get a malloc arena of its own: 64 MiB of address
    space apiece, which an --memory enforced as RLIMIT_AS counts (five threads: 320 MiB). From
    now on, new threads share the two arenas there are (the main one and the flusher's)."""
    try:
        import ctypes
        ctypes.CDLL(None).mallopt(M_ARENA_MAX, 2)
    except Exception:
        pass  # not glibc: nothing to tune


def _content_length(head):
    for line in bytes(head).split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _failure(command, message):
    return {"type": "response", "command": command, "success": False, "message": message}


def _catching(run, failure):
    def run_and_keep_failure():
        try:
            run()
        except BaseException as exc:
            failure.append("%s: %s" % (type(exc).__name__, exc))
    return run_and_keep_failure
