"""Chunks: the pieces of data a job takes in and sends out, one class per
kind, and their header fields and data on the wire (the stage protocol's
"Kinds and chunks")."""

import json
import sys
from array import array

from . import tensors, vision
from .errors import ProtocolError
from .tensors import Tensor

MAX_META_ENTRIES = 64
MAX_META_BYTES = 4096  # keys and values together, UTF-8

_BIG_ENDIAN = sys.byteorder == "big"


class _Chunk:
    __slots__ = ()
    kind = ""

    def __eq__(self, other):
        return type(other) is type(self) and all(
            getattr(self, s) == getattr(other, s) for s in self.__slots__)

    def __repr__(self):
        fields = ", ".join("%s=%s" % (s, _short(getattr(self, s))) for s in self.__slots__)
        return "%s(%s)" % (type(self).__name__, fields)


def _short(v):
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "<%d bytes>" % memoryview(v).nbytes
    r = repr(v)
    return r if len(r) <= 80 else r[:77] + "..."


class Text(_Chunk):
    """A piece of text."""

    __slots__ = ("text",)
    kind = "text"

    def __init__(self, text):
        self.text = text


class Audio(_Chunk):
    """16-bit signed little-endian mono PCM at sample_rate Hz. A chunk with
    end_of_sentence true and no samples marks the end of a sentence.

    pcm is bytes on input; on output any bytes-like object (bytes,
    bytearray, memoryview, array("h") on a little-endian machine)."""

    __slots__ = ("sample_rate", "pcm", "end_of_sentence")
    kind = "audio"

    def __init__(self, sample_rate, pcm=b"", end_of_sentence=False):
        self.sample_rate = sample_rate
        self.pcm = pcm
        self.end_of_sentence = end_of_sentence


class Words(_Chunk):
    """Word timestamps (kind timestamps): a list of dicts with the keys
    word, char_start, char_end, start_ms, end_ms and optionally spoken."""

    __slots__ = ("words",)
    kind = "timestamps"

    def __init__(self, words):
        self.words = words


class Frames(_Chunk):
    """Acoustic frames of one sentence: per frame, channels parameters and
    str_channels excitation strengths, each row-major in params and str
    (float lists or array("f")); frame_shift is the frame period in
    seconds. On input, params and str are array("f")."""

    __slots__ = ("voice", "channels", "str_channels", "frame_shift", "params", "str")
    kind = "frames"

    def __init__(self, voice, channels, str_channels, frame_shift, params, str):  # noqa: A002
        self.voice = voice
        self.channels = channels
        self.str_channels = str_channels
        self.frame_shift = frame_shift
        self.params = params
        self.str = str

    def __len__(self):
        """The number of frames."""
        return len(self.params) // self.channels if self.channels else 0


class Segments(_Chunk):
    """A diphone voice's segments of one sentence (names, ends in seconds,
    cluster flags: one entry each per segment) and its pitch targets
    (target_pos in seconds, target_f0 in Hz)."""

    __slots__ = ("voice", "names", "ends", "cluster", "target_pos", "target_f0")
    kind = "segments"

    def __init__(self, voice, names, ends, cluster, target_pos=(), target_f0=()):
        self.voice = voice
        self.names = list(names)
        self.ends = list(ends)
        self.cluster = list(cluster)
        self.target_pos = list(target_pos)
        self.target_f0 = list(target_f0)


class Data(_Chunk):
    """A chunk of a kind the pipeline declares: bytes, and meta, a dict of
    str to str (at most 64 entries), carried from stage to stage
    unchanged."""

    __slots__ = ("kind", "data", "meta")

    def __init__(self, kind, data=b"", meta=None):
        self.kind = kind
        self.data = data
        self.meta = meta if meta is not None else {}


class Tensors(_Chunk):
    """A chunk of kind tensor: one or more named tensors (Tensor), each
    named once. chunk["x"] is the tensor named x; iterating gives them in
    order. job.send takes a lone Tensor too, as a chunk of it alone."""

    __slots__ = ("tensors",)
    kind = "tensor"

    def __init__(self, tensors):
        self.tensors = list(tensors)

    def __getitem__(self, name):
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    def get(self, name, default=None):
        """The tensor named name, or default."""
        for t in self.tensors:
            if t.name == name:
                return t
        return default

    def __iter__(self):
        return iter(self.tensors)

    def __len__(self):
        return len(self.tensors)


