#!/usr/bin/env python3
"""A stage that echoes audio, scaled by its gain param: the smallest
program that speaks the omnistage stage protocol (docs/stage-protocol.md)
by hand, with nothing but Python's standard library.

One loop reads the runtime's messages and answers them; the jobs (up to
max_jobs at once) interleave on it, each one's output sent against the
runtime's credit, and the credit for its input given back as each chunk
is passed on. Nothing but protocol messages goes to standard output.

Deploy it as a stage with engine external and
command: ["python3", "examples/echo-raw/echo.py"]; check it with
omnistage stage check -- python3 examples/echo-raw/echo.py
"""

import array
import json
import sys

HELLO = {
    "type": "hello", "protocol": 1, "name": "echo",
    "input": "audio", "output": "audio", "max_jobs": 4, "window": 8,
    "params": {"gain": {"type": "number", "description": "a factor from 0 to 4 (default 1)"}},
}


class Job:
    """One job: its gain, the runtime's credit for its output, and the
    input chunks waiting for that credit."""

    def __init__(self, job_id, gain, credit):
        self.id = job_id
        self.gain = gain
        self.credit = credit
        self.pending = []
        self.input_ended = False


class Echo:
    """The stage: on_TYPE answers a message of TYPE."""

    hello = HELLO

    def __init__(self, stdin, stdout):
        self.stdin = stdin
        self.stdout = stdout
        self.jobs = {}

    def read(self):
        """Returns the next message's header and data; None at the end of
        standard input."""
        line = self.stdin.readline()
        if not line:
            return None, b""
        header = json.loads(line)
        n = header.get("data_length", 0)
        data = self.stdin.read(n) if n > 0 else b""
        if len(data) != n:
            raise EOFError("standard input ended inside a message")
        return header, data

    def write(self, header, data=b""):
        """Writes a message: its header on one line, then its data."""
        if data:
            header = dict(header, data_length=len(data))
        self.stdout.write(json.dumps(header, separators=(",", ":")).encode() + b"\n")
        self.stdout.write(data)
        self.stdout.flush()

    def serve(self):
        self.write(self.hello)
        while True:
            header, data = self.read()
            if header is None:
                return  # end of standard input: exit
            handler = getattr(self, "on_" + header["type"], None)
            if handler is not None and handler(header, data) is False:
                return  # shutdown
            # A type without a handler is ignored: a later version may add some.

    def on_warm(self, header, data):
        self.write({"type": "ready"})

    def on_shutdown(self, header, data):
        return False

    def on_check(self, header, data):
        answer = {"type": "checked", "id": header["id"]}
        _, fault = gain_of(header.get("params"))
        if fault:
            answer["error"] = fault
        self.write(answer)

    def on_job(self, header, data):
        gain, fault = gain_of(header.get("params"))
        if fault:
            self.write({"type": "error", "job": header["job"], "code": "bad_params",
                        "field": fault["field"], "message": fault["reason"]})
            return
        self.jobs[header["job"]] = Job(header["job"], gain, header.get("window", 8))

    def on_input(self, header, data):
        job = self.jobs.get(header["job"])
        if job is None:
            return  # a job that has ended
        if header.get("kind") != "audio":
            self.end(job, {"type": "error", "code": "bad_input",
                           "message": "want audio, got %s" % header.get("kind")})
            return
        job.pending.append((header, data))
        self.pump(job)

    def on_input_end(self, header, data):
        job = self.jobs.get(header["job"])
        if job is not None:
            job.input_ended = True
            self.pump(job)

    def on_credit(self, header, data):
        job = self.jobs.get(header["job"])
        if job is not None:
            job.credit += header["chunks"]
            self.pump(job)

    def on_cancel(self, header, data):
        job = self.jobs.get(header["job"])
        if job is not None:  # else it has ended: nothing to answer
            self.end(job, {"type": "cancelled"})

    def pump(self, job):
        """Sends the job's waiting chunks while its credit lasts; done once
        its input has ended and nothing waits."""
        while job.pending and job.credit > 0:
            header, data = job.pending.pop(0)
            self.output(job, header, scale(data, job.gain))
        if job.input_ended and not job.pending:
            self.end(job, {"type": "done"})

    def output(self, job, header, data):
        """Sends one output chunk, and credit back for its input chunk."""
        out = {"type": "output", "job": job.id, "kind": "audio", "sample_rate": header["sample_rate"]}
        if header.get("end_of_sentence"):
            out["end_of_sentence"] = True
        self.write(out, data)
        job.credit -= 1
        self.write({"type": "credit", "job": job.id, "chunks": 1})

    def end(self, job, message):
        del self.jobs[job.id]
        self.write(dict(message, job=job.id))


def gain_of(params):
    """Returns the gain params give and None, or None and the fault."""
    if params is None:
        return 1.0, None
    for name in params:
        if name != "gain":
            return None, {"field": name, "reason": "unknown field; this stage takes only gain"}
    gain = params.get("gain", 1.0)
    if isinstance(gain, bool) or not isinstance(gain, (int, float)):
        return None, {"field": "gain", "reason": "want a number, got %s" % json.dumps(gain)}
    if not 0 <= gain <= 4:
        return None, {"field": "gain", "reason": "must be between 0 and 4"}
    return float(gain), None


def scale(data, gain):
    """Scales 16-bit little-endian samples by gain, clipping."""
    samples = array.array("h")
    samples.frombytes(data)
    if sys.byteorder == "big":
        samples.byteswap()
    for i, s in enumerate(samples):
        samples[i] = max(-32768, min(32767, int(s * gain)))
    if sys.byteorder == "big":
        samples.byteswap()
    return samples.tobytes()


if __name__ == "__main__":
    Echo(sys.stdin.buffer, sys.stdout.buffer).serve()
