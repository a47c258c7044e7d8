"""input() and getpass.getpass(): forwarded to the frontend as input_request frames.

Only when the execute request allowed stdin; otherwise the same error as ipykernel's.
InputRequests is the session's end: whether the cell may ask, and the question and its answer
over the frame channel (the supervisor sends the frontend's input_reply back as a frame).
"""
import _thread

from . import current


class StdinNotImplementedError(IOError, NotImplementedError):
    """input() was called, but this frontend does not support input requests."""


def _request(prompt, password):
    session = current.session
    if session is None or not session.stdin_allowed():
        caller = "getpass" if password else "raw_input"
        raise StdinNotImplementedError(
            "%s was called, but this frontend does not support input requests." % caller)
    return session.request_input("" if prompt is None else str(prompt), password)


class InputRequests:
    def __init__(self, channel):
        self._channel = channel

    def allowed(self, cell):
        """Whether `cell` (the CellContext being served, or None) may ask the frontend: only
        from the cell's own thread, as a second reader on fd 3 would steal the cell's frames."""
        return (cell is not None and cell.allow_stdin
                and _thread.get_ident() == self._channel.main_thread)

    def request(self, prompt, password):
        """The frontend's answer to prompt; EOFError where it gave none (Ctrl-D, an error)."""
        try:
            # The frontend may answer the prompt with an interrupt as soon as it sees it: one
            # landing as the request is still being sent (held until the frame is whole) counts.
            self._channel.send({"type": "input_request", "prompt": prompt,
                                "password": password})
            reply = self._channel.wait_for("input_reply")
        except KeyboardInterrupt:
            raise KeyboardInterrupt("Interrupted by user") from None  # ipykernel's words
        if reply.get("error"):
            raise EOFError(str(reply["error"]))
        value = reply.get("value", "")
        value = value if isinstance(value, str) else str(value)
        if value == "\x04":  # Ctrl-D at the prompt, as in ipykernel
            raise EOFError("EOF when reading a line")
        return value


def forwarded_input(prompt=""):
    """Read a line from the frontend (the prompt is shown there, not printed)."""
    return _request(prompt, False)


def forwarded_getpass(prompt="Password: ", stream=None):
    """Read a password from the frontend, which hides what is typed."""
    return _request(prompt, True)


def patch_getpass(module):
    module.getpass = forwarded_getpass


def patch_pdb(module):
    """pdb at its prompt (pdb.set_trace(), breakpoint()) waits on the frontend like input();
    the stock debugger answers an interrupt there with "--KeyboardInterrupt--" and asks again,
    so the cell would run into its time limit and lose the session. Here, as under ipykernel
    7 (IPython's InterruptiblePdb), the interrupt ends the debugging session: pdb says so and
    lets go, and the cell runs on from where it stopped (a cell still busy after that is
    interrupted as any other)."""
    def _cmdloop(self):
        self.allow_kbdint = True
        try:
            self.cmdloop()
        except KeyboardInterrupt as exc:
            self.message("--KeyboardInterrupt--")
            _stop_debugging(self)
            import traceback
            self.message("\n" + "".join(traceback.format_exception_only(type(exc), exc))
                         .rstrip("\n"))
        finally:
            self.allow_kbdint = False

    module.Pdb._cmdloop = _cmdloop


def _stop_debugging(debugger):
    """Tracing off for good, without quitting (bdb would raise BdbQuit into the cell): the
    frames set_trace marked (the worker's own, up to its loop) unmarked, and this debugger
    stops nowhere again."""
    import sys
    debugger.stop_here = lambda frame: False
    debugger.set_continue()
    sys.settrace(None)
    frame = sys._getframe()
    while frame is not None:
        if getattr(frame.f_trace, "__self__", None) is debugger:
            frame.f_trace = None
        frame = frame.f_back
