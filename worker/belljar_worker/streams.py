"""sys.stdout / sys.stderr of the worker: buffered writers straight onto fd 1 and fd 2.

Writing to the real descriptors keeps print(), C extensions and subprocesses interleaved
the way a terminal shows them. The streams are block-buffered so that a loop printing
hundreds of thousands of lines stays fast; a small background thread flushes them every
50 ms so output of a long cell still reaches the supervisor promptly; between flushes it serves
the debug channel, when the session has one.
"""
import _thread
import contextlib
import io
import os
import sys
import time

FLUSH_INTERVAL = 0.05


class _PipeWriter(io.RawIOBase):
    """fd 1 or fd 2 as a raw stream that counts what it wrote and first lets the supervisor
    read the last frame.

    Every frame carries the counts (`written`, see wire.py): the supervisor shows the text
    up to them before the frame and the rest after it. Bytes written to fd 1/2 without this
    writer (subprocesses, C code) are not counted; for them, before each write here,
    `before_write` waits until the last frame was read, so the supervisor, which reads the
    pipes before the frame socket, has them in hand when the frame arrives."""

    def __init__(self, fd, streams):
        super().__init__()
        self._fd = fd
        self._streams = streams
        self._index = fd - 1

    def writable(self):
        return True

    def fileno(self):
        return self._fd

    def write(self, data):
        before_write = self._streams.before_write
        if before_write is not None:
            before_write()
        n = os.write(self._fd, data)
        # Under the BufferedWriter's lock: one writer per descriptor counts at a time.
        self._streams.written[self._index] += n
        return n


def _open_fd_stream(fd, streams):
    raw = _PipeWriter(fd, streams)
    buffered = io.BufferedWriter(raw, buffer_size=1 << 16)
    return io.TextIOWrapper(buffered, encoding="utf-8", errors="backslashreplace",
                            newline=None, line_buffering=False, write_through=False)


class OutputStreams:
    def __init__(self):
        # The interpreter's own stdout/stderr objects own fd 1/2 (closefd=True): keep them
        # alive so their finalizers never close the descriptors under us.
        self._originals = (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)
        self.before_write = None
        self.between_flushes = None  # a wait(seconds) that does other work: debugger/__init__.py
        self.after_flush = None  # called by the flusher after each flush: interrupts.py
        self.written = [0, 0]  # bytes this worker's streams wrote to fd 1 and fd 2
        # A checkpoint's fork (checkpoints.py) starts no flusher: the holder waits, stopped.
        self.forking_quietly = False
        self._flushing = _thread.allocate_lock()  # held by the flusher while it flushes
        self.stdout = _open_fd_stream(1, self)
        self.stderr = _open_fd_stream(2, self)
        sys.stdout = sys.__stdout__ = self.stdout
        sys.stderr = sys.__stderr__ = self.stderr

    def flush_own(self):
        for stream in (self.stdout, self.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass  # a closed stream or a reader that went away: nothing to do

    def flush(self):
        self.flush_own()
        for stream in (sys.stdout, sys.stderr):
            if stream is not self.stdout and stream is not self.stderr:
                try:
                    stream.flush()  # the user's replacement, e.g. a wrapper around ours
                except Exception:
                    pass

    def sync_for_direct_output(self):
        """Before something writes to fd 1/2 directly (a subprocess): flush, and let the
        supervisor read the last frame first."""
        self.flush()
        if self.before_write is not None:
            self.before_write()

    def reopen_if_closed(self):
        """A cell that closed sys.stdout should not leave the session without output."""
        if self.stdout.closed:
            old, self.stdout = self.stdout, _open_fd_stream(1, self)
            if sys.stdout is old:
                sys.stdout = self.stdout
            sys.__stdout__ = self.stdout
        if self.stderr.closed:
            old, self.stderr = self.stderr, _open_fd_stream(2, self)
            if sys.stderr is old:
                sys.stderr = self.stderr
            sys.__stderr__ = self.stderr

    def start_flusher(self):
        _thread.start_new_thread(self._flush_periodically, ())
        # A forked child (multiprocessing) has no flusher thread: give it one.
        os.register_at_fork(after_in_child=self._restart_flusher_in_child)

    @contextlib.contextmanager
    def quiet_fork(self):
        """Around a checkpoint's fork: everything written is out and the flusher is not inside
        a buffer's lock (the child, with no flusher, could never take it again)."""
        self.flush()
        with self._flushing:
            self.forking_quietly = True
            try:
                yield
            finally:
                self.forking_quietly = False

    def restart_after_rollback(self):
        """In the worker a rollback made: the flusher again, serving what it served."""
        self.forking_quietly = False
        self._flushing = _thread.allocate_lock()
        _thread.start_new_thread(self._flush_periodically, ())

    def _restart_flusher_in_child(self):
        if self.forking_quietly:
            return
        self.between_flushes = None  # the debug channel is the parent's
        self.after_flush = None  # and its interrupts
        try:
            _thread.start_new_thread(self._flush_periodically, ())
        except Exception:
            pass

    def _flush_periodically(self):
        # SIGINT must reach the main thread: a signal the kernel delivers here would not
        # interrupt the main thread's blocking read (input(), a frame wait), so it would wait on.
        try:
            import _signal
            _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGINT})
        except (ImportError, AttributeError, OSError):
            pass
        while True:
            # The wait between flushes serves the debug channel when the session has one
            # (debugger/): one thread of belljar's own for both, not a second one, whose malloc
            # arena (64 MiB of address space) an --memory enforced as RLIMIT_AS would feel.
            try:
                (self.between_flushes or time.sleep)(FLUSH_INTERVAL)
            except Exception:
                # A cell closed fd 4, say: the debug channel is gone, the flushing goes on.
                self.between_flushes = None
            with self._flushing:
                self.flush_own()  # never the user's replacement streams: may not be thread-safe
            after = self.after_flush
            if after is not None:
                try:
                    after()
                except Exception:
                    pass
