"""Chunks to and from their header fields and data, in process."""

import unittest
from array import array

import omnistage_stage as st
from omnistage_stage import chunks


class TestChunks(unittest.TestCase):
    def round_trip(self, c):
        fields, data = chunks.encode(c)
        return chunks.decode(fields, bytes(data))

    def test_round_trips(self):
        for c in [
            st.Text("Hello there."),
            st.Audio(22050, b"\x01\x00\xff\xff", True),
            st.Words([{"word": "Hi", "char_start": 0, "char_end": 2, "start_ms": 0, "end_ms": 300}]),
            st.Frames("slt", 2, 1, 0.005, array("f", [1, 2, 3, 4]), array("f", [0.5, 0.25])),
            st.Segments("kal", ["pau", "h"], [0.1, 0.2], [False, True], [0.05], [110.0]),
            st.Data("phonemes", b"h@loU", {"alphabet": "x-sampa"}),
        ]:
            self.assertEqual(self.round_trip(c), c)

    def test_frames_from_lists(self):
        c = self.round_trip(st.Frames("slt", 1, 0, 0.005, [1.5, 2.5], []))
        self.assertEqual((list(c.params), len(c)), ([1.5, 2.5], 2))

    def test_audio_from_array(self):
        fields, data = chunks.encode(st.Audio(16000, array("h", [1, -1])))
        self.assertEqual((fields, bytes(data)), ({"kind": "audio", "sample_rate": 16000}, b"\x01\x00\xff\xff"))

    def test_refused(self):
        for c, want in [
            (st.Audio(0, b""), "sample_rate 0"),
            (st.Audio(16000, b"\0"), "not an even number"),
            (st.Frames("v", 2, 1, 0.005, [1, 2, 3], [1]), "not 1 frames"),
            (st.Segments("v", ["a"], [], [True]), "one entry each"),
            (st.Data("k", b"", {str(i): "" for i in range(65)}), "65 entries"),
            (st.Data("k", b"", {"k": 1}), "dict of str to str"),
            (st.Words("hello"), "list of dicts"),
            ("text", "not a chunk"),
        ]:
            with self.assertRaisesRegex((ValueError, TypeError), want):
                chunks.encode(c)

    def test_decode_refuses(self):
        for h, data, want in [
            ({"kind": "audio", "sample_rate": 16000}, b"\0", "not an even number"),
            ({"kind": "text"}, b"\xff", "not UTF-8"),
            ({}, b"", "no kind"),
            ({"kind": "frames", "channels": 2, "str_channels": 1}, b"\0" * 8, "whole number"),
        ]:
            with self.assertRaisesRegex(st.ProtocolError, want):
                chunks.decode(h, data)


if __name__ == "__main__":
    unittest.main()
