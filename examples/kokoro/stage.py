"""Kokoro-82M as an omnistage stage: text in, audio out at 24 kHz, a
sentence at a time as each sentence's end arrives, with an end-of-sentence
mark after each for the aligner (docs/external-models.md).

NOT RUN AGAINST THE REAL MODEL: kokoro could not be installed where this
was written. go test ./internal/stagecheck checks it with
`omnistage stage check` and a fake kokoro package
(examples/testdata/fakemodels/kokoro) that makes a tone.

Needs kokoro (pip install kokoro) in the Python that runs it, and espeak-ng.
KOKORO_LANG is the pipeline's language code (a: American English, b:
British English, ...), KOKORO_VOICES the voices it offers, the first the
default (af_heart).
"""

import os
import sys

# This example runs from the repository: the SDK is two folders up. A
# stage of your own installs it (pip install ./sdk/python) instead.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python"))

import omnistage_stage as st  # noqa: E402

RATE = 24000
LANG = os.environ.get("KOKORO_LANG", "a")
VOICES = os.environ.get("KOKORO_VOICES", "af_heart").split(",")
LANGUAGES = {"a": "en-US", "b": "en-GB", "e": "es", "f": "fr-FR", "h": "hi",
             "i": "it", "j": "ja", "p": "pt-BR", "z": "zh"}


class Kokoro(st.Stage):
    name = "kokoro"
    input, output = "text", "audio"
    max_jobs = 1  # the model takes every core for one sentence: add replicas
    params = {
        "voice": {"type": "string", "description": "a voice: " + ", ".join(VOICES)},
        "speed": {"type": "number", "description": "speaking rate, 0.25 to 4 (1 is normal)"},
    }
    voices = [{"id": v, "name": v, "language": LANGUAGES.get(LANG, "en-US")} for v in VOICES]

    def warm(self):
        from kokoro import KPipeline  # here, so that a missing package refuses warm-up, saying so

        self.pipeline = KPipeline(lang_code=LANG, repo_id="hexgrad/Kokoro-82M")
        for voice in VOICES:  # fetched now, not by a request
            self.pipeline.load_voice(voice)
        for _ in self.pipeline("Ready.", voice=VOICES[0]):  # the first run is the slowest
            pass

    def check_params(self, params):
        if params.get("voice", VOICES[0]) not in VOICES:
            raise st.ParamError("voice", "unknown voice; this stage speaks %s" % ", ".join(VOICES))
        speed = params.get("speed", 1)
        if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not 0.25 <= speed <= 4:
            raise st.ParamError("speed", "must be a number from 0.25 to 4")

    def process(self, job):
        voice, speed = job.params.get("voice", VOICES[0]), job.params.get("speed", 1)
        for sentence in st.sentences(job):
            for _graphemes, _phonemes, audio in self.pipeline(sentence, voice=voice, speed=speed):
                st.send_pcm(job, RATE, st.pcm16(audio.tolist()))  # audio: a 1-D torch tensor
            job.send(st.Audio(RATE, b"", True))


if __name__ == "__main__":
    st.run(Kokoro())
