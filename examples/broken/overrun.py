#!/usr/bin/env python3
"""Broken on purpose: the echo of examples/echo-raw, but its credit count
is one off: it sends one output chunk more than the runtime's credit
allows. The runtime's buffer hides that from a fast reader; `omnistage
stage check` fails its slow-reader case."""

import os
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ in examples/echo-raw
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "echo-raw"))
from echo import Echo  # noqa: E402


class Overrun(Echo):
    def on_job(self, header, data):
        super().on_job(header, data)
        job = self.jobs.get(header["job"])
        if job is not None:
            job.credit += 1  # the bug: a window of N taken for N+1


if __name__ == "__main__":
    Overrun(sys.stdin.buffer, sys.stdout.buffer).serve()
