"""The session: one persistent namespace, the cells run in it and the frames they send.

Every request is answered: an execute or a comm request always ends with exactly one `done`
frame, even when user code interrupts, exits or breaks the worker's own bookkeeping
(fallback_replies.py answers what a handler left unanswered).

The Session dispatches requests and runs cells; what else a session keeps is a part's own,
wired here: the history in the namespace (history.py), where displays go (output_frames.py),
the cell's payload (payloads.py), input() (stdin.InputRequests), comm requests
(comm_requests.py), errors and whether they fail the request (error_reports.py), and IPython's
shell once IPython is imported (shell.py). The rest of the worker reaches the session through
current.session and the methods below that name a part's door (publish_display,
report_error, write_payload, request_input, ...), never a part's fields.
"""
import builtins
import os
import sys

from . import current, formatting, history, stdin, tracebacks
from . import display as display_module
from .audit import audit_request, show_audit
from .comm_requests import CommRequests
from .error_reports import ErrorReports
from .fallback_replies import fallback_frames
from .import_hooks import PostImportHooks, StandInModules
from .ipython_bridge import IPYTHON_MISSING, looks_like_ipython
from .limits import negotiate_limits, parse_limits_line, split_limits_cell
from .output_frames import OutputFrames
from .payloads import Payloads
from .runner import NO_VALUE, CellRunner, without_leading_indent


class UsageError(Exception):
    """IPython syntax in a session that cannot have IPython."""


def _quietly(obj, method_name, exc):
    pass


class CellContext:
    __slots__ = ("id", "code", "silent", "store_history", "allow_stdin", "execution_count",
                 "failed", "done_sent")

    def __init__(self, msg):
        self.id = msg.get("id")
        self.code = msg.get("code") or ""
        self.silent = bool(msg.get("silent", False))
        self.store_history = bool(msg.get("store_history", True)) and not self.silent
        self.allow_stdin = bool(msg.get("allow_stdin", False))
        count = msg.get("execution_count")
        self.execution_count = count if isinstance(count, int) and count >= 0 else None
        self.failed = False
        self.done_sent = False


def get_ipython():
    """The session's IPython shell, as in ipykernel from the first cell (notebooks and libraries
    call it before anything else): made on the first call, so a session that never asks never
    imports IPython. None where IPython is not installed, as IPython's own answer outside a
    shell."""
    try:
        return current.session._require_shell()
    except UsageError:
        return None


class ExitAutocall:
    """`exit` and `quit` as in ipykernel: typed in a cell (bare, or called), they ask the
    frontend to end the session (an `ask_exit` payload: jupyter console quits) instead of
    raising SystemExit in the worker or printing "Use exit() or Ctrl-D"."""

    def __call__(self, keep_kernel=False):
        current.session.write_payload({"source": "ask_exit", "keepkernel": bool(keep_kernel)})

    def __repr__(self):
        return "<exit: asks the frontend to end the session>"


