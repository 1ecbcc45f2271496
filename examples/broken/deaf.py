#!/usr/bin/env python3
"""Broken on purpose: the echo of examples/echo-raw, but it ignores
cancel: the job stays open and no `cancelled` comes. The runtime stops
such a program after 5 seconds; `omnistage stage check` fails its cancel
case."""

import os
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ in examples/echo-raw
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "echo-raw"))
from echo import Echo  # noqa: E402


class Deaf(Echo):
    def on_cancel(self, header, data):
        pass  # the bug: no answer


if __name__ == "__main__":
    Deaf(sys.stdin.buffer, sys.stdout.buffer).serve()
