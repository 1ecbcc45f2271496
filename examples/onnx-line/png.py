"""A PNG decoder in the standard library alone (zlib and the five row
filters), for the pre-processing stage of this example: a user with Pillow
would write Image.open(io.BytesIO(data)).convert("RGB") instead.

It reads 8- and 16-bit grayscale, RGB, palette, grayscale with alpha and
RGBA images, not interlaced (Adam7 images are refused: re-save them
without interlacing), and lays transparent pixels over white."""

import struct
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"

# The samples of a pixel, by colour type.
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


class PNGError(ValueError):
    """A file this decoder cannot read, and why."""


def decode(data):
    """Returns (width, height, pixels) of the PNG file data: pixels is
    bytes of width × height RGB pixels, 8 bits a channel, row-major."""
    if data[:8] != SIGNATURE:
        raise PNGError("not a PNG file")
    at, header, palette, alpha, idat = 8, None, None, None, []
    while at + 8 <= len(data):
        n, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + n]
        if len(body) != n:
            raise PNGError("the file is cut short")
        at += 12 + n
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"PLTE":
            palette = body
        elif kind == b"tRNS":
            alpha = body
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    if header is None or not idat:
        raise PNGError("no image header or no image data")
    width, height, depth, ctype, _, _, interlace = header
    if ctype not in CHANNELS or depth not in (8, 16) or (ctype == 3 and depth != 8):
        raise PNGError("colour type %d at %d bits is not read here: save it as 8-bit RGB" % (ctype, depth))
    if interlace:
        raise PNGError("an interlaced PNG is not read here: save it without interlacing")
    if ctype == 3 and palette is None:
        raise PNGError("a palette image without a palette")
    bpp = CHANNELS[ctype] * depth // 8  # bytes a pixel
    raw = unfilter(zlib.decompress(b"".join(idat)), width * bpp, height, bpp)
    if depth == 16:  # keep the high byte of each sample
        raw = raw[0::2]
    return width, height, to_rgb(raw, width * height, ctype, palette, alpha)


def unfilter(raw, stride, height, bpp):
    """Undoes the row filters: each row is a filter type byte, then stride
    bytes."""
    if len(raw) < (stride + 1) * height:
        raise PNGError("the image data is cut short")
    out = bytearray(stride * height)
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        row = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:  # Sub
            for i in range(bpp, stride):
                row[i] = (row[i] + row[i - bpp]) & 255
        elif f == 2:  # Up
            row = bytearray((a + b) & 255 for a, b in zip(row, prev))
        elif f == 3:  # Average
            for i in range(stride):
                left = row[i - bpp] if i >= bpp else 0
                row[i] = (row[i] + ((left + prev[i]) >> 1)) & 255
        elif f == 4:  # Paeth
            for i in range(stride):
                a = row[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        elif f != 0:
            raise PNGError("row %d has filter type %d" % (y, f))
        out[y * stride:(y + 1) * stride] = row
        prev = row
    return bytes(out)


def to_rgb(raw, pixels, ctype, palette, alpha):
    """The RGB bytes of raw samples of colour type ctype."""
    if ctype == 2:
        return raw
    if ctype == 0:
        return bytes(v for g in raw for v in (g, g, g))
    if ctype == 3:
        rgba = []
        for i in range(len(palette) // 3):
            a = alpha[i] if alpha and i < len(alpha) else 255
            rgba.append(tuple(over_white(c, a) for c in palette[3 * i:3 * i + 3]))
        return bytes(v for p in raw for v in rgba[p])
    if ctype == 4:
        return bytes(v for i in range(0, 2 * pixels, 2) for v in (over_white(raw[i], raw[i + 1]),) * 3)
    out = bytearray(3 * pixels)  # ctype 6: RGBA
    for i in range(pixels):
        a = raw[4 * i + 3]
        if a == 255:
            out[3 * i:3 * i + 3] = raw[4 * i:4 * i + 3]
        else:
            out[3 * i:3 * i + 3] = bytes(over_white(c, a) for c in raw[4 * i:4 * i + 3])
    return bytes(out)


def over_white(c, a):
    """Channel value c of alpha a laid over white."""
    return (c * a + 255 * (255 - a) + 127) // 255
