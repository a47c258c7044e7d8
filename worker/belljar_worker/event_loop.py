"""The session's asyncio event loop: the loop `asyncio.get_event_loop()` gives a cell, the loop
top-level await runs on, and the loop the worker runs while it waits for the next request, so
tasks a cell started (a counter, a progress bar, a widget driven by async code) go on between
cells, as under ipykernel, whose own loop runs while it is idle.

Made when something first imports asyncio (a cell, IPython, ipywidgets): a session that never
does pays nothing, and the worker's idle wait stays a plain read of fd 3.

Between requests the loop runs with fd 3 as one of its readers: a frame arriving stops it after
the iteration in progress, so a busy task delays the next request by one iteration at most. A
task that never awaits holds the worker as a cell that never ends would; the supervisor then
interrupts for the request waiting behind it (the user's interrupt, or its limit), and only
then does KeyboardInterrupt land in that task (LoopWatch). Nothing raised there leaves this
module: the session goes on.
"""
import _thread
import sys
import time

# How long the loop has to come back to its selector after an interrupt before the interrupt
# is raised in the code that holds it: far longer than a healthy callback, well inside the 2 s
# the supervisor waits before it kills a worker that ignores an interrupt.
STUCK_AFTER = 0.2

_loop = None  # the session's loop, once asyncio was imported in the main thread


def asyncio_imported(asyncio):
    """The post-import hook: the loop is made and set at once, so the cell that imported asyncio
    already gets it from get_event_loop() (3.12 would otherwise make one with a warning, 3.14
    raise). In another thread, set_event_loop would be that thread's: the main thread makes it
    at the next request boundary instead."""
    import threading
    if threading.current_thread() is threading.main_thread():
        session_loop()


def session_loop():
    """The loop cells use now, set as the main thread's current loop: the session's own, made
    again if it was closed, or the one code set in its place (top-level await then runs where
    get_event_loop() points). asyncio.run() leaves no current loop: the session's is set back."""
    import asyncio
    global _loop
    current = _current_loop(asyncio) if _loop is not None else None
    if current is not None and not current.is_closed():
        _loop = current
    elif _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
    if current is not _loop:
        asyncio.set_event_loop(_loop)
    return _loop


def has_tasks():
    """Whether tasks on the session's loop are still to finish (they outlive the request
    that made them); False while asyncio was never imported."""
    if _loop is None or _loop.is_closed():
        return False
    import asyncio
    return bool(asyncio.all_tasks(_loop))


def _current_loop(asyncio):
    """The main thread's current loop without making one (a loop was set before, so the policy
    never makes one here); None when none is set."""
    try:
        return asyncio.get_event_loop_policy().get_event_loop()
    except Exception:  # RuntimeError: none set; a DeprecationWarning the user made an error
        return None


def run_until_readable(fd, gate):
    """Between requests: run the session's loop until fd has something to read.

    Returns at once when the loop can't run here (closed, running in a thread of the user's)."""
    loop = session_loop()
    if loop.is_running():
        return
    arrived = []

    def frame_arrived():
        arrived.append(True)
        loop.stop()

    try:
        loop.add_reader(fd, frame_arrived)
    except Exception:  # a loop that watches no descriptors (not selector-based): not run
        return
    watch = LoopWatch(loop)
    try:
        while not arrived and not loop.is_closed() and not loop.is_running():
            try:
                _run_as_user_code(loop, gate, watch)
            except KeyboardInterrupt:
                watch.reset()  # it ended what held the loop: the frame is read at the next turn
                continue
            except BaseException as exc:  # SystemExit from a task, a broken exception handler
                _report(exc)
                return
    finally:
        watch.stop()
        try:
            loop.remove_reader(fd)
        except Exception:
            pass


