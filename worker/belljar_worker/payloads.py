"""What a cell asks of the frontend itself, returned in its execute_reply's `payload`:
set_next_input (%load), ask_exit (exit, quit), page (the pager).

Before IPython is loaded the session keeps its own list; once a shell exists, IPython's payload
manager holds what magics write, and both are taken at the cell's end. The supervisor checks
every item against the sources it knows (a page's bundle as any display's): this list is only
what the cell asked.
"""


class Payloads:
    def __init__(self, shell):
        self._shell = shell  # () -> IPython's shell, or None before IPython is loaded
        self._own = []

    def write(self, item):
        shell = self._shell()
        if shell is not None:
            shell.payload_manager.write_payload(item)
        else:
            self._own.append(item)

    def take(self):
        """The cell's payload, in the order written; both lists are empty after."""
        payload, self._own = self._own, []
        shell = self._shell()
        if shell is None:
            return payload
        try:
            payload += list(shell.payload_manager.read_payload())
            shell.payload_manager.clear_payload()
        except Exception:
            pass
        return payload
