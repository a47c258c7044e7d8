"""Every execution logged, measured and its output validated: the audit log field by field,
the facts in execute_reply metadata, the Prometheus file, the output cap, bundle validation,
secret redaction and usage_request."""
import json
import os
import pathlib
import shutil
import tempfile

import pytest

from belljar_testing import (
    collect,
    execute,
    kernel_info,
    of_type,
    running_kernel,
    sandbox_writable_dir,
    stderr_of,
    stdout_of,
    wait_for_stream,
)

SECRET = "sk-observability-0123456789"         # given to the sandbox with --pass-env
KERNEL_ONLY = "sk-kernel-only-9876543210abcdef"  # in the kernel's environment only


@pytest.fixture(scope="module")
def observed():
    logs = sandbox_writable_dir("belljar-obs-")
    audit, metrics = logs / "audit.jsonl", logs / "metrics.prom"
    flags = ["--audit-log", str(audit), "--metrics", str(metrics), "--timeout", "2",
             "--pass-env", "BELLJAR_OBS_TOKEN"]
    env = {"BELLJAR_OBS_TOKEN": SECRET, "BELLJAR_OBS_KERNEL_ONLY": KERNEL_ONLY}
    with running_kernel(flags=flags, env=env) as (km, kc):
        yield km, kc, audit, metrics


def records(audit, event=None):
    lines = [json.loads(line) for line in audit.read_text().splitlines() if line.strip()]
    return [r for r in lines if event is None or r["event"] == event]


def last_cell(audit):
    return records(audit, "cell")[-1]


def test_kernel_start_record(observed):
    _, _, audit, _ = observed
    start = records(audit, "kernel_start")[0]
    assert start["version"] and start["pid"] > 0 and start["kernel"]
    assert start["policy"]["isolation"] in ("strict", "degraded", "none")
    assert start["policy"]["timeout_seconds"] == 2
    starts = records(audit, "worker_start")
    assert starts and starts[0]["kernel"] == start["kernel"]


def test_ok_cell_record_and_reply_facts(observed):
    _, kc, audit, _ = observed
    code = "print('hello')\n40 + 2"
    reply, _ = execute(kc, code)
    record = last_cell(audit)
    assert record["status"] == "ok"
    assert record["msg_id"] == reply["parent_header"]["msg_id"]
    assert record["execution_count"] == reply["content"]["execution_count"]
    assert record["code_bytes"] == len(code.encode())
    import hashlib
    assert record["code_sha256"] == hashlib.sha256(code.encode()).hexdigest()
    assert "code" not in record, "the code itself is logged only with --audit-code"
    assert record["output_bytes"]["stdout"] == len("hello\n")
    assert record["truncated"] is False and record["limit_hit"] is None
    assert record["wall_ms"] >= 0 and record["cpu_ms"] >= 0 and record["peak_memory_bytes"] > 0
    assert ["text/plain"] in record["displays"]
    facts = reply["metadata"]["belljar"]
    for key in ("wall_ms", "cpu_ms", "peak_memory_bytes", "limits", "limit_hit",
                "output_truncated", "egress_denied"):
        assert key in facts
    assert facts["limits"]["timeout_seconds"] == 2
    assert facts["output_truncated"] is False


def test_error_timeout_and_crash_records(observed):
    _, kc, audit, _ = observed
    execute(kc, "raise ValueError('nope')")
    record = last_cell(audit)
    assert record["status"] == "error" and record["ename"] == "ValueError"
    reply, _ = execute(kc, "while True: pass")
    record = last_cell(audit)
    assert record["status"] == "timeout" and record["limit_hit"] == "timeout"
    assert reply["metadata"]["belljar"]["limit_hit"] == "timeout"
    execute(kc, "import os; os._exit(7)")
    record = last_cell(audit)
    assert record["status"] == "crashed"
    exits = records(audit, "worker_exit")
    assert any("exit status 7" in r["cause"] for r in exits)
    assert len(records(audit, "worker_start")) >= 2


def test_metrics_file_is_prometheus_text(observed):
    _, kc, _, metrics = observed
    execute(kc, "1")
    samples = {}
    for line in metrics.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, value = line.rsplit(" ", 1)
        samples[name] = float(value)
    assert samples['belljar_cells_total{status="ok"}'] >= 1
    assert samples["belljar_cell_duration_seconds_count"] >= 1
    assert samples['belljar_cell_duration_seconds_bucket{le="+Inf"}'] == samples["belljar_cell_duration_seconds_count"]
    assert "belljar_worker_restarts_total" in samples
    assert 'belljar_egress_requests_total{decision="denied"}' in samples


