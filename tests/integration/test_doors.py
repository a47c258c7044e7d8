"""The kernel's doors before authentication (docs/security.md, "The kernel's own doors"; the
rules are kDoorRules and GateLimits in kernel/protocol/zmtp_gate.hpp, the bounds in
transport.hpp). Real peers on 127.0.0.0/8 against a real kernel: raw TCP sockets that speak
ZMTP 3 by hand, real ZMQ sockets, real jupyter_client.

What passes: a handshake within 10 s; on shell, control and stdin a connection that
authenticates (a message the kernel accepts, or the identity of a connection that sent one),
or one that is not idle for 30 s and sends nothing the kernel refuses; 32 unauthenticated
connections per source address and door, 256 in all. The complement is probed: connections
that never finish the handshake, that idle unauthenticated, that send unsigned or reflected
messages, the 33rd of one address on each door, and peers whose unfinished messages would
push out the client's own.
"""
import socket
import struct
import time

import pytest
import zmq
from jupyter_client.session import Session
from test_wire_limits import kernel_under_attack
from zmq.utils.monitor import recv_monitor_message

from belljar_testing import TIMEOUT, execute, kernel_info, stdout_of

KIB = 1 << 10
MIB = 1 << 20
HANDSHAKE_BOUND = 10  # kHandshakeBound
UNAUTHENTICATED_BOUND = 30  # kUnauthenticatedBound
PER_ADDRESS = 32  # kMaxPerAddress
# Every door in the connection file, and what a client's socket on it says it is.
DOORS = {"shell_port": b"DEALER", "control_port": b"DEALER", "stdin_port": b"DEALER",
         "iopub_port": b"SUB", "hb_port": b"REQ"}
GREETING = b"\xff" + bytes(8) + b"\x7f" + bytes([3, 0]) + b"NULL".ljust(20, b"\0") + bytes(32)


def ready(socket_type, *identities):
    body = b"\x05READY" + b"\x0bSocket-Type" + struct.pack(">I", len(socket_type)) + socket_type
    for identity in identities:
        body += b"\x08Identity" + struct.pack(">I", len(identity)) + identity
    return bytes([4, len(body)]) + body


def read_exactly(peer, size):
    data = b""
    while len(data) < size:
        chunk = peer.recv(size - len(data))
        if not chunk:
            raise ConnectionResetError("closed")
        data += chunk
    return data


def connect_from(port, source="127.0.0.1"):
    peer = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    peer.bind((source, 0))
    peer.settimeout(TIMEOUT)
    peer.connect(("127.0.0.1", port))
    return peer


def handshaken(port, socket_type, source="127.0.0.1", identities=()):
    """A raw peer that finished the NULL handshake (the kernel's READY read), or None when the
    kernel closed it first."""
    peer = connect_from(port, source)
    try:
        peer.sendall(GREETING + ready(socket_type, *identities))
        read_exactly(peer, 64)
        flags, size = read_exactly(peer, 2)
        if flags & 2:
            size = struct.unpack(">Q", bytes([size]) + read_exactly(peer, 7))[0]
        read_exactly(peer, size)
        return peer
    except (ConnectionResetError, BrokenPipeError):
        peer.close()
        return None


def wait_closed(peer, timeout):
    """Seconds until the kernel closes `peer` (what it sent before is read and dropped)."""
    start = time.monotonic()
    peer.settimeout(timeout)
    try:
        while peer.recv(4096):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        raise AssertionError(f"the kernel kept the connection for {timeout} s") from None
    return time.monotonic() - start


def still_open(peer):
    """Nothing more is waiting, not even the end: the kernel keeps it."""
    peer.setblocking(False)
    try:
        return bool(peer.recv(1))
    except BlockingIOError:
        return True
    except ConnectionResetError:
        return False
    finally:
        peer.settimeout(TIMEOUT)


def monitored(context, kind, port, identity=None):
    sock = context.socket(kind)
    sock.setsockopt(zmq.LINGER, 0)
    if identity:
        sock.setsockopt(zmq.IDENTITY, identity)
    monitor = sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED)
    sock.connect(f"tcp://127.0.0.1:{port}")
    return sock, monitor


