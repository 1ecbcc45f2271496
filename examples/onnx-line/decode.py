"""Stage 2 of the line reader: PP-OCRv4's recognizer output (the tensor
probs, 1 × T × 6625 float32: for each of T steps along the line, a score
for each class) to text, by greedy CTC decoding: the best class at each
step, repeats merged, blanks dropped. Class 0 is the blank, classes 1 to
6623 the characters of the dictionary file, one a line, and the last one
a space.

It takes batches (process_batch): the runtime hands it the outputs of
the requests that arrive together in one call. Decoding gains nothing
from that in Python; it is how a stage that runs a model of its own
would take its batches.
"""

import os
import sys
from array import array

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "..", "sdk", "python")]

import omnistage_stage as st  # noqa: E402

DICT = "/usr/local/share/omnistage/models/ppocr-v4/ppocr_keys_v1.txt"


class Decode(st.Stage):
    name = "line-decode"
    input, output = "tensor", "text"
    max_batch = 16

    def warm(self, config):
        path = config.get("dict") or DICT
        with open(path, encoding="utf-8") as f:
            self.classes = [""] + [line.rstrip("\r\n") for line in f] + [" "]

    def decode(self, chunk):
        probs = chunk.get("probs")
        if probs is None or probs.dtype != "float32" or len(probs.shape) != 3 or probs.shape[0] != 1:
            raise st.InputError("want a float32 tensor probs of 1 × steps × classes; got %r" % (chunk.tensors,))
        steps, n = probs.shape[1], probs.shape[2]
        if n != len(self.classes):
            raise st.InputError("probs has %d classes; the dictionary makes %d" % (n, len(self.classes)))
        scores = probs.array()
        text, last = [], 0
        for t in range(steps):
            row = scores[t * n:(t + 1) * n]
            best = row.index(max(row))
            if best != last and best != 0:
                text.append(self.classes[best])
            last = best
        return "".join(text).strip()

    def process_batch(self, jobs):
        results = []
        for job in jobs:
            try:
                job.send(st.Text(self.decode(job.chunk)))
                results.append(None)
            except st.InputError as e:
                results.append(e)
        return results


if __name__ == "__main__":
    st.run(Decode())
