"""The program's side of a connection: run takes the process's standard
input and output, says hello, then reads the runtime's messages on one
thread and runs the jobs on threads of their own, up to max_jobs at once
(a thread, once started, runs one job after another: starting one costs
more than a request should)."""

import inspect
import os
import sys
import threading
import time
import traceback
from queue import SimpleQueue

from . import chunks
from .chunks import dumps
from .errors import InputError, ParamError, ProtocolError
from .job import Job, message_of
from .stage import call_warm, hello, overrides
from .wire import Reader, Writer

# SHUTDOWN_GRACE bounds the wait for running jobs to return once they are
# cancelled by a shutdown (or the end of the input), so that the program
# exits 0 before the runtime's stop_timeout (10 s by default).
SHUTDOWN_GRACE = 5.0

# EXIT_PROTOCOL is the exit status of a program whose runtime broke the
# protocol (a malformed message).
EXIT_PROTOCOL = 2

# SWITCH_INTERVAL is how long a thread may hold the GIL while another waits
# for it (sys.setswitchinterval; CPython's default is 5 ms). The reader
# thread, taking in a burst of input, would otherwise keep a job that has
# its first chunk from sending it for up to that long, and a job busy in
# Python code would keep the reader from the runtime's messages.
SWITCH_INTERVAL = 0.0005


