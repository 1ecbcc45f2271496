"""FAKE piper: a test double of the piper-tts package, not Piper. It speaks
no words: each sentence is a tone as long as the sentence would take to
say, so that `omnistage stage check` can run examples/piper/stage.py where
piper-tts is not installed (go test ./internal/stagecheck puts this folder's
parent on PYTHONPATH). It has the names and shapes of the real API that the
example uses (docs/API_PYTHON.md of OHF-Voice/piper1-gpl; its PiperConfig):
PiperVoice.load(model_path, config_path=None, use_cuda=False) reads no
files; voice.config.sample_rate and .length_scale; voice.synthesize(text,
syn_config) yields one AudioChunk per sentence, with sample_rate,
sample_width, sample_channels and audio_int16_bytes."""

import math
import re
import sys
from array import array
from dataclasses import dataclass
from typing import Optional

RATE = 22050  # a medium or high voice's rate; low and x_low voices have 16000
SECONDS_PER_CHAR = 0.06


@dataclass
class SynthesisConfig:
    speaker_id: Optional[int] = None
    length_scale: Optional[float] = None
    noise_scale: Optional[float] = None
    noise_w_scale: Optional[float] = None
    normalize_audio: bool = True
    volume: float = 1.0


@dataclass
class PiperConfig:
    sample_rate: int
    length_scale: float = 1.0


@dataclass
class AudioChunk:
    sample_rate: int
    audio_int16_bytes: bytes
    sample_width: int = 2
    sample_channels: int = 1


def tone(seconds, rate):
    """A 220 Hz tone of seconds at rate, 16-bit little-endian PCM bytes."""
    samples = array("h", (round(8000 * math.sin(2 * math.pi * 220 * i / rate)) for i in range(round(seconds * rate))))
    if sys.byteorder == "big":
        samples.byteswap()
    return samples.tobytes()


class PiperVoice:
    def __init__(self, config):
        self.config = config

    @staticmethod
    def load(model_path, config_path=None, use_cuda=False):
        return PiperVoice(PiperConfig(sample_rate=RATE))

    def synthesize(self, text, syn_config=None, include_alignments=False):
        scale = self.config.length_scale
        if syn_config is not None and syn_config.length_scale is not None:
            scale = syn_config.length_scale
        for sentence in re.split(r"(?<=[.!?])\s+", text.strip()):
            if sentence:
                seconds = len(sentence) * SECONDS_PER_CHAR * scale
                yield AudioChunk(self.config.sample_rate, tone(seconds, self.config.sample_rate))
