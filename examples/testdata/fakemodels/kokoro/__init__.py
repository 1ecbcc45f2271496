"""FAKE kokoro: a test double of the kokoro package, not Kokoro. It speaks
no words: each segment is a tone as long as it would take to say, so that
`omnistage stage check` can run examples/kokoro/stage.py where kokoro is not
installed (go test ./internal/stagecheck puts this folder's parent on
PYTHONPATH). It has the names and shapes of the real API that the example
uses (kokoro 0.9.4 and later: README.md and kokoro/pipeline.py of hexgrad/kokoro):
KPipeline(lang_code, repo_id=None, ...), pipeline.load_voice(voice), and
pipeline(text, voice, speed, split_pattern) yielding, per segment, a result
that unpacks as (graphemes, phonemes, audio), audio a 1-D float tensor at
24 kHz (here an object with the one method of torch.Tensor the example
calls, tolist)."""

import math
import re

LANG_CODES = "abefhijpz"
RATE = 24000
SECONDS_PER_CHAR = 0.06


class FakeTensor:
    """Stands in for the 1-D torch.FloatTensor of a segment's audio."""

    def __init__(self, samples):
        self._samples = samples

    def tolist(self):
        return list(self._samples)


class Result:
    def __init__(self, graphemes, phonemes, audio):
        self.graphemes, self.phonemes, self.audio = graphemes, phonemes, audio

    def __iter__(self):
        return iter((self.graphemes, self.phonemes, self.audio))


class KPipeline:
    def __init__(self, lang_code, repo_id=None, model=True, trf=False, device=None):
        assert lang_code.lower() in LANG_CODES, (lang_code, LANG_CODES)
        self.voices = {}

    def load_voice(self, voice, delimiter=","):
        self.voices.setdefault(voice, voice)
        return self.voices[voice]

    def __call__(self, text, voice=None, speed=1, split_pattern=r"\n+", model=None):
        if voice is None:
            raise ValueError('Specify a voice: en_us_pipeline(text="Hello world!", voice="af_heart")')
        self.load_voice(voice)
        for segment in re.split(split_pattern, text.strip()) if split_pattern else [text]:
            if segment.strip():
                n = round(len(segment) * SECONDS_PER_CHAR / speed * RATE)
                audio = FakeTensor([0.25 * math.sin(2 * math.pi * 220 * i / RATE) for i in range(n)])
                yield Result(segment, "fake phonemes", audio)
