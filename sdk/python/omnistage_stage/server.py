"""The program's side of a connection: run takes the process's standard
input and output, says hello, then reads the runtime's messages on one
thread and runs each job on a thread of its own."""

import inspect
import os
import sys
import threading
import time
import traceback

from .chunks import decode, dumps
from .errors import Cancelled, InputError, ParamError, ProtocolError
from .job import Job, Refused
from .stage import call_warm, hello, overrides
from .wire import Reader, Writer

# SHUTDOWN_GRACE bounds the wait for running jobs to return once they are
# cancelled by a shutdown (or the end of the input), so that the program
# exits 0 before the runtime's stop_timeout (10 s by default).
SHUTDOWN_GRACE = 5.0

# EXIT_PROTOCOL is the exit status of a program whose runtime broke the
# protocol (a malformed message).
EXIT_PROTOCOL = 2


def run(stage):
    """Serves stage over standard input and output until the runtime asks
    it to shut down or closes standard input, then exits the process:
    status 0, or EXIT_PROTOCOL after a malformed message.

    From the call on, standard output belongs to the protocol: file
    descriptor 1 and sys.stdout go to standard error, so that print (and
    a library writing to descriptor 1) cannot break it, and standard
    input reads /dev/null."""
    msg = hello(stage)
    in_fd, out_fd = _take_stdio()
    with open(in_fd, "rb", buffering=1 << 16) as rfile:
        code = Server(stage, msg, rfile, out_fd).serve()
    sys.stderr.flush()
    sys.exit(code)


def _take_stdio():
    """Moves the protocol's standard input and output to descriptors of
    their own, and returns them (input, output)."""
    for f in (sys.stdout, sys.__stdout__):
        try:
            f.flush()
        except (AttributeError, ValueError, OSError):
            pass
    out_fd, in_fd = os.dup(1), os.dup(0)  # not inherited by child processes
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout = sys.stderr
    return in_fd, out_fd