def run(stage):
    """Serves stage over standard input and output until the runtime asks
    it to shut down or closes standard input, then calls stage.close and
    exits the process: status 0, or EXIT_PROTOCOL after a malformed
    message.

    From the call on, standard output belongs to the protocol: file
    descriptor 1 and sys.stdout go to standard error, so that print (and
    a library writing to descriptor 1) cannot break it, and standard
    input reads /dev/null."""
    msg = hello(stage)
    sys.setswitchinterval(SWITCH_INTERVAL)
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
        self.ready = False  # warm succeeded: close is due at the end
        self.lock = threading.Lock()
        self.jobs = {}  # job number -> Job, until it has ended; under lock
        self.open = set()  # the job numbers whose end is not yet written; under lock
        self.queue = SimpleQueue()  # the jobs to run, for the workers; None stops one
        self.workers = []  # the job threads, at most max_jobs; under lock
        self.idle = 0  # workers waiting for a job no one has been queued for; under lock

    def serve(self):
        """Serves until shutdown or the end of input, and returns the exit
        status. A runtime that broke the protocol, or whose end of the
        connection is gone, gets no more: the program exits at once."""
        try:
            self.w.write(dumps(self.hello) + b"\n")
            self.loop()
        except ProtocolError as e:
            log("omnistage_stage: the runtime broke the stage protocol: %s; exiting" % e)
            return EXIT_PROTOCOL
        except OSError as e:
            log("omnistage_stage: writing to the runtime: %s; exiting" % e)
            return 1
        if self.stop_jobs():
            self.close_stage()
        return 0

    def loop(self):
        """Reads and handles the runtime's messages until shutdown or the
        end of input."""
        read = self.reader.read
        jobs = self.jobs
        while True:
            h, data = read()
            if h is None:
                return
            t = h["type"]
            if t == "input":
                j = jobs.get(h.get("job"))
                if j is not None:  # else a job that has ended: the runtime sends no more
                    j._on_input(h, data)
            elif t == "credit":
                n = h.get("chunks")
                if type(n) is not int or n <= 0:
                    raise ProtocolError("credit of %r chunks for job %r" % (n, h.get("job")))
                j = jobs.get(h.get("job"))
                if j is not None:
                    j._on_credit(n)
            elif t == "input_end":
                j = jobs.get(h.get("job"))
                if j is not None:
                    j._on_input_end()
            elif t == "job":
                self.start(h)
            elif t == "batch":
                self.start_batch(h, data)
            elif t == "cancel":
                j = jobs.get(h.get("job"))
                if j is not None:  # else it has ended: its end crossed the cancel
                    j._on_cancel()
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
            self.w.write(dumps({"type": "error", "message": message_of(e)}) + b"\n")
            return
        self.ready = True
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
            return ParamError("", message_of(e))
        return None

    def start(self, h):
        if type(h.get("job")) is not int:
            raise ProtocolError("a job message with job %r; want the job's number" % (h.get("job"),))
        self.register([Job(self.w, h, self.stage.window, self.stage.input, self.stage.output)], None)

    def start_batch(self, h, data):
        entries = h.get("jobs")
        if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
            raise ProtocolError("a batch message with jobs %r; want a list of jobs" % (entries,))
        window, at, jobs = h.get("window"), 0, []
        for e in entries:
            if type(e.get("job")) is not int:
                raise ProtocolError("a batch message with job %r; want the job's number" % (e.get("job"),))
            n = e.get("data_length") or 0
            if type(n) is not int or n < 0 or n > len(data) - at:
                raise ProtocolError("batch: job %r announces %r bytes of data, of %d left" % (e.get("job"), n, len(data) - at))
            try:
                chunk = chunks.decode(e, data[at:at + n])
            except ProtocolError as err:
                raise ProtocolError("job %r: %s" % (e.get("job"), err)) from None
            at += n
            jobs.append(Job(self.w, dict(e, window=window), 1, self.stage.input, self.stage.output, chunk))
        if at != len(data):
            raise ProtocolError("batch: the jobs announce %d bytes of data, but the message has %d" % (at, len(data)))
        self.register(jobs, jobs)

    def register(self, jobs, work):
        """Registers jobs and queues work for a worker: the batch (a list of
        jobs), or, when work is None, the lone job."""
        with self.lock:
            for j in jobs:
                if j.id in self.open:
                    raise ProtocolError("job %d started while it runs" % j.id)
                self.jobs[j.id] = j
                self.open.add(j.id)
            spawn = self.idle == 0 and len(self.workers) < self.stage.max_jobs
            if not spawn and self.idle > 0:
                self.idle -= 1  # that worker's: it takes this work
            if spawn:
                t = threading.Thread(target=self.work, name="omnistage-job-%d" % jobs[0].id, daemon=True)
                self.workers.append(t)
        self.queue.put(jobs[0] if work is None else work)
        if spawn:
            t.start()

    def work(self):
        """Runs jobs, one after another, until it gets None."""
        me = threading.current_thread()
        while True:
            j = self.queue.get()
            if j is None:
                return
            if type(j) is list:
                me.name = "omnistage-batch-%d" % j[0].id
                self.run_batch(j)
            else:
                me.name = "omnistage-job-%d" % j.id
                self.run_job(j)

    def run_job(self, j):
        """Runs j and sends how it ended."""
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
        self.end(j, err, last=True)

    def run_batch(self, jobs):
        """Runs a batch's jobs in one process_batch call, those its params
        or input do not fail first, and sends how each ended."""
        errs, ready = {}, []
        for j in jobs:
            try:
                if j._refused is not None:
                    raise InputError(j._refused.reason)
                if not isinstance(j.params, dict):
                    raise ParamError("", "want an object of params")
                if self.checks:
                    self.stage.check_params(j.params)
                ready.append(j)
            except BaseException as e:
                errs[j.id] = e
        if ready:
            try:
                results = self.stage.process_batch(ready)
                if results is None:
                    results = [None] * len(ready)
                elif not isinstance(results, (list, tuple)) or len(results) != len(ready):
                    raise TypeError("process_batch returned %s: return None, or a list of one entry per job (None, or the exception that failed it)"
                                    % _short(results))
            except BaseException as e:  # the call's failure is every job's
                results = [e] * len(ready)
            for j, r in zip(ready, results):
                if r is not None and not isinstance(r, BaseException):
                    r = TypeError("process_batch returned %s for job %d: want None or an exception" % (_short(r), j.id))
                errs[j.id] = r
        for i, j in enumerate(jobs):
            self.end(j, errs.get(j.id), last=i == len(jobs) - 1)

    def end(self, j, err, last=False):
        """Ends j, which ran to err (None: done), and sends how. With last,
        j was its worker's last job of the work it took: the worker is idle
        before the runtime hears of the end, so that the runtime's next job
        finds it so."""
        end = j._end(err, log)
        with self.lock:
            del self.jobs[j.id]
            if last:
                self.idle += 1
        try:
            self.w.write(end)
        except OSError:
            pass  # the runtime is gone; the reader sees the end of its input
        finally:
            with self.lock:
                self.open.discard(j.id)

    def stop_jobs(self):
        """Stops the running jobs, as a cancel does, and waits for them to
        return, for at most SHUTDOWN_GRACE; reports whether they all
        did."""
        with self.lock:
            jobs = list(self.jobs.values())
            threads = list(self.workers)
        for j in jobs:
            j._on_shutdown()
        for _ in threads:
            self.queue.put(None)
        deadline = time.monotonic() + SHUTDOWN_GRACE
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        if any(t.is_alive() for t in threads):
            log("omnistage_stage: jobs still running %.0f s after shutdown; exiting without them (and without close)"
                % SHUTDOWN_GRACE)
            return False
        return True

    def close_stage(self):
        """Calls the stage's close, once warm has succeeded; a failure is
        logged."""
        if not self.ready:
            return
        try:
            self.stage.close()
        except Exception:
            log("omnistage_stage: close failed:\n" + traceback.format_exc())


def _short(v):
    r = repr(v)
    return r if len(r) <= 80 else r[:77] + "..."