def next_event(monitor, timeout):
    if not monitor.poll(int(timeout * 1000)):
        return None
    return recv_monitor_message(monitor)["event"]


def wait_event(monitor, event, timeout):
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        if next_event(monitor, left) == event:
            return
    raise AssertionError(f"no {event} within {timeout} s")


def signed_round(session, sock, msg_type="kernel_info_request"):
    session.send(sock, msg_type, {})
    assert sock.poll(TIMEOUT * 1000), "no reply"
    return session.recv(sock, mode=0)[1]


def session_of(info):
    return Session(key=info["key"].encode() if isinstance(info["key"], str) else info["key"],
                   signature_scheme=info["signature_scheme"])


@pytest.mark.parametrize("addresses", ["one address", "an address each"])
def test_idle_handshaken_connections_on_every_door_shut_no_new_client_out(addresses):
    """256 peers finish the NULL handshake and idle, from one address (the caps per address
    hold them) or each from its own of 127.0.0.0/8 (the cap in all does); a second frontend (a
    page reload) then connects and runs a cell. Before, the 257th connection was refused, so
    were the new client's five."""
    with kernel_under_attack() as (km, kc, stderr_path):
        info = km.get_connection_info()
        doors = list(DOORS.items())

        def source(i):
            return "127.0.0.1" if addresses == "one address" else f"127.0.{2 + i // 250}.{1 + i % 250}"

        peers = [handshaken(info[doors[i % 5][0]], doors[i % 5][1], source=source(i))
                 for i in range(256)]
        try:
            # A frontend of its own: its own session, so its own identity.
            second = km.client(session=session_of(info))
            second.start_channels()
            try:
                second.wait_for_ready(timeout=TIMEOUT)
                reply, outputs = execute(second, "print(6 * 7)")
                assert reply["content"]["status"] == "ok"
                assert stdout_of(outputs) == "42\n"
            finally:
                second.stop_channels()
            assert kernel_info(kc)["status"] == "ok"  # the first client too
        finally:
            for peer in peers:
                if peer:
                    peer.close()
        log = stderr_path.read_text(errors="replace")
        assert "closed for a new one" in log, log[-2000:]


def test_peers_declaring_large_parts_cannot_push_out_the_clients_cell():
    """248 unauthenticated peers from eight addresses each declare a 528 KiB part and hold it
    (129 MiB of the 128 MiB budget with the cell): the client's 1 MiB cell runs. Before, the
    cell's connection was the largest holder and the one closed."""
    with kernel_under_attack() as (km, kc, stderr_path):
        info = km.get_connection_info()
        kernel_info(kc)  # the client's shell connection authenticated
        peers = []
        try:
            for i in range(248):
                peer = handshaken(info["shell_port"], b"DEALER", source=f"127.0.0.{2 + i % 8}")
                assert peer, "a peer was refused before it declared anything"
                peer.sendall(b"\x03" + struct.pack(">Q", 528 * KIB))  # MORE | LONG, body never sent
                peers.append(peer)
            code = "x = '" + "a" * MIB + "'\nprint(len(x))"
            reply, outputs = execute(kc, code)
            assert reply["content"]["status"] == "ok"
            assert stdout_of(outputs) == f"{MIB}\n"
            closed = sum(not still_open(peer) for peer in peers)
        finally:
            for peer in peers:
                peer.close()
        log = stderr_path.read_text(errors="replace")
        assert closed >= 1 and "unauthenticated, holding" in log, (closed, log[-2000:])
        assert "authenticated, holding" not in log.replace("unauthenticated, holding", "")


