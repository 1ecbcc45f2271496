#!/usr/bin/env python3
"""Broken on purpose: the echo of examples/echo-raw, but it prints a
debug line to standard output as it echoes each chunk: that line is not
a message, and the runtime stops a program that writes one.
`omnistage stage check` fails the cases that get output."""

import os
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ in examples/echo-raw
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "echo-raw"))
from echo import Echo  # noqa: E402


class Garbage(Echo):
    def output(self, job, header, data):
        print("echoing a chunk of job", job.id, flush=True)  # the bug: print goes to stdout
        super().output(job, header, data)


if __name__ == "__main__":
    Garbage(sys.stdin.buffer, sys.stdout.buffer).serve()
