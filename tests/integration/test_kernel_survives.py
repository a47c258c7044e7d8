"""One throw never ends the kernel. A request whose handling throws (a field of a shape no check
foresaw) gets an error reply and is logged; a worker frame whose handling throws faults that
worker, which is restarted as for a frame that won't parse. Either way the kernel keeps serving.
The inputs here threw out of the reactor before the boundaries (requests.cpp `dispatch_next`,
`submit_control`; frame_reader.cpp `take_frames`) and ended the kernel.
"""
import queue

import pytest

from belljar_testing import running_kernel, still_answers


@pytest.fixture(scope="module")
def kernel():
    with running_kernel() as (km, kc):
        yield km, kc


def answer(kc, channel, msg_type, content, timeout=30):
    msg = kc.session.msg(msg_type, content)
    getattr(kc, channel + "_channel").send(msg)
    get = kc.get_shell_msg if channel == "shell" else kc.get_control_msg
    while True:
        try:
            reply = get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no reply to {msg_type}: the kernel died or dropped it") from None
        if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
            return reply


def test_a_shell_request_that_throws_gets_an_error_reply(kernel):
    km, kc = kernel
    # `output` must be a boolean: as a number, reading it threw nlohmann's type_error 302.
    reply = answer(kc, "shell", "history_request",
                   {"output": 1, "raw": True, "hist_access_type": "tail", "n": 3})
    assert reply["msg_type"] == "history_reply"
    assert reply["content"]["status"] == "error", reply["content"]
    assert "type_error" in reply["content"]["evalue"] or "type must be" in reply["content"]["evalue"]
    still_answers(km, kc)


def test_a_control_request_that_throws_gets_an_error_reply(kernel):
    km, kc = kernel
    reply = answer(kc, "control", "shutdown_request", {"restart": "yes"})
    assert reply["msg_type"] == "shutdown_reply"
    assert reply["content"]["status"] == "error", reply["content"]
    still_answers(km, kc)