class Image(_Chunk):
    """An encoded image (kind image): format ("png", "jpeg" or "webp"),
    its width and height in pixels, and data, the file's bytes (on input,
    bytes)."""

    __slots__ = ("format", "width", "height", "data")
    kind = "image"

    def __init__(self, format, width, height, data):  # noqa: A002
        self.format = format
        self.width = width
        self.height = height
        self.data = data


class Regions(_Chunk):
    """Some of an image's text regions, in reading order (kind regions):
    width and height are the image's, regions a list of Region. A stage
    may send an image's regions in several chunks; job.send cuts a chunk
    too large for one message into several."""

    __slots__ = ("width", "height", "regions")
    kind = "regions"

    def __init__(self, width, height, regions=()):
        self.width = width
        self.height = height
        self.regions = list(regions)


def _floats(v):
    """The float32 little-endian bytes of v, a float list or array("f")."""
    a = v if isinstance(v, array) and v.typecode == "f" else array("f", v)
    if _BIG_ENDIAN:
        a = array("f", a)
        a.byteswap()
    return a.tobytes()


def _read_floats(b):
    a = array("f")
    a.frombytes(b)
    if _BIG_ENDIAN:
        a.byteswap()
    return a


def nbytes(data):
    """The length in bytes of a bytes-like object."""
    return len(data) if type(data) is bytes else memoryview(data).nbytes


def _as_bytes(data, what):
    if isinstance(data, (bytes, bytearray)):
        return data
    try:
        return memoryview(data).cast("B")
    except TypeError:
        raise TypeError("%s must be bytes-like, not %s" % (what, type(data).__name__)) from None


def encode(chunk):
    """Returns the header fields (a dict, kind included) and the data of
    chunk, which must be valid for the runtime: a ValueError or TypeError
    says what is wrong with it."""
    t = type(chunk)
    if t is Audio:
        return encode_audio(chunk)
    if t is Text:
        if not isinstance(chunk.text, str):
            raise TypeError("Text.text must be a str, not %s" % type(chunk.text).__name__)
        return {"kind": "text"}, chunk.text.encode("utf-8")
    if t is Words:
        words = chunk.words
        if not isinstance(words, (list, tuple)) or not all(isinstance(w, dict) for w in words):
            raise TypeError("Words.words must be a list of dicts")
        return {"kind": "timestamps", "words": list(words)}, b""
    if t is Frames:
        return _encode_frames(chunk)
    if t is Segments:
        s = chunk
        n = len(s.names)
        if len(s.ends) != n or len(s.cluster) != n or len(s.target_pos) != len(s.target_f0):
            raise ValueError("Segments: names, ends and cluster (and target_pos and target_f0) must have one entry each")
        fields = {"kind": "segments", "voice": s.voice, "names": s.names, "ends": s.ends,
                  "cluster": [bool(c) for c in s.cluster], "target_pos": s.target_pos, "target_f0": s.target_f0}
        return fields, b""
    if t is Data:
        return _encode_data(chunk)
    if t is Tensors:
        return tensors.encode(chunk.tensors)
    if t is Tensor:
        return tensors.encode([chunk])
    if t is Image:
        p = vision.image_problem(chunk.format, chunk.width, chunk.height, nbytes(_as_bytes(chunk.data, "Image.data")))
        if p:
            raise ValueError("Image: " + p)
        return {"kind": "image", "format": chunk.format, "width": chunk.width, "height": chunk.height}, _as_bytes(chunk.data, "Image.data")
    if t is Regions:
        return vision.encode_regions(chunk.width, chunk.height, chunk.regions)
    raise TypeError("not a chunk: %r (send Text, Audio, Words, Frames, Segments, Tensors, Image, Regions or Data)" % (chunk,))


def encode_audio(a):
    """Returns the header fields and data of Audio a, as encode does."""
    sr = a.sample_rate
    if type(sr) is not int or sr <= 0:
        raise ValueError("Audio.sample_rate %r is not a positive number of Hz" % (sr,))
    pcm = _as_bytes(a.pcm, "Audio.pcm")
    if nbytes(pcm) % 2:
        raise ValueError("Audio.pcm: %d bytes of 16-bit samples is not an even number" % nbytes(pcm))
    fields = {"kind": "audio", "sample_rate": sr}
    if a.end_of_sentence:
        fields["end_of_sentence"] = True
    return fields, pcm


