"""The debugger's adapter, in the worker: what debugpy's adapter process and ipykernel's
Debugger class do for ipykernel, on belljar's own thread: the one that flushes the streams
every 50 ms serves the debug channel while it waits (streams.py).

It answers the supervisor's debug_request frames one at a time, in order. Jupyter's own
commands (debugInfo, dumpCell, inspectVariables, richInspectVariables, copyToGlobals, modules,
source) are answered here, in ipykernel's shapes; DAP commands go to pydevd, which runs in this
process (pydevd_link.py). Nothing is imported until the user turns the debugger on
(`initialize`): debugInfo, which JupyterLab sends on every connect, needs nothing.

Only the session's main thread is traced, armed by the session before each cell while a
debug session is started; belljar's own threads are never traced, so a breakpoint can't
freeze the thread that answers the frontend, nor the one that flushes output.
"""
import os
import sys
import time

from .cell_files import HASH_SEED, SUFFIX
from .debug_channel import ChannelClosed

# pydevd_link (socket, threading) and variables (json, re) are imported when first needed: a
# session that never turns the debugger on loads nothing but this thread's own modules.

SOURCE_LIMIT = 8 << 20
# DAP requests pydevd answers for us; anything else is refused before it reaches pydevd,
# which would print "Unhandled" to the cell's stdout for a command it does not know.
_FORWARDED = frozenset((
    "setBreakpoints", "setExceptionBreakpoints", "threads", "stackTrace", "scopes",
    "variables", "evaluate", "continue", "next", "stepIn", "stepOut", "pause",
    "exceptionInfo", "setVariable", "setExpression", "completions"))
# Capabilities pydevd offers that would reach past the session: ending the process, and
# requests refused above.
_NOT_OFFERED = ("supportsTerminateRequest", "supportTerminateDebuggee", "supportsTerminateDebuggee",
                "supportsDebuggerProperties", "supportsGotoTargetsRequest",
                "supportsStepInTargetsRequest")
