"""The image and regions kinds on the wire: an image's format and size
in the header and its file's bytes as the data; text regions described
in the header, their crops' pixels as the data."""

import math

from .errors import ProtocolError

IMAGE_FORMATS = ("png", "jpeg", "webp")
MAX_IMAGE_SIDE = 1 << 14  # an image's, or a crop's, width and height
MAX_REGIONS = 4096  # regions in one chunk


class Crop:
    """The part of an image a recognizer reads, cut out along a region's
    box and made upright: width × height RGB pixels, 8 bits a channel,
    row-major (pixels: 3 × width × height bytes, any bytes-like object;
    on input, a read-only memoryview)."""

    __slots__ = ("width", "height", "pixels")

    def __init__(self, width, height, pixels):
        self.width = width
        self.height = height
        self.pixels = pixels

    def __eq__(self, other):
        return type(other) is Crop and (self.width, self.height) == (other.width, other.height) and bytes(self.pixels) == bytes(other.pixels)

    def __repr__(self):
        return "Crop(%d, %d, <%d bytes>)" % (self.width, self.height, memoryview(self.pixels).nbytes)


class Region:
    """One text region of an image: index (its place in reading order,
    from 0), box (its four corners, (x, y) in the image's pixels,
    clockwise from the top-left of its text), score (the detector's
    confidence, 0 to 1), crop (a Crop, or None once it has been read),
    rotated (a classifier turned the crop 180°), text (the recognized
    text, "" before) and confidence (the recognizer's, one per code point
    of text, or none)."""

    __slots__ = ("index", "box", "score", "crop", "rotated", "text", "confidence")

    def __init__(self, index, box, score, crop=None, rotated=False, text="", confidence=()):
        self.index = index
        self.box = [tuple(p) for p in box]
        self.score = score
        self.crop = crop
        self.rotated = rotated
        self.text = text
        self.confidence = list(confidence)

    def __eq__(self, other):
        return type(other) is Region and all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    def __repr__(self):
        return "Region(%d, text=%r, score=%.3g, crop=%r)" % (self.index, self.text, self.score, self.crop)


def _number(v):
    return type(v) in (int, float) and math.isfinite(v)


def image_problem(fmt, width, height, nbytes):
    """What is wrong with an image of format and size and nbytes bytes, or
    None."""
    if fmt not in IMAGE_FORMATS:
        return "image format %r; want png, jpeg or webp" % (fmt,)
    if not all(type(v) is int and 1 <= v <= MAX_IMAGE_SIDE for v in (width, height)):
        return "image of %r×%r pixels; each side is 1 to %d" % (width, height, MAX_IMAGE_SIDE)
    if nbytes == 0:
        return "image has no bytes"
    return None


def _region_problem(r):
    """What is wrong with Region r (its crop's pixels aside), or None."""
    if type(r.index) is not int or r.index < 0:
        return "index %r; indexes are ints from 0" % (r.index,)
    if len(r.box) != 4 or not all(len(p) == 2 and _number(p[0]) and _number(p[1]) for p in r.box):
        return "box %r is not four (x, y) corners of finite numbers" % (r.box,)
    if not _number(r.score) or not 0 <= r.score <= 1:
        return "score %r; want 0 to 1" % (r.score,)
    if not isinstance(r.text, str):
        return "text is not a str"
    if r.confidence and len(r.confidence) != len(r.text):
        return "%d confidences for a text of %d code points" % (len(r.confidence), len(r.text))
    if not all(_number(c) for c in r.confidence):
        return "a confidence is not a finite number"
    c = r.crop
    if c is not None and (type(c) is not Crop or not all(type(v) is int and 1 <= v <= MAX_IMAGE_SIDE for v in (c.width, c.height))):
        return "crop %r is not a Crop of 1 to %d pixels a side" % (c, MAX_IMAGE_SIDE)
    return None