def log(text):
    """Writes text to standard error, as one write."""
    try:
        sys.stderr.write(text if text.endswith("\n") else text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


class Server:
    """One connection: stage, served on rfile (a binary file with
    readline) and the file descriptor wfd."""

    def __init__(self, stage, hello_msg, rfile, wfd):
        self.stage = stage
        self.hello = hello_msg
        self.reader = Reader(rfile)
        self.w = Writer(wfd)
        self.checks = overrides(stage, "check_params")
        self.lock = threading.Lock()
        self.jobs = {}  # job number -> Job, until its end is decided; under lock
        self.threads = {}  # job number -> its thread, until it has written the end; under lock

    def serve(self):
        """Serves until shutdown or the end of input, and returns the exit
        status."""
        try:
            self.w.write(dumps(self.hello) + b"\n")
            self.loop()
        except ProtocolError as e:
            log("omnistage_stage: the runtime broke the stage protocol: %s; exiting" % e)
            return EXIT_PROTOCOL
        except OSError as e:
            log("omnistage_stage: writing to the runtime: %s; exiting" % e)
            return 1
        self.stop_jobs()
        return 0

    def loop(self):
        """Reads and handles the runtime's messages until shutdown or the
        end of input."""
        read = self.reader.read
        jobs = self.jobs
        in_kind = self.stage.input
        while True:
            h, data = read()
            if h is None:
                return
            t = h["type"]
            if t == "input":
                j = jobs.get(h.get("job"))
                if j is None:
                    continue  # a job that has ended: the runtime sends no more
                if j._input_ended:
                    raise ProtocolError("input for job %d after its input_end" % j.id)
                if j._received - j._credited >= j._in_window:
                    raise ProtocolError("input for job %d beyond the credit the program gave" % j.id)
                j._received += 1
                try:
                    chunk = decode(h, data)
                except ProtocolError as e:
                    raise ProtocolError("job %d: %s" % (j.id, e)) from None
                if chunk.kind != in_kind:
                    chunk = Refused("a %s chunk, but the stage takes %s" % (chunk.kind, in_kind))
                j._inq.put(chunk)
            elif t == "credit":
                n = h.get("chunks")
                if type(n) is not int or n <= 0:
                    raise ProtocolError("credit of %r chunks for job %r" % (n, h.get("job")))
                j = jobs.get(h.get("job"))
                if j is not None:
                    j._give_credit(n)
            elif t == "input_end":
                j = jobs.get(h.get("job"))
                if j is not None and not j._input_ended:
                    j._end_input()
            elif t == "job":
                self.start(h)
            elif t == "cancel":
                self.cancel(h.get("job"))
            elif t == "check":
                self.check(h)
            elif t == "warm":
                self.warm(h)
            elif t == "shutdown":
                return
            # Another type is one a later version of the protocol adds.

    def warm(self, h):
        config = h.get("config")
        try:
            call_warm(self.stage, config if config is not None else {})
        except Exception as e:
            log("omnistage_stage: warm failed:\n" + traceback.format_exc())
            self.w.write(dumps({"type": "error", "message": _message(e)}) + b"\n")
            return
        self.w.write(b'{"type":"ready"}\n')

    def check(self, h):
        msg = {"type": "checked", "id": h.get("id", 0)}
        fault = self.fault(h.get("params"))
        if fault is not None:
            msg["error"] = {"field": fault.field, "reason": fault.reason}
        self.w.write(dumps(msg) + b"\n")

    def fault(self, params):
        """Returns the ParamError of params (a request's, decoded), or None
        when the stage takes them."""
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return ParamError("", "want an object of params")
        if not self.checks:
            return None
        try:
            self.stage.check_params(params)
        except ParamError as e:
            return e
        except Exception as e:
            log("omnistage_stage: check_params failed:\n" + traceback.format_exc())
            return ParamError("", _message(e))
        return None

    def start(self, h):
        jid = h.get("job")
        if type(jid) is not int:
            raise ProtocolError("a job message with job %r; want the job's number" % (jid,))
        j = Job(self.w, h, self.stage.window, self.stage.output)
        t = threading.Thread(target=self.run_job, args=(j,), name="omnistage-job-%d" % jid, daemon=True)
        with self.lock:
            if jid in self.jobs or jid in self.threads:
                raise ProtocolError("job %d started while it runs" % jid)
            self.jobs[jid] = j
            self.threads[jid] = t
        t.start()

    def run_job(self, j):
        """Runs j (on its own thread) and sends how it ended."""
        err = None
        try:
            if not isinstance(j.params, dict):
                raise ParamError("", "want an object of params")
            if self.checks:
                self.stage.check_params(j.params)
            result = self.stage.process(j)
            if inspect.isgenerator(result):
                raise TypeError("process returned a generator: send the output with job.send")
        except BaseException as e:  # a job's failure is the job's alone
            err = e
        with self.lock:
            del self.jobs[j.id]
            cancelled, shut = j._cancel_requested, j._shut_down
        try:
            self.w.write(self.end_of(j, err, cancelled, shut))
        except OSError:
            pass  # the runtime is gone; the reader sees the end of its input
        finally:
            with self.lock:
                del self.threads[j.id]

    def end_of(self, j, err, cancelled, shut):
        """Returns the message that ends j: cancelled, done or its error."""
        if cancelled:
            return b'{"type":"cancelled","job":%d}\n' % j.id
        msg = {"type": "error", "job": j.id}
        if shut:
            msg.update(code="failed", message="the stage program is shutting down")
        elif err is None:
            return b'{"type":"done","job":%d}\n' % j.id
        elif isinstance(err, ParamError):
            msg.update(code="bad_params", field=err.field, message=err.reason)
        elif isinstance(err, InputError):
            msg.update(code="bad_input", message=err.reason)
        else:
            if isinstance(err, Cancelled):
                err = RuntimeError("job.send raised Cancelled, but the runtime did not cancel the job")
            msg.update(code="failed", message=_message(err))
            tb = err.__traceback__
            tb = tb.tb_next or tb  # from the stage's code on: run_job's frame says nothing
            log("omnistage_stage: job %d (request %s) failed:\n%s"
                % (j.id, j.request_id, "".join(traceback.format_exception(type(err), err, tb))))
        return dumps(msg) + b"\n"

    def cancel(self, jid):
        with self.lock:
            j = self.jobs.get(jid)
            if j is None:
                return  # it has ended: its end crossed the cancel
            j._cancel_requested = True
        j._stop()

    def stop_jobs(self):
        """Stops the running jobs, as a cancel does, and waits for them to
        return, for at most SHUTDOWN_GRACE."""
        with self.lock:
            jobs = list(self.jobs.values())
            for j in jobs:
                j._shut_down = True
            threads = list(self.threads.values())
        for j in jobs:
            j._stop()
        deadline = time.monotonic() + SHUTDOWN_GRACE
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        if any(t.is_alive() for t in threads):
            log("omnistage_stage: jobs still running %.0f s after shutdown; exiting without them" % SHUTDOWN_GRACE)


def _message(err):
    return str(err) or type(err).__name__
