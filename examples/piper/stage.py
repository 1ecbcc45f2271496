"""A Piper voice as an omnistage stage: text in, audio out at the voice's
own rate, a sentence at a time as each sentence's end arrives, with an
end-of-sentence mark after each for the aligner (docs/external-models.md).

NOT RUN AGAINST THE REAL MODEL: piper-tts could not be installed where
this was written. go test ./internal/stagecheck checks it with
`omnistage stage check` and a fake piper package
(examples/testdata/fakemodels/piper) that makes a tone.

Needs piper-tts (pip install piper-tts) in the Python that runs it, and
PIPER_MODEL, the path of a voice's .onnx file, its .onnx.json beside it
(python3 -m piper.download_voices en_US-lessac-medium); PIPER_LANGUAGE, its
BCP 47 language, when its name does not start with it (en_US-...).
"""

import os
import sys

# This example runs from the repository: the SDK is two folders up. A
# stage of your own installs it (pip install ./sdk/python) instead.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python"))

import omnistage_stage as st  # noqa: E402

MODEL = os.environ.get("PIPER_MODEL", "")
VOICE = os.path.basename(MODEL).removesuffix(".onnx")  # en_US-lessac-medium


class Piper(st.Stage):
    name = "piper"
    input, output = "text", "audio"
    max_jobs = 1  # the model takes every core for one sentence: add replicas
    params = {
        "voice": {"type": "string", "description": "the voice: " + VOICE},
        "speed": {"type": "number", "description": "speaking rate, 0.25 to 4 (1 is the voice's own)"},
    }
    # en_US-lessac-medium speaks en-US, unless PIPER_LANGUAGE says otherwise.
    language = os.environ.get("PIPER_LANGUAGE") or VOICE.split("-")[0].replace("_", "-")
    voices = [{"id": VOICE, "name": VOICE, "language": language}] if VOICE else None

    def warm(self):
        from piper import PiperVoice  # here, so that a missing package refuses warm-up, saying so

        if not MODEL.endswith(".onnx"):
            raise ValueError("PIPER_MODEL must be the path of a voice's .onnx file; it is %r" % MODEL)
        self.voice = PiperVoice.load(MODEL)
        for _ in self.voice.synthesize("Ready."):  # the first run is the slowest: not a request's
            pass

    def check_params(self, params):
        if params.get("voice", VOICE) != VOICE:
            raise st.ParamError("voice", "this stage speaks %s only" % VOICE)
        speed = params.get("speed", 1)
        if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not 0.25 <= speed <= 4:
            raise st.ParamError("speed", "must be a number from 0.25 to 4")

    def process(self, job):
        from piper import SynthesisConfig

        config = SynthesisConfig(length_scale=self.voice.config.length_scale / job.params.get("speed", 1))
        rate = self.voice.config.sample_rate
        for sentence in st.sentences(job):
            for chunk in self.voice.synthesize(sentence, syn_config=config):
                st.send_pcm(job, chunk.sample_rate, chunk.audio_int16_bytes)
            job.send(st.Audio(rate, b"", True))


if __name__ == "__main__":
    st.run(Piper())
