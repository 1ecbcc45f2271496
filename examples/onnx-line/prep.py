"""Stage 0 of the line reader: an image of one line of text (a PNG file)
to the input of PP-OCRv4's recognizer, the tensor x of 1 × 3 × 48 × W
float32: the line scaled to 48 pixels high (bilinear), its width by its
aspect ratio, W at least 320, padded right with zeros; each channel
mapped to [-1, 1] ((v / 255 - 0.5) / 0.5), the planes blue, green, red,
as PaddleOCR's models were trained (on OpenCV's BGR images).

Standard library only, so that it runs anywhere Python does: with Pillow
and NumPy the same is a few lines (Image.open, resize, np.asarray) and
st.Tensor.from_numpy("x", arr).
"""

import math
import os
import struct
import sys
import zlib
from array import array

HERE = os.path.dirname(os.path.abspath(__file__))
# The example runs from this repository: the SDK is two folders up. A stage
# of your own would install it (pip install sdk/python), or set PYTHONPATH.
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "sdk", "python")]

import omnistage_stage as st  # noqa: E402
from png import PNGError, decode  # noqa: E402

HEIGHT = 48  # the recognizer's input height
MIN_WIDTH = 320  # and least width (PaddleOCR's rec_image_shape 3,48,320)
MAX_WIDTH = 48 * 40  # a line this long is better cut by a detector first


def taps(src, dst):
    """For each of dst output positions, the two source positions and the
    weight of the second, as bilinear scaling from src positions samples
    them (pixel centres at i + 0.5, as OpenCV's INTER_LINEAR)."""
    out = []
    for i in range(dst):
        x = min(max((i + 0.5) * src / dst - 0.5, 0), src - 1)
        x0 = int(x)
        out.append((x0, min(x0 + 1, src - 1), x - x0))
    return out


def tensor(width, height, rgb):
    """The recognizer's input for an RGB image of width × height."""
    w = min(max(1, math.ceil(HEIGHT * width / height)), MAX_WIDTH)
    padded = max(w, MIN_WIDTH)
    plane = HEIGHT * padded
    x = array("f", bytes(4 * 3 * plane))  # zeros
    cols, rows = taps(width, w), taps(height, HEIGHT)
    for oy, (y0, y1, fy) in enumerate(rows):
        r0, r1 = 3 * width * y0, 3 * width * y1
        for ox, (x0, x1, fx) in enumerate(cols):
            at = oy * padded + ox
            for c in range(3):  # R, G, B in the image; planes B, G, R
                top = rgb[r0 + 3 * x0 + c] * (1 - fx) + rgb[r0 + 3 * x1 + c] * fx
                bottom = rgb[r1 + 3 * x0 + c] * (1 - fx) + rgb[r1 + 3 * x1 + c] * fx
                x[(2 - c) * plane + at] = (top * (1 - fy) + bottom * fy) / 127.5 - 1
    return st.Tensor.from_array("x", [1, 3, HEIGHT, padded], x)


class Prep(st.Stage):
    name = "line-prep"
    input, output = "image", "tensor"
    max_jobs = 2

    def process(self, job):
        for image in job.input():
            if image.format != "png":
                raise st.InputError("this example reads PNG files; got %s" % image.format)
            try:
                width, height, rgb = decode(image.data)
            except (PNGError, zlib.error, struct.error) as e:
                raise st.InputError("the PNG file: %s" % e) from None
            job.send(tensor(width, height, rgb))


if __name__ == "__main__":
    st.run(Prep())
