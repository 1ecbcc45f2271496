"""Stage 1 of the espeak example: espeak-ng phonemes to audio, at espeak's
own 22 050 Hz, in blocks of 100 ms with a mark after each sentence (which
the aligner aligns as it comes)."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The example runs from this repository: the SDK is two folders up. A stage
# of your own would install it, or set PYTHONPATH.
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "sdk", "python")]

import omnistage_stage as st  # noqa: E402
from voices import BASE_RATE, DEFAULT_VOICE  # noqa: E402

RATE = 22050
BLOCK = RATE // 10 * 2  # 100 ms of 16-bit samples, in bytes


def speak(phonemes, voice, speed):
    """The PCM espeak-ng makes for phonemes: 16-bit mono at RATE."""
    wav = subprocess.run(["espeak-ng", "-v", voice, "-s", str(round(BASE_RATE * speed)), "--stdout", "[[" + phonemes + "]]"],
                         capture_output=True, check=True).stdout
    # A streamed WAV: its sizes are unknown, its data follows the "data" tag.
    at = wav.find(b"data")
    if at < 0:
        raise RuntimeError("espeak-ng wrote no WAV data")
    pcm = wav[at + 8:]
    return pcm[: len(pcm) // 2 * 2]


class Synth(st.Stage):
    name = "espeak-synth"
    input, output = "phonemes", "audio"
    max_jobs = 2

    def process(self, job):
        default_voice = os.environ.get("VOICE", DEFAULT_VOICE)
        for chunk in job.input():
            if job.cancelled:
                return
            voice = chunk.meta.get("voice", default_voice)
            speed = float(chunk.meta.get("speed", "1"))
            pcm = speak(chunk.data.decode(), voice, speed)
            for at in range(0, len(pcm), BLOCK):
                job.send(st.Audio(RATE, pcm[at:at + BLOCK]))
            job.send(st.Audio(RATE, b"", True))


if __name__ == "__main__":
    st.run(Synth())