def test_a_handshake_not_finished_within_its_bound_is_closed():
    """Silent, greeting only, READY half sent: each closed about 10 s after it connected; a
    finished handshake on iopub (which has no signed message to send) is kept."""
    with kernel_under_attack() as (km, kc, stderr_path):
        info = km.get_connection_info()
        kept = handshaken(info["iopub_port"], b"SUB")
        start = time.monotonic()
        silent = connect_from(info["shell_port"])
        greeting_only = connect_from(info["control_port"])
        greeting_only.sendall(GREETING)
        half_ready = connect_from(info["hb_port"])
        half_ready.sendall(GREETING + ready(b"REQ")[:9])
        try:
            for peer in (silent, greeting_only, half_ready):
                # Before libzmq's own handshake interval (30 s) would close it behind the gate.
                wait_closed(peer, 2 * HANDSHAKE_BOUND)
                waited = time.monotonic() - start
                assert waited >= HANDSHAKE_BOUND - 2, waited  # by the bound, not at once
            assert still_open(kept)
            assert kernel_info(kc)["status"] == "ok"
        finally:
            for peer in (kept, silent, greeting_only, half_ready):
                peer.close()
        assert "no ZMTP handshake within 10 s" in stderr_path.read_text(errors="replace")


def test_an_authenticated_client_idle_past_the_unauthenticated_bound_is_kept():
    """A client's shell sends one signed message, its control and stdin (the same identity, as
    jupyter_client's) send none; all idle. An unauthenticated peer on control, connected with
    them, is closed at the bound; the client's connections are not, and are served after."""
    with kernel_under_attack() as (km, kc, stderr_path):
        info = km.get_connection_info()
        session = session_of(info)
        context = zmq.Context()
        sockets = []
        try:
            client = {name: monitored(context, zmq.DEALER, info[f"{name}_port"], b"doors-client")
                      for name in ("shell", "control", "stdin")}
            stranger, stranger_monitor = monitored(context, zmq.DEALER, info["control_port"])
            sockets = [s for pair in client.values() for s in pair] + [stranger, stranger_monitor]
            for _, monitor in client.values():
                wait_event(monitor, zmq.EVENT_HANDSHAKE_SUCCEEDED, TIMEOUT)
            wait_event(stranger_monitor, zmq.EVENT_HANDSHAKE_SUCCEEDED, TIMEOUT)
            assert signed_round(session, client["shell"][0])["msg_type"] == "kernel_info_reply"
            start = time.monotonic()
            wait_event(stranger_monitor, zmq.EVENT_DISCONNECTED, 3 * UNAUTHENTICATED_BOUND)
            assert time.monotonic() - start >= UNAUTHENTICATED_BOUND - 5
            for name, (_, monitor) in client.items():
                assert next_event(monitor, 0) is None, f"the client's {name} was disconnected"
            assert signed_round(session, client["control"][0])["msg_type"] == "kernel_info_reply"
            assert signed_round(session, client["shell"][0])["msg_type"] == "kernel_info_reply"
        finally:
            for sock in sockets:
                sock.close()
            context.term()
        assert "no message for 30 s" in stderr_path.read_text(errors="replace")