class Session:
    # Names the session itself puts in the user namespace.
    SESSION_NAMES = ("__builtins__",) + history.NAMES + ("get_ipython", "exit", "quit")

    def __init__(self, channel, gate, streams):
        self.channel, self.gate, self.streams = channel, gate, streams
        self.main_module = type(sys)("__main__")
        ns = self.namespace = self.main_module.__dict__
        ns["__builtins__"] = builtins
        self.history = history.History(ns)  # In, Out, _, _i...
        ns.update(get_ipython=get_ipython, exit=ExitAutocall(), quit=ExitAutocall())
        sys.modules["__main__"] = self.main_module
        self.runner = CellRunner(ns)
        self.cell_labels = {}  # code filename -> "In[N]" for tracebacks
        self.ctx = None
        self._execute_ctx = None     # the execute being served, until its `done` is sent
        self.shell = None            # IPython's InteractiveShell, once IPython is imported
        self.ipython_mode = False    # cells go through IPython's transforms
        self.post_cell_hooks = []
        # The frontend's msg_id of the execute or comm request being served (the supervisor
        # sends it): ipywidgets' Output widget captures the output parented to it.
        self.parent_msg_id = ""
        self.output = OutputFrames(channel, streams)  # displays, and the streams by parent
        self.parents = self.output.parents  # which request output goes to (output_parents.py)
        # What the cell asks of the frontend itself (an execute_reply's payload).
        self.payloads = Payloads(lambda: self.shell)
        self.input_requests = stdin.InputRequests(channel)  # input() and getpass()
        self.comms = CommRequests(channel, gate, streams, self)  # also those during a cell
        self.errors = ErrorReports(channel, self.cell_labels, lambda: self.ctx, self.comms)
        # JupyterLab's debugger (debugger/), when the worker was given fd 4 and has debugpy.
        self.debugger = None
        builtins.display = display_module.display
        builtins.input = stdin.forwarded_input
        self._install_import_hooks()
        self._handlers = {"execute": self.execute, "complete": self.complete,
                          "inspect": self.inspect, "is_complete": self.is_complete,
                          "comm": self.comms.serve, "comm_info": self.comms.info}
        current.session = self

    def _install_import_hooks(self):
        PostImportHooks({"IPython": self._ipython_imported,
                         "getpass": stdin.patch_getpass,
                         "pdb": stdin.patch_pdb,
                         "matplotlib": _use_inline_backend,
                         "comm": _hook_comm_package,
                         "asyncio": _asyncio_imported}).install()
        StandInModules(dict(dict.fromkeys(current.IPYKERNEL_STAND_INS, _build_stand_in),
                            **{current.MATPLOTLIB_INLINE: _build_inline_backend}),
                       modules=(current.MATPLOTLIB_INLINE,)).install()

    # -- dispatch ------------------------------------------------------------------------
    def handle(self, msg):
        handler = self._handlers.get(msg.get("type"))
        if handler is None:
            return  # e.g. an input_reply that arrived after its cell was interrupted
        if "during" in msg:
            # A comm message handed during a cell that ended before serving it: the supervisor
            # sends it again as a request of its own (PROTOCOL.md, "Comms during a cell").
            return
        self.channel.request_id = msg.get("id")
        serves_output = msg.get("type") in ("execute", "comm")
        if serves_output:
            msg_id = msg.get("msg_id")
            self.parent_msg_id = msg_id if isinstance(msg_id, str) else ""
            self.parents.serve(self.parent_msg_id)
            self.output.route_if_tasks_outlive_requests()
        try:
            handler(msg)
        except BaseException as exc:
            self.gate.leave_user_code()
            self.recover(msg, exc)
        finally:
            self.channel.request_id = None  # what is sent from now on is between requests
            if serves_output:
                self.parents.served()

    def route_output_by_parent(self):
        self.output.route_by_parent()

    def between_requests(self):
        """Until the next request arrives: the session's asyncio loop runs its tasks, timers and
        callbacks (event_loop.py), once anything imported asyncio; else nothing to do."""
        loops = sys.modules.get(__package__ + ".event_loop")
        if loops is None or self.channel.frame_ready():
            return
        self.output.route_if_tasks_outlive_requests()
        try:
            loops.run_until_readable(self.channel.fd, self.gate)
        except BaseException:
            pass  # an interrupt that landed as the loop stopped: there is nothing to interrupt
        finally:
            self.gate.leave_user_code()
            self.gate.between_requests = None

    def recover(self, msg, exc):
        """A failure of the worker itself: say so on stderr and still answer the request."""
        if not isinstance(exc, KeyboardInterrupt):
            try:
                import traceback
                sys.stderr.write("belljar worker: internal error while handling %r\n"
                                 % msg.get("type"))
                traceback.print_exception(type(exc), exc, exc.__traceback__)
            except Exception:
                pass
        kind = msg.get("type")
        if kind == "execute":
            done_sent = self._execute_ctx is not None and self._execute_ctx.done_sent
            self.ctx = self._execute_ctx = None
            if done_sent:
                return
        elif kind == "comm":
            self.comms.status = None
        for frame in fallback_frames(msg, exc):
            self.channel.send(frame)

    def _in_user_code(self, fn, *args):
        """Run fn with SIGINT raising KeyboardInterrupt; whatever it raises becomes an
        error frame and fails the cell."""
        self.gate.enter_user_code()
        try:
            return fn(*args)
        except BaseException as exc:
            self.gate.leave_user_code()
            self.errors.cell_raised(exc)
            return None
        finally:
            self.gate.leave_user_code()

    # -- execute -------------------------------------------------------------------------
    def execute(self, msg):
        ctx = self.ctx = self._execute_ctx = CellContext(msg)
        self.streams.reopen_if_closed()
        user_expressions = {}
        try:
            self._in_user_code(self._run_cell, ctx)
            self._in_user_code(self._after_cell, ctx)
            requested = msg.get("user_expressions")
            if not ctx.failed and isinstance(requested, dict) and requested:
                user_expressions = self._in_user_code(self._user_expressions, requested) or {}
        finally:
            self.ctx = None
        payload = self._take_payload()
        self.streams.flush()
        ctx.done_sent = True
        self.channel.send({"type": "done", "id": ctx.id,
                           "status": "error" if ctx.failed else "ok",
                           "user_expressions": user_expressions, "payload": payload})
        self._execute_ctx = None

    def _run_cell(self, ctx):
        if "checkpoint" in ctx.code or "%rollback" in ctx.code:
            from .checkpoints import checkpoint_magic, serve_magic
            magic = checkpoint_magic(ctx.code)
            if magic is not None:
                serve_magic(self, ctx, *magic)
                return
        wanted = audit_request(ctx.code)
        if wanted is not None:
            show_audit(self.channel, ctx.id, wanted)
            return
        code, head, prefix_lines = self._cell_body(ctx)
        filename = self._name_cell(ctx)
        source, tree = self._parse(code, head, prefix_lines, filename)
        if ctx.store_history:
            self.history.store_input(ctx.execution_count,
                                     ctx.code if head else source[prefix_lines:], ctx.code)
        if self.shell is not None:
            self.shell.cell_event(ctx, "pre")
            if self.shell.ast_transformers:
                tree = self.shell.transform_ast(tree)
        cell = self.runner.compile(tree, source, filename)
        value = self.runner.run(cell)
        if isinstance(value, ExitAutocall):
            value()  # a bare `exit`: IPython's autocall
            return
        if value is NO_VALUE or value is None or cell.quiet or ctx.silent:
            return
        if ctx.store_history:
            self.history.store_output(ctx.execution_count, value)
        self._show_result(value)

    def _cell_body(self, ctx):
        """(code, head, prefix lines): the code to run, and what comes before it in the cell:
        a %%limits line, negotiated with the supervisor before the body runs."""
        limits_cell = split_limits_cell(ctx.code)
        if limits_cell is None:
            return ctx.code, "", 0
        magic_line, code, prefix_lines = limits_cell
        head = ctx.code[:len(ctx.code) - len(code)]
        negotiate_limits(self.channel, ctx.id, parse_limits_line(magic_line))
        return code, head, prefix_lines

    def _name_cell(self, ctx):
        """The filename the cell is compiled under, and its In[N] label for tracebacks."""
        if self.debugger is not None:
            # The name JupyterLab computes for the cell, so its breakpoints are found.
            filename = self.debugger.cell_files.name(ctx.code)
            self.debugger.before_cell()
        else:
            filename = self.runner.new_filename()
        self.cell_labels[filename] = "In[%s]" % (
            ctx.execution_count if ctx.execution_count is not None else " ")
        return filename

    def _show_result(self, value):
        """The cell's value as its `result`: a formatter that raises fails the cell."""
        self.errors.formatting_result = True
        try:
            data, metadata = self.format(value)
        finally:
            self.errors.formatting_result = False
        if data:
            self.channel.send({"type": "result", "data": data, "metadata": metadata})

    def _parse(self, code, head, prefix_lines, filename):
        """(source, ast) of the cell body: plain Python, or IPython-transformed when the
        session uses IPython syntax. Line numbers count from the cell's first line."""
        padding = "\n" * prefix_lines
        if not self.ipython_mode:
            code = without_leading_indent(code)
            source = padding + code
            self.runner.register_source(filename, head + code)
            try:
                return source, self.runner.parse(source, filename)
            except SyntaxError:
                if not looks_like_ipython(code):
                    raise
            self._require_shell()
            self.ipython_mode = True
        transformed = self.shell.transform_cell(code)
        if self.debugger is not None:
            # IPython drops a cell's leading blank lines; the debugger's breakpoints count them.
            transformed = "\n" * (_blank_head(code) - _blank_head(transformed)) + transformed
        source = padding + transformed
        # Tracebacks show what the user typed when the lines still correspond one to one.
        same_lines = len(code.splitlines()) == len(transformed.splitlines())
        self.runner.register_source(filename, head + (code if same_lines else transformed))
        return source, self.runner.parse(source, filename)

    def _after_cell(self, ctx):
        for hook in list(self.post_cell_hooks):
            try:
                hook()
            except Exception as exc:
                self.errors.cell_raised(exc)
        if self.shell is not None:
            self.shell.cell_event(ctx, "post")
        self.streams.flush()

    def _user_expressions(self, expressions):
        results = {}
        for name, expression in expressions.items():
            try:
                value = eval(str(expression), self.namespace)
                data, metadata = self.format(value)
                results[name] = {"status": "ok", "data": data, "metadata": metadata}
            except Exception as exc:
                results[name] = dict(status="error",
                                     **tracebacks.error_content(exc, self.cell_labels))
        return results

    # -- output ----------------------------------------------------------------------------
    def format(self, obj, include=None, exclude=None):
        """(data, metadata) bundle for obj: IPython's formatter once IPython is loaded,
        the worker's own otherwise."""
        if self.shell is not None:
            try:
                data, metadata = self.shell.display_formatter.format(
                    obj, include=include, exclude=exclude)
            except Exception:
                data = None
            if data is not None:
                data = formatting.encode_bundle(data)
                if "text/plain" not in data and (data or formatting.real_method(
                        obj, "_ipython_display_") is None):
                    # IPython's formatter already showed why __repr__ failed, if it did.
                    text = formatting.plain_text(obj, on_failure=_quietly)
                    if text is not None:
                        data["text/plain"] = text
                return data, metadata or {}
        return formatting.format_object(obj, include, exclude, on_failure=self.errors.format_failed)

    def publish_display(self, data, metadata, transient, update):
        self.output.publish_display(data, metadata, transient, update)

    def clear_output(self, wait=False):
        self.output.clear_output(wait)

    def add_post_cell_hook(self, hook):
        if hook not in self.post_cell_hooks:
            self.post_cell_hooks.append(hook)

    def report_error(self, content):
        """An error IPython showed itself (error_reports.py decides whether it fails the cell)."""
        self.errors.shown(content)

    def report_handler_error(self, exc):
        """A comm target or callback raised (comms.py)."""
        self.errors.handler_raised(exc)

    def write_payload(self, item):
        """An execute_reply payload item (set_next_input, ask_exit, page)."""
        self.payloads.write(item)

    def _take_payload(self):
        return self.payloads.take()

    # -- comms -----------------------------------------------------------------------------
    def serve_comms_during_cell(self, cell_id):
        """From the session's loop while the cell `cell_id` awaits (event_loop.run_cell)."""
        self.comms.serve_during_cell(cell_id)

    # -- stdin -----------------------------------------------------------------------------
    def stdin_allowed(self):
        return self.input_requests.allowed(self.ctx)

    def request_input(self, prompt, password):
        return self.input_requests.request(prompt, password)

    # -- IPython ---------------------------------------------------------------------------
    def _require_shell(self):
        if self.shell is None:
            try:
                __import__("IPython")  # the import hook builds the shell
            except ModuleNotFoundError as exc:
                if exc.name == "IPython":
                    raise UsageError(IPYTHON_MISSING) from None
                raise UsageError("magics need IPython, which failed to import: %s" % exc) from None
            except ImportError as exc:
                raise UsageError("magics need IPython, which failed to import: %s" % exc) from None
            if self.shell is None:
                self._create_shell()
        return self.shell

    def _ipython_imported(self, module):
        try:
            self._create_shell()
        except Exception as exc:
            sys.stderr.write("belljar: IPython was imported but could not be set up: %s: %s\n"
                             % (type(exc).__name__, tracebacks.safe_str(exc)))

    def _create_shell(self):
        if self.shell is None:
            from .ipython_bridge import create_shell
            self.shell = create_shell(self)
            if self.ctx is not None and self.ctx.execution_count is not None:
                self.shell.execution_count = self.ctx.execution_count

    # -- introspection ---------------------------------------------------------------------
    def _introspect(self, fn, *args):
        self.gate.enter_user_code()  # a hanging property or __dir__ can be interrupted
        try:
            return fn(self, *args)
        except BaseException:
            return None
        finally:
            self.gate.leave_user_code()

    def complete(self, msg):
        from . import introspection
        code = str(msg.get("code") or "")
        pos = _cursor(msg, code)
        reply = self._introspect(introspection.complete, code, pos) or {
            "matches": [], "cursor_start": pos, "cursor_end": pos, "metadata": {}}
        self.channel.send(dict(type="complete_reply", id=msg.get("id"), **reply))

    def inspect(self, msg):
        from . import introspection
        code = str(msg.get("code") or "")
        level = msg.get("detail_level") or 0
        reply = self._introspect(introspection.inspect_reply, code, _cursor(msg, code),
                                 level) or {"found": False, "data": {}, "metadata": {}}
        self.channel.send(dict(type="inspect_reply", id=msg.get("id"), **reply))

    def is_complete(self, msg):
        from . import introspection
        code = str(msg.get("code") or "")
        status, indent = self._introspect(introspection.is_complete, code) or ("unknown", "")
        self.channel.send({"type": "is_complete_reply", "id": msg.get("id"),
                           "status": status, "indent": indent})


def _hook_comm_package(module):
    """`import comm`: libraries that create comms through it (ipywidgets 8) get ours."""
    if hasattr(module, "create_comm") and hasattr(module, "get_comm_manager"):
        from .comms import hook_comm_package
        hook_comm_package(module)


def _asyncio_imported(module):
    """The session's event loop exists from the moment anything imports asyncio."""
    from .event_loop import asyncio_imported
    asyncio_imported(module)


def _build_stand_in(module):
    from .ipykernel_stand_in import build
    build(module)


def _build_inline_backend(module):
    from .inline_backend import build_stand_in
    build_stand_in(module)


def _use_inline_backend(matplotlib):
    """Figures go to the frontend, unless the user chose a backend through MPLBACKEND."""
    if not os.environ.get("MPLBACKEND"):
        matplotlib.rcParams["backend"] = current.inline_backend()


def _blank_head(code):
    """How many lines at the start of code are blank."""
    count = 0
    for line in code.splitlines():
        if line.strip():
            break
        count += 1
    return count


def _cursor(msg, code):
    pos = msg.get("cursor_pos")
    if not isinstance(pos, int) or pos < 0 or pos > len(code):
        return len(code)
    return pos
