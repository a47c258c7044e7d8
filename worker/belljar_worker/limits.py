"""The `%%limits` cell magic, handled by the worker itself (IPython is not needed).

    %%limits --timeout 2 --memory 256M --cpu 2 --output-limit 1M
    <cell body>

The parsed limits go to the supervisor in a `limits` frame; the body runs only once the
supervisor accepts them (see PROTOCOL.md). Any problem is a LimitError.
"""
MAGIC = "%%limits"
USAGE = ("usage: %%limits [--timeout SECONDS] [--cpu SECONDS] [--memory SIZE] "
         "[--output-limit SIZE]  (SIZE: bytes or 512K, 256M, 2G; SECONDS: 2, 1.5, 500ms, 2m)")

# option -> (frame key, parser)
_OPTIONS = {
    "--timeout": ("timeout", "duration"),
    "--cpu": ("cpu", "duration"),
    "--memory": ("memory", "size"),
    "--output-limit": ("output_limit", "size"),
}
_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_TIME_UNITS = {"": 1.0, "s": 1.0, "ms": 0.001, "m": 60.0, "h": 3600.0}


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


def parse_limits_line(line):
    """{'timeout': 2.0, 'memory': 268435456, ...} for the options given on the magic line."""
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
        key, kind = _OPTIONS[option]
        limits[key] = _parse_size(option, value) if kind == "size" else _parse_duration(option, value)
        i += 1
    if not limits:
        raise LimitError("no limit given; " + USAGE)
    return limits


def _split_number(text):
    end = 0
    while end < len(text) and (text[end].isdigit() or text[end] == "."):
        end += 1
    return text[:end], text[end:].strip()


def _parse_size(option, text):
    number, unit = _split_number(text.strip())
    unit = unit.upper()
    if unit.endswith("B"):
        unit = unit[:-1]
    if unit.endswith("I"):
        unit = unit[:-1]
    try:
        value = float(number)
        factor = _SIZE_UNITS[unit]
    except (ValueError, KeyError):
        raise LimitError("%s: %r is not a size (e.g. 4096, 512K, 256M, 2G)" % (option, text)) from None
    size = int(value * factor)
    if size <= 0:
        raise LimitError("%s must be more than 0, got %r" % (option, text))
    return size


def _parse_duration(option, text):
    number, unit = _split_number(text.strip())
    try:
        value = float(number) * _TIME_UNITS[unit.lower()]
    except (ValueError, KeyError):
        raise LimitError("%s: %r is not a duration (e.g. 2, 1.5, 500ms, 2m)" % (option, text)) from None
    if not value > 0 or value == float("inf"):
        raise LimitError("%s must be more than 0 seconds, got %r" % (option, text))
    return value
