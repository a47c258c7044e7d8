"""input() and getpass.getpass(): forwarded to the frontend as input_request frames.

Only when the execute request allowed stdin; otherwise the same error as ipykernel's.
"""
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
    so the cell would run into its time limit and lose the session. Here, as in ipykernel
    (IPython's InterruptiblePdb), the interrupt ends the debugging session and the cell."""
    def _cmdloop(self):
        self.allow_kbdint = True
        try:
            self.cmdloop()
        except KeyboardInterrupt:
            # Quit for good: tracing off, and the frames set_trace marked (the worker's own,
            # up to its loop) unmarked, so no later debugger stops in them for this one.
            self.stop_here = lambda frame: False
            self.set_quit()
            import sys
            sys.settrace(None)
            frame = sys._getframe()
            while frame is not None:
                if getattr(frame.f_trace, "__self__", None) is self:
                    frame.f_trace = None
                frame = frame.f_back
            raise
        finally:
            self.allow_kbdint = False

    module.Pdb._cmdloop = _cmdloop