def _encode_frames(f):
    ch, sch = f.channels, f.str_channels
    if type(ch) is not int or type(sch) is not int or ch <= 0 or sch < 0:
        raise ValueError("Frames: channels %r must be a positive int and str_channels %r an int, 0 or more" % (ch, sch))
    n = len(f.params) // ch
    if len(f.params) != n * ch or len(f.str) != n * sch:
        raise ValueError("Frames: %d params and %d strengths are not %d frames of %d and %d"
                         % (len(f.params), len(f.str), n, ch, sch))
    fields = {"kind": "frames", "voice": f.voice, "channels": ch, "str_channels": sch,
              "frame_shift": f.frame_shift}
    return fields, _floats(f.params) + _floats(f.str)


def _encode_data(d):
    if not isinstance(d.kind, str) or not d.kind:
        raise ValueError("Data.kind must be a kind's name")
    meta = d.meta or {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise TypeError("Data.meta must be a dict of str to str")
    if len(meta) > MAX_META_ENTRIES:
        raise ValueError("Data.meta: %d entries; the limit is %d" % (len(meta), MAX_META_ENTRIES))
    size = sum(len(k.encode("utf-8")) + len(v.encode("utf-8")) for k, v in meta.items())
    if size > MAX_META_BYTES:
        raise ValueError("Data.meta: %d bytes; the limit is %d" % (size, MAX_META_BYTES))
    fields = {"kind": d.kind}
    if meta:
        fields["meta"] = meta
    return fields, _as_bytes(d.data, "Data.data")


def decode(h, data):
    """Returns the chunk of an input message's header h and data; a chunk
    that does not fit its kind is a ProtocolError."""
    kind = h.get("kind")
    if kind == "audio":
        sr = h.get("sample_rate")
        if type(sr) is not int or sr <= 0:
            raise ProtocolError("audio chunk: sample_rate %r is not a positive number of Hz" % (sr,))
        if len(data) & 1:
            raise ProtocolError("audio chunk: %d bytes of 16-bit samples is not an even number" % len(data))
        return Audio(sr, data, h.get("end_of_sentence") is True)
    if kind == "text":
        try:
            return Text(data.decode("utf-8"))
        except UnicodeDecodeError:
            raise ProtocolError("text chunk: the text is not UTF-8") from None
    if not isinstance(kind, str) or not kind:
        raise ProtocolError("a chunk has no kind")
    if kind == "timestamps":
        words = h.get("words") or []
        if not isinstance(words, list):
            raise ProtocolError("timestamps chunk: words is not a list")
        return Words(words)
    if kind == "frames":
        return _decode_frames(h, data)
    if kind == "tensor":
        return Tensors(tensors.decode(h, data))
    if kind == "image":
        p = vision.image_problem(h.get("format"), h.get("width"), h.get("height"), len(data))
        if p:
            raise ProtocolError("image chunk: " + p)
        return Image(h["format"], h["width"], h["height"], data)
    if kind == "regions":
        return Regions(*vision.decode_regions(h, data))
    if kind == "segments":
        s = Segments(h.get("voice", ""), h.get("names") or [], h.get("ends") or [], h.get("cluster") or [],
                     h.get("target_pos") or [], h.get("target_f0") or [])
        n = len(s.names)
        if len(s.ends) != n or len(s.cluster) != n or len(s.target_pos) != len(s.target_f0):
            raise ProtocolError("segments chunk: names, ends and cluster (and target_pos and target_f0) must have one entry each")
        return s
    meta = h.get("meta") or {}
    if not isinstance(meta, dict):
        raise ProtocolError("%s chunk: meta is not an object" % kind)
    return Data(kind, data, meta)


def _decode_frames(h, data):
    ch, sch = h.get("channels", 0), h.get("str_channels", 0)
    if type(ch) is not int or type(sch) is not int or ch <= 0 or sch < 0:
        raise ProtocolError("frames chunk: channels %r and str_channels %r" % (ch, sch))
    row = 4 * (ch + sch)
    if len(data) % row:
        raise ProtocolError("frames chunk: %d bytes is not a whole number of %d-float frames" % (len(data), ch + sch))
    split = len(data) // row * 4 * ch
    return Frames(h.get("voice", ""), ch, sch, h.get("frame_shift", 0.0),
                  _read_floats(data[:split]), _read_floats(data[split:]))


def dumps(v):
    """v as compact JSON, UTF-8."""
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
