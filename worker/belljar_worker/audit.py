"""The `%audit` magic: the supervisor's audit records of this session's cells, shown in the
notebook ("what you would monitor in production"). The worker can only ask; the records come
from the supervisor, which wrote them, so code in the cell can't forge them.

    %audit        the last 10 cells
    %audit 3      the last 3
"""
MAGIC = "%audit"
COLUMNS = [("execution_count", "cell"), ("status", "status"), ("wall_ms", "wall ms"),
           ("cpu_ms", "CPU ms"), ("peak_memory_bytes", "peak memory"), ("limit_hit", "limit hit"),
           ("truncated", "truncated"), ("output_bytes", "output bytes"),
           ("secrets", "API calls"), ("code_sha256", "code sha256")]


def audit_request(code):
    """How many records a `%audit [N]` cell asks for, or None when the cell is something else."""
    words = code.strip().split()
    if not words or words[0] != MAGIC:
        return None
    if len(words) == 1:
        return 10
    if len(words) == 2 and words[1].isdigit():
        return max(1, int(words[1]))
    raise ValueError("usage: %audit [N]  (the last N cells, 10 by default)")


def _cell(key, value):
    if value is None:
        return "—"
    if key == "peak_memory_bytes" and isinstance(value, (int, float)):
        return "%.1f MiB" % (value / (1 << 20))
    if key == "output_bytes" and isinstance(value, dict):
        return ", ".join("%s %s" % item for item in sorted(value.items()))
    if key == "secrets" and isinstance(value, dict):
        # Requests to hosts a secret is bound to: cost and latency, what the course says to watch.
        return "%s (%s+%s tokens, %s ms)" % (value.get("requests"), value.get("input_tokens"),
                                             value.get("output_tokens"), value.get("latency_ms"))
    if key == "code_sha256":
        return str(value)[:12]
    return str(value)


AUDIT_JSON = "application/vnd.belljar.audit+json"


def audit_bundle(records, log_error=None):
    """text/plain, text/html and the records as JSON; `log_error` is the supervisor's word that
    audit records could not be written (they are missing from the audit log). The JSON has a type
    of its own: JupyterLab ranks `application/json` above HTML and would show a learner a
    collapsed JSON tree where the table is meant; a client reads the records under AUDIT_JSON."""
    import html  # only when %audit runs: plain cells don't pay for it
    rows = [[_cell(key, record.get(key)) for key, _ in COLUMNS] for record in records]
    header = [title for _, title in COLUMNS]
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)] if rows else []
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)) for line in [header] + rows]
    table = "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % html.escape(x) for x in row) for row in rows)
    head = "".join("<th>%s</th>" % html.escape(t) for t in header)
    warning = ("AUDIT LOG FAILING: %s" % log_error) if isinstance(log_error, str) and log_error else ""
    text = "\n".join(lines) if rows else "no cells audited yet"
    bundle = {
        "text/plain": text + ("\n" + warning if warning else ""),
        "text/html": "<table><thead><tr>%s</tr></thead><tbody>%s</tbody></table>" % (head, table)
                     + ("<p><strong>%s</strong></p>" % html.escape(warning) if warning else ""),
        AUDIT_JSON: {"records": records},
    }
    if warning:
        bundle[AUDIT_JSON]["log_error"] = log_error
    return bundle


def show_audit(channel, cell_id, wanted):
    """A `%audit` cell: the last `wanted` records asked of the supervisor, shown as a display."""
    channel.send({"type": "audit_request", "id": cell_id, "last": wanted})
    reply = channel.wait_for("audit_reply")
    records = reply.get("records") if isinstance(reply.get("records"), list) else []
    channel.send({"type": "display", "data": audit_bundle(records, reply.get("log_error")),
                  "metadata": {}, "transient": {}})
