#!/usr/bin/env python3
"""Broken on purpose: the echo of examples/echo-raw, but it crashes on
each job's second output chunk (its model runs out of memory).
`omnistage stage check` fails the cases that run a whole job."""

import os
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ in examples/echo-raw
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "echo-raw"))
from echo import Echo  # noqa: E402


class Crash(Echo):
    def output(self, job, header, data):
        job.sent = getattr(job, "sent", 0) + 1
        if job.sent == 2:
            raise MemoryError("the model ran out of memory")
        super().output(job, header, data)


if __name__ == "__main__":
    Crash(sys.stdin.buffer, sys.stdout.buffer).serve()
