"""A test stage on audio whose behaviour the first argument names: it
echoes its input, except that

- stall: after the first chunk it sends nothing more, reads its input to
  its end (a cancel ends it) and then tries to send, logging what happened;
- fail: raises on the second chunk;
- crash: exits the process with status 3 on the second chunk;
- badinput: refuses audio that is not 16 kHz;
- noisy: prints to standard output (sys.stdout and descriptor 1) as it
  warms and for each chunk;
- refuse: refuses to warm;
- config: warm takes the config; its audio comes out at config["rate"];
- pair: a job waits (up to 10 s) until another job runs at the same time;
- slow: sleeps 20 ms after each chunk it sends;
- threads: says on standard error which thread runs each job.

Whatever the mode, close says so on standard error.
"""

import os
import sys
import threading
import time

import omnistage_stage as st

MODE = sys.argv[1]


class Behave(st.Stage):
    name = "behave-" + MODE
    input, output = "audio", "audio"
    max_jobs = 2
    params = {"gain": {"type": "number", "description": "ignored"}}

    def __init__(self):
        self.config = {}
        self.pair = threading.Barrier(2)

    def warm(self, config):
        if MODE == "refuse":
            raise RuntimeError("no model here")
        if MODE == "noisy":
            print("warming, on stdout")
            os.write(1, b"warming, on descriptor 1\n")
        self.config = config

    def close(self):
        print("closed behave-%s" % MODE, file=sys.stderr, flush=True)

    def process(self, job):
        if MODE == "pair":
            self.pair.wait(timeout=10)
        if MODE == "threads":
            print("job %d on thread %d" % (job.id, threading.get_ident()), file=sys.stderr, flush=True)
        for n, chunk in enumerate(job.input()):
            if MODE == "stall" and n == 1:
                break
            if MODE == "fail" and n == 1:
                raise RuntimeError("the model ran out of road")
            if MODE == "crash" and n == 1:
                print("about to crash", file=sys.stderr, flush=True)
                os._exit(3)
            if MODE == "badinput" and chunk.sample_rate != 16000:
                raise st.InputError("want 16000 Hz, got %d" % chunk.sample_rate)
            if MODE == "noisy":
                print("chunk", n, "on stdout")
                os.write(1, b"chunk on descriptor 1\n")
            if MODE == "config":
                chunk = st.Audio(self.config["rate"], chunk.pcm, chunk.end_of_sentence)
            job.send(chunk)
            if MODE == "slow":
                time.sleep(0.02)
        if MODE == "stall":
            for _ in job.input():
                pass
            try:
                job.send(st.Audio(16000, b"\0\0"))
                what = "send went through"
            except st.Cancelled:
                what = "send raised Cancelled"
            print("stalled job %d: input ended, cancelled %s, %s" % (job.id, job.cancelled, what), file=sys.stderr, flush=True)


if __name__ == "__main__":
    st.run(Behave())
