"""Where the session's displays and clear_output go: display, update_display and clear_output
frames, parented to the request their output belongs to (output_parents.py), and the streams
routed by parent once another parent can exist.

The request being served is the parents' (OutputParents, owned here): the session tells them
when a request starts and ends. A display from a thread or a task that names another request
goes as a frame naming it, which the supervisor accepts only for a request it handed over and
charges to that request's budget (worker/PROTOCOL.md): nothing here decides what is shown.
"""
import _thread
import sys

from . import formatting
from .output_parents import OutputParents, route_streams


class OutputFrames:
    def __init__(self, channel, streams):
        self._channel, self._streams = channel, streams
        self.parents = OutputParents()  # which request output goes to

    def publish_display(self, data, metadata, transient, update):
        data = formatting.encode_bundle(data or {})
        if formatting.WIDGET_VIEW in data and "text/plain" not in data:
            from .comms import widget_text
            data["text/plain"] = widget_text(data[formatting.WIDGET_VIEW])
        self._send({"type": "update_display" if update else "display",
                    "data": data, "metadata": metadata or {},
                    "transient": transient or {}})

    def clear_output(self, wait=False):
        self._send({"type": "clear_output", "wait": bool(wait)})

    def route_by_parent(self):
        route_streams(self._streams, self.parents, self._channel.send)

    def route_if_tasks_outlive_requests(self):
        """A task made by one request may print during another, or between requests, where
        the supervisor cannot tell by timing alone which request the pipes' text is for."""
        loops = sys.modules.get(__package__ + ".event_loop")
        if not self.parents.named and loops is not None and loops.has_tasks():
            self.route_by_parent()

    def _send(self, frame):
        parent = self.parents.foreign()
        if parent is None and _thread.get_ident() != self._channel.main_thread:
            # A thread's display as its request ends: named, it still lands there once the
            # request is over (sent with the request's id alone, it would then be dropped).
            parent = self.parents.current
        if parent is not None:
            frame["parent"] = parent
        self._channel.send(frame)
