#!/usr/bin/env python3
"""Broken on purpose: says hello, then never answers (a stage stuck
loading its model, say). `omnistage stage check` fails its warm case."""

import json
import sys

sys.stdout.write(json.dumps({"type": "hello", "protocol": 1, "name": "mute",
                             "input": "audio", "output": "audio"}) + "\n")
sys.stdout.flush()
for _ in sys.stdin.buffer:  # reads every message, answers none, until EOF
    pass