_WORKER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Debugger:
    def __init__(self, channel, cell_files, session_ref):
        self.channel = channel
        self.cell_files = cell_files
        self._session = session_ref  # () -> the Session, once built
        self.link = None          # PydevdLink, from the first initialize on
        self.started = False      # between a successful initialize and disconnect
        self.breakpoints = {}     # path -> [{"line": n}], as pydevd confirmed them
        self.stopped_threads = []
        self._explorer = None
        self._client_init = {}    # the frontend's initialize arguments, for pydevd's
        self._handlers = {
            "debugInfo": self.debug_info, "initialize": self.initialize, "attach": self.attach,
            "configurationDone": self.configuration_done, "disconnect": self.disconnect,
            "dumpCell": self.dump_cell, "source": self.source, "modules": self.modules,
            "setBreakpoints": self.set_breakpoints, "variables": self.variables,
            "stackTrace": self.stack_trace,
            "inspectVariables": self.inspect_variables,
            "richInspectVariables": self.rich_inspect_variables,
            "copyToGlobals": self.copy_to_globals}

    # -- the thread --------------------------------------------------------------------
    def serve_for(self, seconds):
        """Wait up to `seconds` for a request on fd 4 and answer it (the stream flusher's wait
        between flushes, streams.py); after the channel closed, only wait."""
        if self.channel.closed:
            time.sleep(seconds)
            return
        try:
            if not self.channel.wait_readable(seconds):
                return
            frame = self.channel.receive()
            if not frame or frame.get("type") != "debug_request":
                return
            content = frame.get("content")
            reply = self.answer(content if isinstance(content, dict) else {})
            self.channel.send({"type": "debug_reply", "id": frame.get("id"), "content": reply})
        except ChannelClosed:
            self.channel.closed = True

    def answer(self, request):
        command = request.get("command")
        handler = self._handlers.get(command)
        try:
            if handler is not None:
                return handler(request)
            if command in _FORWARDED:
                return self._forward(request)
            return _refused(request, "belljar's debugger does not serve %r" % (command,))
        except Exception as exc:  # a bug here must not end the thread that answers
            return _refused(request, "%s: %s" % (type(exc).__name__, exc))

    # -- the main thread's part ----------------------------------------------------------
    def before_cell(self):
        """Called by the session on the main thread as each cell starts."""
        link = self.link
        if link is None:
            return
        if self.started:
            link.arm_this_thread()
        else:
            link.disarm_this_thread()

    def before_interrupt(self):
        """SIGINT on the main thread: a pause at a breakpoint ends, every thread runs again."""
        if self.stopped_threads and self.link is not None:
            try:
                self.link.resume_all()
            except Exception:
                pass

    # -- pydevd's events -------------------------------------------------------------------
    def _event(self, event):
        if not self.started:
            return
        name, body = event.get("event"), event.get("body") or {}
        if name == "stopped":
            thread = body.get("threadId")
            if thread not in self.stopped_threads:
                self.stopped_threads.append(thread)
            # The supervisor stops the cell's clock first, then the frontend hears of it.
            self.channel.send({"type": "debug_state", "paused": True})
            self._send_event(event)
            return
        if name == "continued":
            if body.get("allThreadsContinued", True):
                self.stopped_threads = []
            elif body.get("threadId") in self.stopped_threads:
                self.stopped_threads.remove(body.get("threadId"))
            if not self.stopped_threads:
                self.channel.send({"type": "debug_state", "paused": False})
        self._send_event(event)

    def _send_event(self, event):
        event = {k: v for k, v in event.items() if k != "pydevd_cmd_id"}
        try:
            self.channel.send({"type": "debug_event", "content": event})
        except ChannelClosed:
            pass

    # -- commands --------------------------------------------------------------------------
    def debug_info(self, request):
        return _response(request, {
            "isStarted": self.started,
            "hashMethod": "Murmur2",
            "hashSeed": HASH_SEED,
            "tmpFilePrefix": self.cell_files.prefix,
            "tmpFileSuffix": SUFFIX,
            "breakpoints": [{"source": path, "breakpoints": lines}
                            for path, lines in self.breakpoints.items()],
            "stoppedThreads": list(self.stopped_threads),
            "richRendering": True,
            "exceptionPaths": ["Python Exceptions"],
            "copyToGlobals": True})

    def initialize(self, request):
        if self.link is None:
            from .pydevd_link import DebuggerUnavailable, PydevdLink, mark_not_traced
            mark_not_traced()  # this thread: a breakpoint must never stop the one that answers
            link = PydevdLink(self._event, self.cell_files.prefix)
            try:
                os.makedirs(self.cell_files.prefix, mode=0o700, exist_ok=True)
                link.start()
            except (DebuggerUnavailable, OSError) as exc:
                return _refused(request, "the debugger could not start: %s" % exc)
            self.link = link
        self._client_init = request.get("arguments") or {}
        answer = self.link.request("initialize", dict(self._client_init, adapterID="python"))
        if not answer.get("success"):
            return _as_answer(request, answer)
        body = dict(answer.get("body") or {})
        body.pop("pydevd", None)
        for capability in _NOT_OFFERED:
            body[capability] = False
        self.started = True
        return _response(request, body)

    def attach(self, request):
        if not self.started:
            return _refused(request, "the debugger is not started")
        arguments = dict(request.get("arguments") or {})
        arguments.update(justMyCode=False, debugOptions=["DebugStdLib"], subProcess=False,
                         rules=[{"path": path, "include": False} for path in _hidden_paths()])
        answer = self.link.request("attach", arguments)
        if answer.get("success"):
            # ipykernel's client sends configurationDone itself once pydevd says initialized;
            # the frontend's own configurationDone is then answered here.
            self.link.request("configurationDone")
        return _as_answer(request, answer)

    def configuration_done(self, request):
        return _response(request, None)

    def disconnect(self, request):
        answer = _response(request, None)
        if self.started:
            answer = _as_answer(request, self.link.request(
                "disconnect", {"restart": False, "terminateDebuggee": False}))
        self.started = False
        self.breakpoints = {}
        if self.stopped_threads:
            self.stopped_threads = []
            self.channel.send({"type": "debug_state", "paused": False})
        return answer

    def dump_cell(self, request):
        code = (request.get("arguments") or {}).get("code")
        if not isinstance(code, str):
            return _refused(request, "dumpCell needs the cell's code")
        return _response(request, {"sourcePath": self.cell_files.dump(code)})

    def source(self, request):
        source = (request.get("arguments") or {}).get("source") or {}
        path = source.get("path") if isinstance(source, dict) else None
        try:
            with open(path, "rb") as f:
                content = f.read(SOURCE_LIMIT + 1)
        except (OSError, TypeError, ValueError):
            return dict(_refused(request, "source unavailable"), body={})
        if len(content) > SOURCE_LIMIT:
            return dict(_refused(request, "source larger than %d MiB" % (SOURCE_LIMIT >> 20)),
                        body={})
        return _response(request, {"content": content.decode("utf-8", "replace")})

    def modules(self, request):
        arguments = request.get("arguments") or {}
        loaded = list(sys.modules.values())
        start = _int(arguments.get("startModule"), 0)
        count = _int(arguments.get("moduleCount"), len(loaded))
        found = []
        for index, module in enumerate(loaded[start:start + count], start):
            origin = getattr(getattr(module, "__spec__", None), "origin", None)
            if isinstance(origin, str) and origin.endswith(".py"):
                found.append({"id": index, "name": str(getattr(module, "__name__", "")),
                              "path": origin})
        return _response(request, {"modules": found, "totalModules": len(loaded)})

    def set_breakpoints(self, request):
        answer = self._forward(request)
        path = ((request.get("arguments") or {}).get("source") or {}).get("path")
        if answer.get("success") and isinstance(path, str):
            confirmed = [{"line": b.get("line")} for b in
                         (answer.get("body") or {}).get("breakpoints") or []]
            if confirmed:
                self.breakpoints[path] = confirmed
            else:
                self.breakpoints.pop(path, None)
        return answer

    def stack_trace(self, request):
        answer = self._forward(request)
        body = answer.get("body")
        frames = body.get("stackFrames") if isinstance(body, dict) else None
        if isinstance(frames, list):
            # The outermost frame is the `python -c` line that started the worker; the rules
            # given at attach hide the rest of belljar, but they match paths, and it has none.
            while frames and _source_path(frames[-1]) == "<string>":
                frames.pop()
            body["totalFrames"] = len(frames)
        return answer

    def variables(self, request):
        if self.started and not self.stopped_threads and self._explorer is not None:
            reference = (request.get("arguments") or {}).get("variablesReference")
            found = self._explorer.children(reference)
            if found is not None:
                return _response(request, {"variables": found})
        answer = self._forward(request)
        body = answer.get("body")
        if isinstance(body, dict) and isinstance(body.get("variables"), list):
            from .variables import shown
            body["variables"] = [v for v in body["variables"]
                                 if isinstance(v, dict) and shown(str(v.get("name", "")))]
        return answer

    def inspect_variables(self, request):
        session = self._session()
        if session is None or not self.started:
            return _response(request, {"variables": []})
        if self._explorer is None:
            from .variables import NamespaceExplorer
            self._explorer = NamespaceExplorer()
        found = self._explorer.inspect(session.namespace, self.cell_files.prefix + "session")
        return _response(request, {"variables": found})

    def rich_inspect_variables(self, request):
        arguments = request.get("arguments") or {}
        name = arguments.get("variableName")
        empty = {"data": {}, "metadata": {}}
        if not isinstance(name, str) or not name.isidentifier():
            # JupyterLab asks for its own group rows too: nothing to show, and no error.
            ok = name in ("special variables", "function variables")
            return dict(_response(request, empty), success=ok)
        if self.stopped_threads and self.started and "frameId" in arguments:
            answer = self.link.request("evaluate", {
                "expression": "__import__(%r, fromlist=['rich']).rich(%s)"
                              % (__name__.rpartition(".")[0] + ".variables", name),
                "frameId": arguments["frameId"], "context": "clipboard"})
            if not answer.get("success"):
                return _as_answer(request, answer)
            import ast
            import json
            try:
                data, metadata = json.loads(ast.literal_eval(answer["body"]["result"]))
            except (ValueError, SyntaxError, KeyError, TypeError):
                return _response(request, empty)
        else:
            session = self._session()
            if session is None or name not in session.namespace:
                return _response(request, empty)
            data, metadata = session.format(session.namespace[name])
        return _response(request, {"data": data,
                                   "metadata": {k: v for k, v in metadata.items() if k in data}})

    def copy_to_globals(self, request):
        arguments = request.get("arguments") or {}
        source, target = arguments.get("srcVariableName"), arguments.get("dstVariableName")
        if not (isinstance(source, str) and source.isidentifier()
                and isinstance(target, str) and target.isidentifier()):
            return _refused(request, "dstVariableName and srcVariableName must be valid "
                                     "identifiers")
        if not self.started:
            return _refused(request, "the debugger is not started")
        return _as_answer(request, self.link.request("setExpression", {
            "expression": "globals()[%r]" % target, "value": source,
            "frameId": arguments.get("srcFrameId")}))

    def _forward(self, request):
        if not self.started:
            return _refused(request, "the debugger is not started")
        return _as_answer(request, self.link.request(request.get("command"),
                                                     request.get("arguments")))


def _hidden_paths():
    """Code whose frames the user never steps through: belljar's worker and debugpy."""
    paths = [_WORKER_DIR]
    debugpy = sys.modules.get("debugpy")
    if debugpy is not None and getattr(debugpy, "__file__", None):
        paths.append(os.path.dirname(debugpy.__file__))
    return paths


def _source_path(frame):
    source = frame.get("source") if isinstance(frame, dict) else None
    return source.get("path") if isinstance(source, dict) else None


def _response(request, body):
    answer = {"type": "response", "request_seq": request.get("seq"), "success": True,
              "command": request.get("command")}
    if body is not None:
        answer["body"] = body
    return answer


def _refused(request, message):
    return {"type": "response", "request_seq": request.get("seq"), "success": False,
            "command": request.get("command"), "message": message}


def _as_answer(request, answer):
    """pydevd's response, addressed to the frontend's request (its own seq numbers differ)."""
    answer = {k: v for k, v in answer.items() if k not in ("pydevd_cmd_id", "seq")}
    answer.update(type="response", request_seq=request.get("seq"),
                  command=request.get("command"))
    return answer


def _int(value, default):
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
        else default
