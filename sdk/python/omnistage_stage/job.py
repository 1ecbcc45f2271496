"""One job: a request at this stage, as process sees it (its fields, its
input as it arrives, its output), and the job's side of the protocol,
which the server drives through the job's own methods."""

import threading
import traceback
from queue import SimpleQueue

from . import chunks
from .chunks import Audio, Regions
from .errors import Cancelled, InputError, ParamError, ProtocolError
from .wire import DEFAULT_WINDOW, MAX_DATA, MAX_HEADER, credit_batch

# What the reader puts on a job's input queue besides chunks.
_END = object()  # input_end came
_WAKE = object()  # the job was stopped: cancel or shutdown


class _Refused:
    """An input chunk the job cannot take (not of the stage's input kind):
    input() raises InputError(reason) in its place."""

    __slots__ = ("reason",)

    def __init__(self, reason):
        self.reason = reason


class Job:
    """A job: one request at this stage.

    request_id (for logs), stage_id, params (the request's sampling params
    for this stage: a dict, empty for the defaults) and prompt (the
    request's text) describe it; input() yields its input chunks and send
    sends its output. After a cancel, cancelled is true, input() ends and
    send raises Cancelled.

    input() is for one consumer at a time; send may be called from any
    thread.

    A job of a batch (process_batch) has one input chunk, chunk (also
    what input() yields), and may send at most its window of output
    chunks (8): the runtime takes them when the job ends. Once it is
    cancelled, send drops what it is given.

    The methods whose names start with _on are the SDK's side of the
    protocol, called by its reader thread; _end ends the job. The job's
    protocol state is theirs alone.
    """

    def __init__(self, writer, msg, in_window, in_kind, out_kind, chunk=None):
        self.id = msg.get("job", 0)
        self.request_id = msg.get("request_id", "")
        self.stage_id = msg.get("stage_id", 0)
        params = msg.get("params")
        self.params = {} if params is None else params
        self.prompt = msg.get("prompt", "")

        self._w = writer
        self._in_kind = in_kind
        self._out_kind = out_kind
        self._out_prefix = b'{"type":"output","job":%d,' % self.id
        self._credit_prefix = b'{"type":"credit","job":%d,"chunks":' % self.id

        # Input: the reader puts chunks (within the credit given) and
        # sentinels; the consumer takes them.
        self._inq = SimpleQueue()
        self._in_window = in_window
        self._batch = credit_batch(in_window)
        self._received = 0  # input chunks received; the reader's
        self._credited = 0  # input credit given back; the consumer's
        self._owed = 0  # input chunks taken, not yet credited; the consumer's
        self._input_ended = False  # input_end came; the reader's
        self._input_done = False  # input() has ended; the consumer's

        # Output: the runtime's credit, and why the job stopped.
        out_window = msg.get("window")
        self._cond = threading.Condition(threading.Lock())
        self._credit = out_window if type(out_window) is int and out_window > 0 else DEFAULT_WINDOW
        self._window = self._credit
        self._stopped = False  # cancelled or shut down; under _cond

        # How the job ends: a cancel or the shutdown may cross its end.
        self._end_lock = threading.Lock()
        self._ended = False  # _end has run; under _end_lock
        self._cancel_requested = False  # the runtime sent cancel; under _end_lock
        self._shut_down = False  # the stage is shutting down; under _end_lock

        # A job of a batch: its one input chunk, or why it is refused.
        self.chunk = None
        self._refused = None
        self._batched = chunk is not None
        if self._batched:
            self._input_ended = True
            if chunk.kind != in_kind:
                chunk = _Refused("a %s chunk, but the stage takes %s" % (chunk.kind, in_kind))
            self._refused = chunk if type(chunk) is _Refused else None
            self.chunk = None if self._refused else chunk

    @property
    def cancelled(self):
        """True once the runtime cancelled the job, or the stage shuts down."""
        return self._stopped

    def input(self):
        """Yields the job's input chunks as they arrive, until the runtime
        ends the input or cancels the job. It gives credit back as the
        chunks are taken, so the runtime sends at most the stage's window
        of chunks ahead. A chunk not of the stage's input kind raises
        InputError (the runtime sends none, but a test may)."""
        if self._batched:
            if not self._input_done:
                self._input_done = True
                if self._refused is not None:
                    raise InputError(self._refused.reason)
                yield self.chunk
            return
        get = self._inq.get
        while not self._input_done:
            item = get()
            if self._stopped or item is _END:
                self._input_done = True
                return
            if item is _WAKE:
                continue
            if type(item) is _Refused:
                self._input_done = True
                raise InputError(item.reason)
            self._owed += 1
            if self._owed >= self._batch:
                owed, self._owed = self._owed, 0
                self._credited += owed  # before the write: the reader checks against it
                self._w.write(self._credit_prefix + b"%d}\n" % owed)
            yield item

    def send(self, chunk):
        """Sends chunk as the job's output. It waits while the job has no
        output credit (the next stage is behind), and raises Cancelled once
        the job is cancelled; a chunk the runtime would refuse (not of the
        stage's output kind, or not valid) is a ValueError or TypeError."""
        header, data, n = self._message(chunk)
        if len(header) > MAX_HEADER or n > MAX_DATA:
            if type(chunk) is Regions and len(chunk.regions) > 1:
                half = len(chunk.regions) // 2
                self.send(Regions(chunk.width, chunk.height, chunk.regions[:half]))
                self.send(Regions(chunk.width, chunk.height, chunk.regions[half:]))
                return
            if len(header) > MAX_HEADER:
                raise ValueError("job.send: a %d-byte header; the limit is %d" % (len(header), MAX_HEADER))
            raise ValueError("job.send: %d bytes in one chunk; the limit is %d" % (n, MAX_DATA))
        with self._cond:
            while self._credit <= 0 and not self._stopped and not self._batched:
                self._cond.wait()
            if self._stopped:
                if self._batched:
                    return  # the runtime drops it
                raise Cancelled("job %d is cancelled" % self.id)
            if self._credit <= 0:
                raise ValueError("job.send: a job of a batch sends at most %d output chunks" % self._window)
            self._credit -= 1
        self._w.write(header, data)

    def _message(self, chunk):
        """Returns the output message of chunk: its header line, its data
        and the data's length."""
        if type(chunk) is Audio and self._out_kind == "audio":
            fields, data = chunks.encode_audio(chunk)
            header = self._out_prefix + b'"kind":"audio","sample_rate":%d' % fields["sample_rate"]
            if chunk.end_of_sentence:
                header += b',"end_of_sentence":true'
        else:
            fields, data = chunks.encode(chunk)
            if fields["kind"] != self._out_kind:
                raise ValueError("job.send: a %s chunk, but the stage's output is %s" % (fields["kind"], self._out_kind))
            header = self._out_prefix + chunks.dumps(fields)[1:-1]
        n = chunks.nbytes(data)
        if n:
            header += b',"data_length":%d}\n' % n
        else:
            header += b"}\n"
        return header, data, n

    # The reader's side.

    def _on_input(self, h, data):
        """Takes an input message of the job: its chunk goes to input(). A
        message past the input's end or the credit given breaks the
        protocol."""
        if self._batched:
            raise ProtocolError("input for job %d, of a batch" % self.id)
        if self._input_ended:
            raise ProtocolError("input for job %d after its input_end" % self.id)
        if self._received - self._credited >= self._in_window:
            raise ProtocolError("input for job %d beyond the credit the program gave" % self.id)
        self._received += 1
        try:
            chunk = chunks.decode(h, data)
        except ProtocolError as e:
            raise ProtocolError("job %d: %s" % (self.id, e)) from None
        if chunk.kind != self._in_kind:
            chunk = _Refused("a %s chunk, but the stage takes %s" % (chunk.kind, self._in_kind))
        self._inq.put(chunk)

    def _on_input_end(self):
        """Takes the job's input_end: input() ends after the chunks before
        it."""
        if not self._input_ended:
            self._input_ended = True
            self._inq.put(_END)

    def _on_credit(self, n):
        """Takes n chunks of output credit."""
        with self._cond:
            self._credit += n
            self._cond.notify(n)

    def _on_cancel(self):
        """Takes the runtime's cancel: the job stops, and ends cancelled,
        unless it has ended already (its end crossed the cancel)."""
        with self._end_lock:
            if self._ended:
                return
            self._cancel_requested = True
        self._stop()

    def _on_shutdown(self):
        """Stops the job because the stage shuts down: it ends failed,
        unless it has ended already."""
        with self._end_lock:
            if self._ended:
                return
            self._shut_down = True
        self._stop()

    def _stop(self):
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._inq.put(_WAKE)

    def _end(self, err, log):
        """Ends the job, which process left with err (None: it returned),
        and returns the message that says so: cancelled, done or its error.
        A failure's traceback goes to log."""
        with self._end_lock:
            self._ended = True
            cancelled, shut = self._cancel_requested, self._shut_down
        if cancelled:
            return b'{"type":"cancelled","job":%d}\n' % self.id
        msg = {"type": "error", "job": self.id}
        if shut:
            msg.update(code="failed", message="the stage program is shutting down")
        elif err is None:
            return b'{"type":"done","job":%d}\n' % self.id
        elif isinstance(err, ParamError):
            msg.update(code="bad_params", field=err.field, message=err.reason)
        elif isinstance(err, InputError):
            msg.update(code="bad_input", message=err.reason)
        else:
            if isinstance(err, Cancelled):
                err = RuntimeError("job.send raised Cancelled, but the runtime did not cancel the job")
            msg.update(code="failed", message=message_of(err))
            tb = err.__traceback__
            if tb is not None and tb.tb_next is not None:
                tb = tb.tb_next  # from the stage's code on: the SDK's frame says nothing
            log("omnistage_stage: job %d (request %s) failed:\n%s"
                % (self.id, self.request_id, "".join(traceback.format_exception(type(err), err, tb))))
        return chunks.dumps(msg) + b"\n"

    def __repr__(self):
        return "Job(%d, request_id=%r)" % (self.id, self.request_id)


def message_of(err):
    """The message of an exception: its text, or its type's name."""
    return str(err) or type(err).__name__
