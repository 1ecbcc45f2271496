"""A test stage that holds every job until the file named by $RELEASE
exists, then speaks a short tone: with it, a test fills a pipeline's
admission limit for as long as it wants, whatever the machine's speed."""

import math
import os
import struct
import time

import omnistage_stage as st

RATE = 16000


class Held(st.Stage):
    name = "held"
    input, output = "text", "audio"
    max_jobs = 8

    def process(self, job):
        text = "".join(chunk.text for chunk in job.input())
        while not os.path.exists(os.environ["RELEASE"]):
            if job.cancelled:
                return
            time.sleep(0.01)
        tone = b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / RATE))) for i in range(RATE // 4))
        job.send(st.Audio(RATE, tone * max(1, len(text) // 20)))
        job.send(st.Audio(RATE, b"", True))


if __name__ == "__main__":
    st.run(Held())
