"""Stage 0 of the espeak example: text to espeak-ng phonemes, a sentence at
a time, as soon as each sentence's end has arrived.

Its output is the pipeline's own kind "phonemes": the phoneme mnemonics of
one sentence, with its voice, speed and text in the chunk's metadata, so
the synthesizer speaks each sentence as the request asked.
"""

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The example runs from this repository: the SDK is two folders up. A stage
# of your own would install it, or set PYTHONPATH.
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "sdk", "python")]

import omnistage_stage as st  # noqa: E402
from voices import DEFAULT_VOICE, VOICES  # noqa: E402

# A sentence ends at ., ! or ? followed by white space (or at the end of the
# text, once the text has ended).
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def phonemes(text, voice):
    """The phoneme mnemonics espeak-ng says for text, clauses joined by a pause."""
    out = subprocess.run(["espeak-ng", "-q", "-x", "-v", voice, text],
                         capture_output=True, text=True, check=True).stdout
    clauses = [line.strip() for line in out.splitlines() if line.strip()]
    return " _:_ ".join(clauses)


class Phonemizer(st.Stage):
    name = "espeak-phonemizer"
    input, output = "text", "phonemes"
    max_jobs = 4
    params = {
        "voice": {"type": "string", "description": "an espeak-ng voice: " + ", ".join(VOICES)},
        "speed": {"type": "number", "description": "speaking rate, 0.25 to 4 (1 is normal)"},
    }
    voices = [{"id": v, "name": n, "language": lang} for v, (n, lang) in VOICES.items()]

    def check_params(self, params):
        voice = params.get("voice", DEFAULT_VOICE)
        if voice not in VOICES:
            raise st.ParamError("voice", "unknown voice %r; this stage speaks %s" % (voice, ", ".join(VOICES)))
        speed = params.get("speed", 1)
        if not isinstance(speed, (int, float)) or isinstance(speed, bool) or not 0.25 <= speed <= 4:
            raise st.ParamError("speed", "must be a number from 0.25 to 4")

    def process(self, job):
        voice = job.params.get("voice", os.environ.get("VOICE", DEFAULT_VOICE))
        speed = job.params.get("speed", 1)
        pending = ""
        for chunk in job.input():
            pending += chunk.text
            *done, pending = SENTENCE_END.split(pending)
            for sentence in done:
                self.say(job, sentence, voice, speed)
        if pending.strip():
            self.say(job, pending.strip(), voice, speed)

    def say(self, job, sentence, voice, speed):
        if job.cancelled or not sentence.strip():
            return
        meta = {"voice": voice, "speed": str(speed), "text": sentence}
        job.send(st.Data("phonemes", phonemes(sentence, voice).encode(), meta))


if __name__ == "__main__":
    st.run(Phonemizer())