def run_cell(loop, task):
    """A cell's top-level await: the loop runs until the cell's task is done. Meanwhile fd 3
    is one of its readers, so a comm message from the frontend (a widget's answer the cell
    awaits) reaches its handler at the loop's next turn, as under ipykernel 7; never inside the
    cell's sync code, which the loop does not interrupt. Other frames are kept for after the
    cell, in order; a comm frame of this cell's still unserved when it ends is dropped by the
    session, and the supervisor sends it again as a request of its own (worker/PROTOCOL.md,
    "Comms during a cell")."""
    from . import current
    session = current.session
    channel = getattr(session, "channel", None)
    cell_id = getattr(getattr(session, "_execute_ctx", None), "id", None)
    if channel is None or cell_id is None or loop.is_running():
        return loop.run_until_complete(task)
    serving = [True]

    def serve():
        if serving[0]:  # a call left in the loop's queue after the cell does nothing
            session.serve_comms_during_cell(cell_id)

    def arrived():
        channel.read_arrived()
        serve()

    try:
        loop.add_reader(channel.fd, arrived)
        watching = True
    except Exception:  # not selector-based: comms read in the cell's waits are still served
        watching = False
    channel.comm_waiting = lambda: loop.call_soon(serve)
    if channel.holds_comm(cell_id):
        loop.call_soon(serve)
    try:
        return loop.run_until_complete(task)
    finally:
        serving[0] = False
        channel.comm_waiting = None
        if watching:
            try:
                loop.remove_reader(channel.fd)
            except Exception:
                pass


def _run_as_user_code(loop, gate, watch):
    gate.between_requests = watch
    gate.enter_user_code()
    try:
        loop.run_forever()
    finally:
        gate.leave_user_code()
        gate.between_requests = None


class LoopWatch:
    """What an interrupt does while the loop runs between requests.

    The supervisor interrupts only for a request, the one waiting behind the loop. A loop that
    still turns reads it at its next turn: KeyboardInterrupt there would only kill whichever
    healthy task happened to be running. So the first interrupt sends the loop a probe (a
    callback); if the probe is still unanswered STUCK_AFTER later, the loop is held (a task
    that never awaits), and the interrupt comes again and lands in the code holding it."""

    def __init__(self, loop):
        self.loop = loop
        self.running = True
        self._probe_sent = None  # monotonic time of the unanswered probe, if one is out
        # Held while the watch decides to interrupt and does, and while the loop stops: an
        # interrupt it sends reaches the main thread before the worker leaves the loop, never
        # in the request that stopped it (checked, then sent late, it once ended the next cell).
        self._lock = _thread.allocate_lock()

    def stop(self):
        """The loop is over: no interrupt comes from this watch from now on."""
        with self._lock:
            self.running = False

    def interrupt_lands(self):
        """From the SIGINT handler: True when KeyboardInterrupt is to be raised now."""
        sent = self._probe_sent
        if sent is not None:
            return time.monotonic() - sent >= STUCK_AFTER
        try:
            self.loop.call_soon_threadsafe(self.reset)  # signal-safe: asyncio's own way
        except Exception:  # closed meanwhile: nothing is held
            return False
        sent = self._probe_sent = time.monotonic()
        try:
            _thread.start_new_thread(self._interrupt_if_held, (sent,))
        except Exception:  # no thread left under --pids: nothing would come back, so land now
            self._probe_sent = None
            return True
        return False

    def reset(self):
        """The loop answered the probe, or an interrupt landed: the next interrupt starts with a
        probe of its own."""
        self._probe_sent = None

    def _interrupt_if_held(self, sent):
        try:
            import _signal
            _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGINT})  # for the main thread
            time.sleep(STUCK_AFTER)
            import threading
            with self._lock:
                if self.running and self._probe_sent == sent:
                    _signal.pthread_kill(threading.main_thread().ident, _signal.SIGINT)
        except Exception:
            pass


def _report(exc):
    """Code running between cells raised past the loop: its traceback on stderr (the last cell's
    output), and the session goes on."""
    try:
        import traceback
        sys.stderr.write("[belljar] code running between cells raised %s; the session goes on\n"
                         % type(exc).__name__)
        traceback.print_exception(type(exc), exc, exc.__traceback__)
    except Exception:
        pass
