"""The `%%limits` cell magic, handled by the worker itself (IPython is not needed).

    %%limits --timeout 2 --memory 256M --cpu 2 --output-limit 1M
    <cell body>

The options' text goes to the supervisor as written, in a `limits` frame: it parses the values
with the command line's own grammar (one grammar for `--memory` wherever it is written), and
the body runs only once it accepts them (see PROTOCOL.md). Any problem is a LimitError.
"""
MAGIC = "%%limits"
USAGE = ("usage: %%limits [--timeout SECONDS] [--cpu SECONDS] [--memory SIZE] "
         "[--output-limit SIZE]  (SIZE: bytes or 512K, 256M, 2G; SECONDS: 2, 1.5s, 500ms, 2m)")

# option -> frame key
_OPTIONS = {
    "--timeout": "timeout",
    "--cpu": "cpu",
    "--memory": "memory",
    "--output-limit": "output_limit",
}


class LimitError(Exception):
    """A %%limits line that does not parse, or limits the supervisor refused."""


def split_limits_cell(code):
    """(magic line, body) when code is a %%limits cell, else None."""
    stripped = code.lstrip("\n")
    first, _, body = stripped.partition("\n")
    words = first.split(None, 1)
    if not words or words[0] != MAGIC:
        return None
    skipped = code.count("\n", 0, len(code) - len(stripped))
    return first, body, skipped + 1


def negotiate_limits(channel, cell_id, limits):
    """The cell's limits asked of the supervisor, which decides: the body runs only once it
    accepts them (a LimitError, with the supervisor's reason, when it refuses)."""
    frame = {"type": "limits", "id": cell_id}
    frame.update(limits)
    channel.send(frame)
    reply = channel.wait_for("limits_reply")
    if not reply.get("ok"):
        raise LimitError(str(reply.get("error") or "the supervisor refused these limits"))


def parse_limits_line(line):
    """{'timeout': '2', 'memory': '256M', ...}: the text of each option given on the line."""
    import shlex
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise LimitError("%s (%s)" % (exc, USAGE)) from None
    words = words[1:]  # the magic's own name
    limits = {}
    i = 0
    while i < len(words):
        word = words[i]
        option, eq, value = word.partition("=")
        if option not in _OPTIONS:
            raise LimitError("unknown option %r; %s" % (word, USAGE))
        if not eq:
            i += 1
            if i == len(words):
                raise LimitError("%s needs a value; %s" % (option, USAGE))
            value = words[i]
        limits[_OPTIONS[option]] = value
        i += 1
    if not limits:
        raise LimitError("no limit given; " + USAGE)
    return limits