def _size_problem(width, height, n):
    if not all(type(v) is int and 1 <= v <= MAX_IMAGE_SIDE for v in (width, height)):
        return "regions of an image of %r×%r pixels; each side is 1 to %d" % (width, height, MAX_IMAGE_SIDE)
    if n > MAX_REGIONS:
        return "%d regions; the limit is %d" % (n, MAX_REGIONS)
    return None


def encode_regions(width, height, regions):
    """Returns the header fields and data of a regions chunk: a ValueError
    or TypeError says what is wrong with it."""
    p = _size_problem(width, height, len(regions))
    if p:
        raise ValueError("Regions: " + p)
    fields, parts = [], []
    for i, r in enumerate(regions):
        if type(r) is not Region:
            raise TypeError("Regions: regions[%d] is not a Region" % i)
        p = _region_problem(r)
        if p:
            raise ValueError("Regions: regions[%d]: %s" % (i, p))
        f = {"index": r.index, "box": [[x, y] for x, y in r.box], "score": r.score}
        if r.crop is not None:
            c = r.crop
            px = memoryview(c.pixels).cast("B")
            if len(px) != 3 * c.width * c.height:
                raise ValueError("Regions: regions[%d]: a crop of %d×%d RGB pixels has %d bytes, not %d"
                                 % (i, c.width, c.height, len(px), 3 * c.width * c.height))
            f["crop"] = {"width": c.width, "height": c.height}
            parts.append(px)
        if r.rotated:
            f["rotated"] = True
        if r.text:
            f["text"] = r.text
        if r.confidence:
            f["confidence"] = list(r.confidence)
        fields.append(f)
    h = {"kind": "regions", "width": width, "height": height}
    if fields:
        h["regions"] = fields
    return h, b"".join(parts)


def decode_regions(h, data):
    """Returns the width, height and Region list of a regions chunk's
    header h and data, each crop's pixels a memoryview of data; a chunk
    that does not fit its kind is a ProtocolError."""
    fields = h.get("regions") or []
    width, height = h.get("width"), h.get("height")
    if not isinstance(fields, list):
        raise ProtocolError("regions chunk: regions is not a list")
    p = _size_problem(width, height, len(fields))
    if p:
        raise ProtocolError("regions chunk: " + p)
    view = memoryview(data).toreadonly()
    out, at = [], 0
    for i, f in enumerate(fields):
        if not isinstance(f, dict):
            raise ProtocolError("regions chunk: regions[%d] is not an object" % i)
        box, c = f.get("box"), f.get("crop")
        if not isinstance(box, list) or not all(isinstance(p, list) for p in box):
            raise ProtocolError("regions chunk: regions[%d]: box %r is not four [x, y] corners" % (i, box))
        crop = None
        if c is not None:
            w, hh = (c.get("width"), c.get("height")) if isinstance(c, dict) else (None, None)
            if not all(type(v) is int and 1 <= v <= MAX_IMAGE_SIDE for v in (w, hh)):
                raise ProtocolError("regions chunk: regions[%d]: a crop of %r×%r pixels; each side is 1 to %d" % (i, w, hh, MAX_IMAGE_SIDE))
            n = 3 * w * hh
            if n > len(data) - at:
                raise ProtocolError("regions chunk: regions[%d]: a crop of %d×%d RGB pixels needs %d bytes, but only %d of the data are left for it"
                                    % (i, w, hh, n, len(data) - at))
            crop = Crop(w, hh, view[at:at + n])
            at += n
        conf = f.get("confidence") or []
        if not isinstance(conf, list):
            raise ProtocolError("regions chunk: regions[%d]: confidence is not a list" % i)
        r = Region(f.get("index"), box, f.get("score"), crop, f.get("rotated") is True, f.get("text", ""), conf)
        p = _region_problem(r)
        if p:
            raise ProtocolError("regions chunk: regions[%d]: %s" % (i, p))
        out.append(r)
    if at != len(data):
        raise ProtocolError("regions chunk: the crops make %d bytes, but the data has %d" % (at, len(data)))
    return width, height, out
