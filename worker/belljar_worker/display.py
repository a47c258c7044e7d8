"""display(), update_display(), clear_output() and DisplayHandle, without IPython.

`display` is also installed as a builtin, as in IPython. Once IPython is imported, its own
IPython.display functions send the same frames (see ipython_bridge).
"""
import os

from . import current


def new_display_id():
    return os.urandom(16).hex()


def display(*objs, include=None, exclude=None, metadata=None, transient=None,
            display_id=None, raw=False, clear=False, **kwargs):
    """Display each object with its richest representations (a `display` frame each).

    display_id=True makes up an id; with an id, a DisplayHandle is returned so the output
    can be updated in place later. raw=True sends objs as ready-made mime bundles."""
    session = current.session
    if display_id is True:
        display_id = new_display_id()
    if display_id:
        transient = dict(transient or {}, display_id=display_id)
    if session is None:  # used outside the worker: plain text is all there is
        for obj in objs:
            print(repr(obj))
        return DisplayHandle(display_id) if display_id else None
    if clear:
        session.clear_output(wait=True)
    update = bool(kwargs.pop("update", False))
    for obj in objs:
        if raw:
            data, md = (obj, metadata or {}) if isinstance(obj, dict) else ({}, {})
        else:
            data, md = session.format(obj, include=include, exclude=exclude)
            if metadata:
                md = dict(md, **metadata)
        if data:
            session.publish_display(data, md, transient, update)
    if display_id:
        return DisplayHandle(display_id)
    return None


def update_display(obj, *, display_id, **kwargs):
    """Replace what was displayed under display_id with obj."""
    kwargs["update"] = True
    display(obj, display_id=display_id, **kwargs)


def clear_output(wait=False):
    """Clear the cell's output; wait=True clears only when new output arrives."""
    session = current.session
    if session is not None:
        session.clear_output(wait)


class DisplayHandle:
    """A handle on one output area, to display into it and update it later."""

    def __init__(self, display_id=None):
        self.display_id = display_id or new_display_id()

    def __repr__(self):
        return "<%s display_id=%s>" % (type(self).__name__, self.display_id)

    def display(self, obj, **kwargs):
        display(obj, display_id=self.display_id, **kwargs)

    def update(self, obj, **kwargs):
        update_display(obj, display_id=self.display_id, **kwargs)
