"""The tensor, image and regions kinds, in process: their chunks to and
from header fields and data, Tensor's conversions, and a regions chunk
too large for one message sent in several."""

import json
import struct
import sys
import unittest
from array import array

import omnistage_stage as st
from omnistage_stage import chunks
from omnistage_stage.job import Job
from omnistage_stage.wire import MAX_HEADER
from test_job import Writer

BOX = [(1, 2), (30, 2.5), (30, 12), (1, 11.5)]


def regions():
    return st.Regions(40, 20, [
        st.Region(0, BOX, 0.9, st.Crop(2, 1, b"\x01\x02\x03\x04\x05\x06")),
        st.Region(1, BOX, 0.7, rotated=True, text="Hé", confidence=[0.99, 0.5]),
        st.Region(2, BOX, 1, st.Crop(1, 2, bytes(range(7, 13)))),
    ])


def tensors():
    return st.Tensors([
        st.Tensor.from_array("x", [1, 3], array("f", [0.5, -1, 2])),
        st.Tensor("ids", "int64", [2], struct.pack("<2q", 1, -2)),
        st.Tensor("flag", "bool", [], b"\x01"),
        st.Tensor("half", "float16", [2], struct.pack("<2e", 1.5, -0.25)),
    ])


class TestKinds(unittest.TestCase):
    def round_trip(self, c):
        fields, data = chunks.encode(c)
        # As the runtime reads the header: JSON.
        return chunks.decode(json.loads(json.dumps(fields)), bytes(data))

    def test_wire(self):
        """The header fields and data are the runtime's (internal/stageproto's tests hold the same ones)."""
        for c, header, n in [
            (st.Tensors([st.Tensor.from_array("x", [1, 3, 2, 2], array("f", range(12)))]),
             {"kind": "tensor", "tensors": [{"name": "x", "dtype": "float32", "shape": [1, 3, 2, 2]}]}, 48),
            (st.Image("png", 2, 1, b"\x89PNG not really"), {"kind": "image", "format": "png", "width": 2, "height": 1}, 15),
            (regions(), {"kind": "regions", "width": 40, "height": 20, "regions": [
                {"index": 0, "box": [[1, 2], [30, 2.5], [30, 12], [1, 11.5]], "score": 0.9, "crop": {"width": 2, "height": 1}},
                {"index": 1, "box": [[1, 2], [30, 2.5], [30, 12], [1, 11.5]], "score": 0.7, "rotated": True, "text": "Hé", "confidence": [0.99, 0.5]},
                {"index": 2, "box": [[1, 2], [30, 2.5], [30, 12], [1, 11.5]], "score": 1, "crop": {"width": 1, "height": 2}}]}, 12),
            (st.Regions(40, 20), {"kind": "regions", "width": 40, "height": 20}, 0),
        ]:
            with self.subTest(c.kind):
                fields, data = chunks.encode(c)
                self.assertEqual((fields, memoryview(data).nbytes), (header, n))
                self.assertEqual(self.round_trip(c), c)

    def test_tensor_values(self):
        got = self.round_trip(tensors())
        self.assertEqual([t.name for t in got], ["x", "ids", "flag", "half"])
        self.assertEqual(list(got["x"].array()), [0.5, -1, 2])
        self.assertEqual(list(got["ids"].array()), [1, -2])
        self.assertEqual(list(got["flag"].array()), [1])
        self.assertEqual(list(got["half"].array()), [1.5, -0.25])
        self.assertEqual((got["x"].shape, got["x"].elements(), got.get("nope")), ([1, 3], 3, None))
        self.assertIsInstance(got["x"].data, memoryview)
        self.assertTrue(got["x"].data.readonly)
        with self.assertRaises(KeyError):
            got["nope"]

    def test_tensor_from_array(self):
        for code, dtype in [("f", "float32"), ("d", "float64"), ("b", "int8"), ("B", "uint8"), ("h", "int16"), ("q", "int64")]:
            t = st.Tensor.from_array("t", [2], array(code, [1, 2]))
            self.assertEqual((t.dtype, list(t.array())), (dtype, [1, 2]))
        with self.assertRaisesRegex(TypeError, "array.array"):
            st.Tensor.from_array("t", [2], [1, 2])

    @unittest.skipUnless(__import__("importlib").util.find_spec("numpy"), "numpy is not installed")
    def test_numpy(self):
        import numpy as np

        for arr in [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([True, False]), np.arange(4, dtype=">i8"),
                    np.asfortranarray(np.ones((2, 2), dtype=np.float16)), np.float64(2.5)]:
            t = st.Tensor.from_numpy("t", arr)
            back = self.round_trip(st.Tensors([t]))["t"].numpy()
            self.assertEqual(back.shape, np.shape(arr))
            self.assertTrue(np.array_equal(back, arr))

    def test_no_numpy_needed(self):
        """The package imports, and tensors work, without NumPy."""
        import importlib.util

        self.assertNotIn("numpy", sys.modules.get("omnistage_stage.tensors").__dict__)
        if importlib.util.find_spec("numpy") is None:
            with self.assertRaises(ImportError):
                st.Tensor("t", "uint8", [1], b"\0").numpy()

    def test_refused(self):
        t = st.Tensor
        for c, want in [
            (st.Tensors([]), "no tensors"),
            (st.Tensors([t("x", "uint8", [i], b"") for i in range(17)]), "17 tensors"),
            (st.Tensors([t("x", "uint8", [1], b"\0"), t("x", "uint8", [1], b"\0")]), "two tensors named 'x'"),
            (st.Tensors([t("x", "complex64", [1], b"\0")]), "unknown dtype 'complex64'"),
            (st.Tensors([t("x", "uint8", [2], b"\0")]), r"shape \[2\] of uint8 makes 2 bytes, but its data has 1"),
            (st.Tensors([t("x", "uint8", [-1], b"")]), "dimension 0 is -1"),
            (st.Tensors([t("x", "uint8", [1] * 9, b"\0")]), "rank 9"),
            (st.Tensors([t("x", "uint8", [1 << 20, 1 << 20], b"")]), "more than 67108864 elements"),
            (st.Tensors([t("x", "uint8", [1.0], b"\0")]), "not a list of ints"),
            (st.Image("gif", 1, 1, b"x"), "image format 'gif'"),
            (st.Image("png", 0, 1, b"x"), "image of 0×1 pixels"),
            (st.Image("png", 1, 1, b""), "no bytes"),
            (st.Regions(0, 1), "regions of an image of 0×1"),
            (st.Regions(9, 9, [st.Region(-1, BOX, 0.5)]), r"regions\[0\]: index -1"),
            (st.Regions(9, 9, [st.Region(0, BOX[:3], 0.5)]), "is not four"),
            (st.Regions(9, 9, [st.Region(0, [(float("nan"), 1)] + BOX[1:], 0.5)]), "is not four"),
            (st.Regions(9, 9, [st.Region(0, BOX, 1.5)]), "score 1.5"),
            (st.Regions(9, 9, [st.Region(0, BOX, 0.5, text="Hi", confidence=[1])]), "1 confidences for a text of 2 code points"),
            (st.Regions(9, 9, [st.Region(0, BOX, 0.5, text="H", confidence=[float("inf")])]), "not a finite number"),
            (st.Regions(9, 9, [st.Region(0, BOX, 0.5, st.Crop(2, 1, b"\0" * 5))]), "a crop of 2×1 RGB pixels has 5 bytes, not 6"),
            (st.Regions(9, 9, [st.Region(0, BOX, 0.5, st.Crop(0, 1, b""))]), "is not a Crop of 1 to 16384"),
        ]:
            with self.subTest(want):
                with self.assertRaisesRegex((ValueError, TypeError), want):
                    chunks.encode(c)

    def test_decode_refuses(self):
        tensor = {"kind": "tensor", "tensors": [{"name": "x", "dtype": "float32", "shape": [2, 2]}]}
        reg = {"kind": "regions", "width": 40, "height": 20, "regions": [{"index": 0, "box": [[1, 2], [3, 2], [3, 4], [1, 4]], "score": 0.9, "crop": {"width": 2, "height": 1}}]}

        def edit(h, **kw):
            h = json.loads(json.dumps(h))
            for k, v in kw.items():
                if k == "t":
                    h["tensors"][0].update(v)
                elif k == "r":
                    h["regions"][0].update(v)
                else:
                    h[k] = v
            return h

        for h, n, want in [
            (tensor, 15, "only 15 of the data are left"),
            (tensor, 17, "make 16 bytes, but the data has 17"),
            (edit(tensor, t={"dtype": "complex64"}), 16, "unknown dtype"),
            (edit(tensor, t={"shape": [2, -2]}), 16, "dimension 1 is -2"),
            (edit(tensor, tensors=[]), 0, "no tensors"),
            ({"kind": "image", "format": "gif", "width": 1, "height": 1}, 4, "image format"),
            ({"kind": "image", "format": "png", "width": 1, "height": 1}, 0, "no bytes"),
            (reg, 5, r"regions\[0\]: a crop of 2×1 RGB pixels needs 6 bytes, but only 5"),
            (reg, 7, "the crops make 6 bytes, but the data has 7"),
            (edit(reg, r={"box": [[1, 2], [3, 2], [3, 4]]}), 6, "is not four"),
            (edit(reg, r={"score": 1.5}), 6, "score 1.5"),
            (edit(reg, r={"text": "Hi", "confidence": [1]}), 6, "1 confidences"),
            (edit(reg, width=99999), 6, "regions of an image of 99999×20"),
        ]:
            with self.subTest(want):
                with self.assertRaisesRegex(st.ProtocolError, want):
                    chunks.decode(h, b"\0" * n)

    def test_send_splits_regions(self):
        """A regions chunk whose header passes the limit goes out in several
        messages, each within it, holding all the regions in order."""
        w = Writer()
        j = Job(w, {"type": "job", "job": 5, "window": 1000}, 8, "regions", "regions")
        many = st.Regions(1000, 1000, [st.Region(i, BOX, 0.5, text="line %d %s" % (i, "x" * 40)) for i in range(2000)])
        j.send(many)
        self.assertGreater(len(w.messages), 1)
        got = []
        for header, data in w.messages:
            self.assertLessEqual(len(header), MAX_HEADER)
            got += chunks.decode(json.loads(header), data).regions
        self.assertEqual(got, many.regions)
        # Tensors have no such cut: too large is an error.
        with self.assertRaisesRegex(ValueError, "bytes in one chunk; the limit is"):
            Job(w, {"type": "job", "job": 6}, 8, "tensor", "tensor").send(st.Tensor("x", "uint8", [17 << 20], bytes(17 << 20)))

    def test_send_tensor_alone(self):
        w = Writer()
        Job(w, {"type": "job", "job": 5}, 8, "tensor", "tensor").send(st.Tensor("x", "uint8", [2], b"\x01\x02"))
        self.assertEqual(w.messages, [(b'{"type":"output","job":5,"kind":"tensor","tensors":[{"name":"x","dtype":"uint8","shape":[2]}],"data_length":2}\n', b"\x01\x02")])


if __name__ == "__main__":
    unittest.main()
