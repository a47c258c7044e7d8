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
