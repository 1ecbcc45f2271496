"""An echo stage: every input chunk comes back as output. The kind it takes
and makes is audio, or the first argument."""

import sys

import omnistage_stage as st


class Echo(st.Stage):
    name = "echo"
    input = output = sys.argv[1] if len(sys.argv) > 1 else "audio"
    max_jobs = 4

    def process(self, job):
        for chunk in job.input():
            job.send(chunk)


if __name__ == "__main__":
    st.run(Echo())