def test_a_message_the_kernel_refuses_closes_an_unauthenticated_connection():
    """An unsigned message, and one the kernel signed itself (read on IOPub, sent back on
    shell): each drops its connection at once (long before the idle bound), and the reflected
    one is not served. Control: the client's connection, authenticated, sends a bad message and
    is kept."""
    with kernel_under_attack() as (km, kc, stderr_path):
        info = km.get_connection_info()
        session = session_of(info)
        context = zmq.Context()
        sockets = []
        try:
            subscriber = context.socket(zmq.SUB)
            subscriber.setsockopt(zmq.SUBSCRIBE, b"")
            subscriber.connect(f"tcp://127.0.0.1:{info['iopub_port']}")
            sockets.append(subscriber)
            # The subscription is in once a message published after it arrives.
            while not subscriber.poll(100):
                kc.kernel_info()
            reflected = subscriber.recv_multipart()[1:]  # without the topic
            unsigned = [b"<IDS|MSG>", b"", b'{"msg_id": "x", "msg_type": "kernel_info_request", '
                        b'"session": "s"}', b"{}", b"{}", b"{}"]
            for frames in (unsigned, reflected):
                peer, monitor = monitored(context, zmq.DEALER, info["shell_port"])
                sockets += [peer, monitor]
                wait_event(monitor, zmq.EVENT_HANDSHAKE_SUCCEEDED, TIMEOUT)
                start = time.monotonic()
                peer.send_multipart(frames)
                wait_event(monitor, zmq.EVENT_DISCONNECTED, TIMEOUT)
                assert time.monotonic() - start < UNAUTHENTICATED_BOUND - 10
                assert not peer.poll(0), "the kernel answered it"
            client, client_monitor = monitored(context, zmq.DEALER, info["shell_port"], b"kept")
            sockets += [client, client_monitor]
            assert signed_round(session, client)["msg_type"] == "kernel_info_reply"
            client.send_multipart(unsigned)
            assert signed_round(session, client)["msg_type"] == "kernel_info_reply"
            wait_event(client_monitor, zmq.EVENT_HANDSHAKE_SUCCEEDED, TIMEOUT)
            assert next_event(client_monitor, 0) is None, "the authenticated client was dropped"
        finally:
            for sock in sockets:
                sock.close()
            context.term()
        log = stderr_path.read_text(errors="replace")
        assert "the kernel's own message, sent back" in log, log[-2000:]
        assert "it sent a message the kernel refused" in log, log[-2000:]


def test_one_address_holds_at_most_32_unauthenticated_connections_on_each_door():
    """On each door of the connection file, 33 peers from one address finish the handshake:
    the oldest is closed for the newest, the others kept. Before, all were kept."""
    with kernel_under_attack() as (km, kc, stderr_path):
        info = km.get_connection_info()
        for index, (port, socket_type) in enumerate(DOORS.items()):
            source = f"127.0.1.{index + 1}"
            peers = [handshaken(info[port], socket_type, source=source)
                     for _ in range(PER_ADDRESS + 1)]
            try:
                assert all(peers), (port, peers)
                wait_closed(peers[0], TIMEOUT)
                assert all(still_open(peer) for peer in peers[1:]), port
            finally:
                for peer in peers:
                    peer.close()
        assert kernel_info(kc)["status"] == "ok"
        assert "per address and door" in stderr_path.read_text(errors="replace")


def test_an_identity_is_held_by_one_connection_per_door_and_read_as_libzmq_reads_it():
    """The gate names connections by identity, so none may be ambiguous: a second connection
    declaring a held identity on the same door, a READY declaring two (libzmq takes the last),
    and one of the kind the gate gives peers without one are each closed at once. Control: the
    same identity on another door is served (a client's shell and stdin share one)."""
    with kernel_under_attack() as (km, kc, stderr_path):
        info = km.get_connection_info()
        session = session_of(info)
        context = zmq.Context()
        holder, monitor = monitored(context, zmq.DEALER, info["shell_port"], b"held")
        probes = []
        try:
            assert signed_round(session, holder)["msg_type"] == "kernel_info_reply"
            for identities in ([b"held"], [b"other", b"held"], [b"\0belljar-gate-1"]):
                peer = connect_from(info["shell_port"])
                probes.append(peer)
                peer.sendall(GREETING + ready(b"DEALER", *identities))
                wait_closed(peer, UNAUTHENTICATED_BOUND - 10)
            same_on_stdin = handshaken(info["stdin_port"], b"DEALER", identities=[b"held"])
            probes.append(same_on_stdin)
            assert same_on_stdin and still_open(same_on_stdin)
            assert signed_round(session, holder)["msg_type"] == "kernel_info_reply"
            wait_event(monitor, zmq.EVENT_HANDSHAKE_SUCCEEDED, TIMEOUT)
            assert next_event(monitor, 0) is None, "the holder was dropped"
        finally:
            for peer in probes:
                if peer:
                    peer.close()
            holder.close()
            monitor.close()
            context.term()
        log = stderr_path.read_text(errors="replace")
        for why in ("an identity another connection holds", "naming its identity twice",
                    "of the kind the gate gives"):
            assert why in log, (why, log[-2000:])
