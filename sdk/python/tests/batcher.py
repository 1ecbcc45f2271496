"""A stage that takes batches: gain.py's gain, one chunk a job, a batch at
a time (process_batch). It says on standard error how many jobs each call
got. A chunk not at 16 kHz fails its job alone; with the first argument
"raise", a call with a job of gain 0 raises, failing all its jobs; with
"many", each job sends 9 chunks."""

import sys

import omnistage_stage as st
from gain import Gain, scaled

MODE = sys.argv[1] if len(sys.argv) > 1 else ""


class Batcher(Gain):
    name = "batcher"
    max_batch = 4
    max_jobs = 2

    def process_batch(self, jobs):
        print("batch of %d" % len(jobs), file=sys.stderr, flush=True)
        results = []
        for job in jobs:
            gain = job.params.get("gain", 1)
            if MODE == "raise" and gain == 0:
                raise RuntimeError("a gain of 0 breaks the whole batch")
            a = job.chunk
            if a.sample_rate != 16000:
                results.append(st.InputError("want 16000 Hz, got %d" % a.sample_rate))
                continue
            for _ in range(9 if MODE == "many" else 1):
                job.send(st.Audio(a.sample_rate, scaled(a.pcm, gain), a.end_of_sentence))
            results.append(None)
        return results


if __name__ == "__main__":
    st.run(Batcher())
