"""Before authentication, a peer can't make the kernel buffer what no client sends: a message
part over 64 MiB (transport.hpp, kMaxClientMessage) is refused as it arrives (ZMQ_MAXMSGSIZE)
and its peer disconnected. A real ZMQ peer sends a real unsigned 1 GiB part to a real kernel;
the kernel's peak RSS stays small, it logs the disconnect, and a jupyter_client request after
it gets its reply.
"""
import mmap
import pathlib
import shutil
import tempfile
import time

import zmq
from jupyter_client import KernelManager
from zmq.utils.monitor import recv_monitor_message

from belljar_testing import TIMEOUT, install_kernelspec, ready_client, sandbox_writable_dir

GIB = 1 << 30


def peak_rss_bytes(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def wait_for_disconnect(monitor, timeout=TIMEOUT):
    """The peer's own socket event: the kernel closed the connection."""
    poller = zmq.Poller()
    poller.register(monitor, zmq.POLLIN)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not poller.poll(int(max(0, deadline - time.monotonic()) * 1000)):
            break
        if recv_monitor_message(monitor)["event"] == zmq.EVENT_DISCONNECTED:
            return
    raise AssertionError("the kernel kept the connection that sent 1 GiB")


def test_one_gib_unsigned_part_is_refused_unbuffered_and_the_kernel_serves_on():
    with tempfile.TemporaryDirectory(prefix="belljar-spec-") as prefix:
        spec_dir = install_kernelspec(prefix)
        ws = sandbox_writable_dir("belljar-ws-")
        stderr_path = pathlib.Path(prefix) / "kernel.stderr"
        km = KernelManager(kernel_name="belljar-test")
        km.kernel_spec_manager.kernel_dirs.insert(0, str(spec_dir.parent))
        with open(stderr_path, "wb") as stderr:
            km.start_kernel(cwd=ws, stderr=stderr)
        try:
            with ready_client(km) as kc:
                pid = km.provisioner.process.pid
                before = peak_rss_bytes(pid)
                info = km.get_connection_info()
                context = zmq.Context()
                peer = context.socket(zmq.DEALER)
                peer.setsockopt(zmq.LINGER, 0)
                monitor = peer.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED)
                peer.connect(f"tcp://{info['ip']}:{info['shell_port']}")
                # An anonymous mapping never touched: 1 GiB to send without 1 GiB in this test.
                body = mmap.mmap(-1, GIB, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
                try:
                    peer.send_multipart([b"<IDS|MSG>", b"unsigned", memoryview(body)], copy=False)
                    wait_for_disconnect(monitor)
                finally:
                    peer.close()
                    monitor.close()
                    context.term()
                    body.close()
                peak = peak_rss_bytes(pid)
                print(f"kernel peak RSS: {before >> 20} MiB before, {peak >> 20} MiB after 1 GiB")
                assert peak < before + (64 << 20), (before, peak)
                assert peak < 256 << 20, peak
                # The kernel serves a real client after it.
                assert km.is_alive()
                msg_id = kc.kernel_info()
                reply = kc.get_shell_msg(timeout=TIMEOUT)
                while reply["parent_header"].get("msg_id") != msg_id:
                    reply = kc.get_shell_msg(timeout=TIMEOUT)
                assert reply["content"]["status"] == "ok"
                # Logged: the reactor reads its monitor on its next wake-up (the reply above).
                log = stderr_path.read_text(errors="replace")
                assert "peer disconnected" in log and "over 64 MiB" in log, log[-2000:]
        finally:
            shutil.rmtree(ws, ignore_errors=True)
