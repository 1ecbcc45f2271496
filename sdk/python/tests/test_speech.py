"""The helpers of stages that speak: sentences, PCM in chunks."""

import unittest
from array import array

import omnistage_stage as st


class FakeJob:
    """A job of Text input that records what is sent."""

    def __init__(self, pieces, cancelled=False):
        self.pieces = pieces
        self.cancelled = cancelled
        self.sent = []

    def input(self):
        for p in self.pieces:
            yield st.Text(p)

    def send(self, chunk):
        self.sent.append(chunk)


class TestSentences(unittest.TestCase):
    def test_as_the_text_arrives(self):
        s = st.Sentences()
        self.assertEqual(s.add("Hello the"), [])
        self.assertEqual(s.add("re."), [])  # a sentence has ended at the space after its mark
        self.assertEqual(s.add(" How"), ["Hello there."])
        self.assertEqual(s.add(" are you? Fine!\nAnd "), ["How are you?", "Fine!"])
        self.assertEqual(s.add('he said "no." Then'), ['And he said "no."'])
        self.assertEqual(s.rest(), "Then")
        self.assertEqual(s.rest(), "")

    def test_of_a_job(self):
        self.assertEqual(list(st.sentences(FakeJob(["One. Tw", "o. ", " Three"]))), ["One.", "Two.", "Three"])
        self.assertEqual(list(st.sentences(FakeJob(["One. Two"], cancelled=True))), ["One."])
        self.assertEqual(list(st.sentences(FakeJob(["  ", ""]))), [])


class TestPCM(unittest.TestCase):
    def test_send_pcm(self):
        j = FakeJob([])
        pcm = array("h", range(2500)).tobytes()  # 2 500 samples: 1 000 a chunk at 10 kHz
        st.send_pcm(j, 10000, pcm, end_of_sentence=True)
        self.assertEqual([len(c.pcm) for c in j.sent], [2000, 2000, 1000, 0])
        self.assertEqual(b"".join(bytes(c.pcm) for c in j.sent), pcm)
        self.assertEqual([c.end_of_sentence for c in j.sent], [False, False, False, True])
        self.assertEqual({c.sample_rate for c in j.sent}, {10000})
        with self.assertRaisesRegex(ValueError, "not an even number"):
            st.send_pcm(j, 10000, b"\0")

    def test_pcm16(self):
        self.assertEqual(array("h", st.pcm16([0, 0.5, -1, 2, -3])).tolist(), [0, 16384, -32767, 32767, -32767])


if __name__ == "__main__":
    unittest.main()
