"""What every stage that speaks needs: the text of a job a sentence at a
time as it streams in, and audio sent in chunks of 100 ms."""

import re
import sys
from array import array

from .chunks import Audio

# A sentence ends at ".", "!" or "?" (closing quotes and brackets after it
# included) followed by white space.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")

CHUNK_MS = 100  # the audio of one chunk send_pcm sends, in milliseconds


class Sentences:
    """Cuts text that arrives in pieces (cut anywhere, mid-word included)
    into sentences, each as soon as its end has arrived."""

    def __init__(self):
        self._pending = ""

    def add(self, text):
        """Takes the next piece of the text; returns the sentences it
        completes, each stripped of surrounding white space."""
        self._pending += text
        *done, self._pending = _split(self._pending)
        return [s for s in done if s]

    def rest(self):
        """Returns the text after the last complete sentence, stripped (""
        when there is none), and forgets it: the input has ended."""
        rest, self._pending = self._pending.strip(), ""
        return rest


def _split(text):
    """Splits text after each sentence end; the last piece is the text not
    yet ended, unstripped."""
    pieces, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        pieces.append(text[start:m.end()].strip())
        start = m.end()
    pieces.append(text[start:])
    return pieces


def sentences(job):
    """Yields the text of job's input (Text chunks) a sentence at a time,
    each once its end has arrived, then the text after the last one when
    the input ends; nothing more once the job is cancelled."""
    s = Sentences()
    for chunk in job.input():
        yield from s.add(chunk.text)
    rest = s.rest()
    if rest and not job.cancelled:
        yield rest


def send_pcm(job, sample_rate, pcm, end_of_sentence=False, chunk_ms=CHUNK_MS):
    """Sends 16-bit PCM (any bytes-like object) as Audio chunks of chunk_ms
    each, so that the next stage gets it as the runtime's credit allows,
    then, when end_of_sentence is true, the mark that ends a sentence."""
    data = memoryview(pcm).cast("B")
    if len(data) % 2:
        raise ValueError("send_pcm: %d bytes of 16-bit samples is not an even number" % len(data))
    step = max(sample_rate * chunk_ms // 1000, 1) * 2
    for at in range(0, len(data), step):
        job.send(Audio(sample_rate, data[at:at + step]))
    if end_of_sentence:
        job.send(Audio(sample_rate, b"", True))


def pcm16(samples):
    """Returns the 16-bit little-endian PCM of float samples in [-1, 1]
    (any iterable of numbers), each clipped to that range."""
    pcm = array("h", [round(32767 * (1.0 if s > 1 else -1.0 if s < -1 else s)) for s in samples])
    if sys.byteorder == "big":
        pcm.byteswap()
    return pcm.tobytes()