def test_usage_request_is_answered(observed):
    _, kc, _, _ = observed
    msg = kc.session.msg("usage_request", {})
    kc.control_channel.send(msg)
    reply = kc.get_control_msg(timeout=10)
    while reply["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
        reply = kc.get_control_msg(timeout=10)
    content = reply["content"]
    assert reply["msg_type"] == "usage_reply"
    assert content["kernel_memory"] > 0 and content["cpu_count"] >= 1
    assert content["host_virtual_memory"]["total"] > 0


def test_passed_secret_is_redacted_everywhere(observed):
    _, kc, audit, _ = observed
    reply, outputs = execute(kc, f"print('key is {SECRET}')\n"
                                 f"from IPython.display import display, HTML\n"
                                 f"display(HTML('<b>{SECRET}</b>'))\n"
                                 f"'{SECRET}'")
    text = json.dumps([m["content"] for m in outputs])
    assert SECRET not in text
    assert "[redacted]" in stdout_of(outputs)
    reply, outputs = execute(kc, f"raise RuntimeError('{SECRET}')")
    assert SECRET not in json.dumps(reply["content"]) + json.dumps([m["content"] for m in outputs])
    assert SECRET not in audit.read_text()


def test_a_passed_secret_is_redacted_from_a_displays_metadata_and_transient_part(observed):
    """The outside attack on issue 40's redesign: a display's metadata, its transient
    display_id and a result's metadata carried the value to the client unredacted (the bundle
    itself was redacted). Control: the value reaches the cell, which shows it is the one."""
    _, kc, _, _ = observed
    code = ("import os\n"
            "from IPython.display import display, update_display\n"
            "tok = os.environ['BELLJAR_OBS_TOKEN']\n"
            "print(len(tok))\n"
            "display({'text/plain': 'x'}, raw=True, metadata={'leak': tok})\n"
            "display({'text/plain': 'y'}, raw=True, transient={'display_id': tok})\n"
            "update_display({'text/plain': 'z'}, raw=True, display_id=tok, metadata={'m': tok})\n"
            "class R:\n"
            "    def _repr_mimebundle_(self, include=None, exclude=None):\n"
            "        return {'text/plain': 'r'}, {'leak2': tok}\n"
            "R()\n")
    reply, outputs = execute(kc, code)
    assert reply["content"]["status"] == "ok", reply["content"]
    assert stdout_of(outputs).strip() == str(len(SECRET))  # the control: the cell has it
    shown = [m for m in outputs if m["msg_type"] in ("display_data", "update_display_data",
                                                     "execute_result")]
    assert len(shown) == 4, [m["msg_type"] for m in outputs]
    assert SECRET not in json.dumps([m["content"] for m in outputs])
    assert "[redacted]" in json.dumps([m["content"] for m in shown])


def test_redaction_is_no_oracle_for_a_secret_the_sandbox_never_had(observed):
    # A cell printing the start of the kernel-only value, then more after a pause, must be
    # chunked exactly like the same text with a wrong guess: holding back a matching prefix
    # let a cell recover the value character by character from message boundaries.
    _, kc, _, _ = observed
    code = ("import sys, time\n"
            "sys.stdout.write({!r}); sys.stdout.flush(); time.sleep(0.3)\n"
            "sys.stdout.write('!'); sys.stdout.flush(); time.sleep(0.3)\n")
    def streams(guess):
        _, outputs = execute(kc, code.format(guess))
        return [m["content"]["text"] for m in of_type(outputs, "stream")]
    matching = streams(KERNEL_ONLY[:12])
    wrong = streams("zz" + KERNEL_ONLY[2:12])
    assert [len(t) for t in matching] == [len(t) for t in wrong], (matching, wrong)
    # The value never reached the sandbox: output holding it is not touched at all.
    assert "".join(matching) == KERNEL_ONLY[:12] + "!"
    _, outputs = execute(kc, "import os; print(os.environ.get('BELLJAR_OBS_KERNEL_ONLY'))")
    assert stdout_of(outputs).strip() == "None"


def test_invalid_bundle_from_the_worker_is_replaced(observed):
    _, kc, _, _ = observed
    # The frame names the request it answers, as every frame must (the worker can read the id).
    code = ("import json, os, struct, sys\n"
            "from belljar_worker import current\n"
            "sys.stdout.flush()\n"
            "frame = json.dumps({'type': 'display', 'id': current.session.channel.request_id,\n"
            "                    'data': {'image/png': 'not base64 at all!'},"
            " 'metadata': {}, 'transient': {}}).encode()\n"
            "os.write(3, struct.pack('>I', len(frame)) + frame)\n")
    reply, outputs = execute(kc, code)
    displays = of_type(outputs, "display_data")
    assert displays, outputs
    data = displays[0]["content"]["data"]
    assert "image/png" not in data
    assert "invalid display" in data["text/plain"]


def test_print_flood_is_capped_and_the_kernel_stays_responsive():
    with running_kernel(flags=["--timeout", "120"]) as (km, kc):
        msg_id = kc.execute("import sys\nline = 'x' * 1023 + '\\n'\n"
                            "for _ in range(200 * 1024): sys.stdout.write(line)\n")
        assert wait_for_stream(kc, msg_id, "xxxx"), "the flood never started"
        # Answered while the flood runs, or get_control_msg raises queue.Empty.
        info = kc.session.msg("kernel_info_request", {})
        kc.control_channel.send(info)
        got = kc.get_control_msg(timeout=5)
        while got["parent_header"].get("msg_id") != info["header"]["msg_id"]:
            got = kc.get_control_msg(timeout=5)
        reply, outputs = collect(kc, msg_id, timeout=120)
        assert reply["content"]["status"] == "ok"
        received = sum(len(m["content"]["text"].encode()) for m in outputs
                       if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")
        assert received <= 10 * 1024 * 1024
        assert received >= 9 * 1024 * 1024
        assert "output limit" in stderr_of(outputs) and "dropped" in stderr_of(outputs)
        assert stderr_of(outputs).count("output limit") == 1
        assert reply["metadata"]["belljar"]["output_truncated"] is True


def sandbox_notes_everywhere(isolation):
    """A kernel under `isolation`: its notes as kernel_info_reply, the banner and the audit
    log's kernel_start record carry them. The log is kept off /tmp, which a degraded sandbox
    can write."""
    logs = pathlib.Path(tempfile.mkdtemp(prefix="belljar-notes-", dir="/var/tmp"))
    os.chmod(logs, 0o777)
    audit = logs / "audit.jsonl"
    try:
        with running_kernel(flags=["--isolation", isolation, "--audit-log", str(audit)]) as (_, kc):
            kc.kernel_info()
            info = kc.get_shell_msg(timeout=30)["content"]
        start = records(audit, "kernel_start")[0]
        return info, start
    finally:
        shutil.rmtree(logs, ignore_errors=True)


@pytest.mark.parametrize("isolation", ["degraded", "none"])
def test_what_the_sandbox_lacks_reaches_the_client_and_the_log(isolation):
    info, start = sandbox_notes_everywhere(isolation)
    notes = info["belljar"]["notes"]
    assert info["belljar"]["isolation"] == isolation
    assert start["notes"] == notes
    if isolation == "none":
        assert any("unsandboxed" in note for note in notes)
        assert "NO SANDBOX" in info["banner"]  # says it louder than any note
    for note in notes if isolation != "none" else ():
        assert note in info["banner"]
    if isolation == "degraded" and os.geteuid() != 0:
        # Unprivileged, this host's kernels get no cgroup of their own: degraded says so.
        assert notes, "a degraded sandbox without cgroups reported nothing missing"


@pytest.mark.parametrize("required", [False, True])
def test_audit_write_failure_is_counted_said_and_refuses_cells_when_required(required):
    """A real failing write: RLIMIT_FSIZE on the running kernel (prlimit) lets the audit log grow
    only a few bytes, so the next cell's record is cut short (write returns less) and then
    refused (EFBIG; SIGXFSZ must not kill the kernel). The failure is counted in the metrics,
    named in the banner and in %audit; with --audit-required later cells are refused with an
    error naming the audit log, while control (kernel_info) is still served."""
    import resource
    logs = sandbox_writable_dir("belljar-audit-fail-")
    audit, metrics = logs / "audit.jsonl", logs / "metrics.prom"
    flags = ["--audit-log", str(audit), "--metrics", str(metrics), "--audit-code"]
    if required:
        flags.append("--audit-required")
    try:
        with running_kernel(flags=flags) as (km, kc):
            # A large record first, so the log is larger than the metrics file: the limit below
            # then stops the audit log and not the metrics file's rewrite.
            reply, _ = execute(kc, "# " + "x" * 20000 + "\nprint('big')")
            assert reply["content"]["status"] == "ok"
            pid = km.provisioner.process.pid
            _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (audit.stat().st_size + 40, hard))
            reply, _ = execute(kc, "print('recorded?')")
            assert reply["content"]["status"] == "ok"  # it ran; its record is what failed
            assert km.is_alive(), "a failed audit write killed the kernel (SIGXFSZ?)"

            banner = kernel_info(kc)["banner"]
            assert "AUDIT LOG FAILING" in banner and "File too large" in banner, banner
            samples = dict(line.rsplit(" ", 1) for line in metrics.read_text().splitlines()
                           if line.startswith("belljar_audit_write_failures_total"))
            assert float(samples["belljar_audit_write_failures_total"]) >= 1

            reply, outputs = execute(kc, "%audit 1" if not required else "print('refused?')")
            if required:
                content = reply["content"]
                assert content["status"] == "error" and content["ename"] == "AuditLogError"
                assert "audit record(s) could not be written" in content["evalue"]
                assert "--audit-required" in content["evalue"]
                assert "refused?" not in stdout_of(outputs)
            else:
                assert reply["content"]["status"] == "ok"
                shown = [m["content"]["data"]["text/plain"] for m in of_type(outputs, "display_data")]
                assert any("AUDIT LOG FAILING" in text for text in shown), shown
            # Control is served either way, and the kernel is still there.
            msg = kc.session.msg("kernel_info_request", {})
            kc.control_channel.send(msg)
            answer = kc.get_control_msg(timeout=30)
            assert answer["msg_type"] == "kernel_info_reply"
            assert km.is_alive()
    finally:
        shutil.rmtree(logs, ignore_errors=True)
