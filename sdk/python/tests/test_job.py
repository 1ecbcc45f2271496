"""A job's side of the protocol, in process: the server drives it through
the job's methods, and a fake writer records what it writes."""

import threading
import unittest

import omnistage_stage as st
from omnistage_stage.job import Job


class Writer:
    """Records the messages written."""

    def __init__(self):
        self.lock = threading.Lock()
        self.messages = []

    def write(self, header, data=None):
        with self.lock:
            self.messages.append((bytes(header), bytes(data) if data else b""))


def job(w, window=2, out_window=None):
    msg = {"type": "job", "job": 5, "request_id": "r5", "stage_id": 1, "params": None, "prompt": "Hi."}
    if out_window is not None:
        msg["window"] = out_window
    return Job(w, msg, window, "audio", "audio")


def chunk(rate=16000):
    return {"type": "input", "job": 5, "kind": "audio", "sample_rate": rate}, b"\x01\x00"


class TestJob(unittest.TestCase):
    def test_fields(self):
        j = job(Writer())
        self.assertEqual((j.id, j.request_id, j.stage_id, j.params, j.prompt, j.cancelled), (5, "r5", 1, {}, "Hi.", False))

    def test_input_and_credit(self):
        w = Writer()
        j = job(w, window=2)
        j._on_input(*chunk())
        j._on_input(*chunk())
        with self.assertRaisesRegex(st.ProtocolError, "beyond the credit"):
            j._on_input(*chunk())
        it = j.input()
        self.assertEqual(next(it), st.Audio(16000, b"\x01\x00"))
        self.assertEqual(w.messages, [(b'{"type":"credit","job":5,"chunks":1}\n', b"")])
        next(it)
        j._on_input(*chunk())  # the credit given back makes room
        j._on_input_end()
        self.assertEqual(len(list(it)), 1)
        with self.assertRaisesRegex(st.ProtocolError, "after its input_end"):
            j._on_input(*chunk())

    def test_refused_kind(self):
        j = job(Writer())
        j._on_input({"type": "input", "job": 5, "kind": "text"}, b"hi")
        with self.assertRaisesRegex(st.InputError, "a text chunk, but the stage takes audio"):
            list(j.input())

    def test_output_credit(self):
        w = Writer()
        j = job(w, out_window=1)
        j.send(st.Audio(16000, b"\0\0"))
        sent = threading.Event()
        t = threading.Thread(target=lambda: (j.send(st.Audio(16000, b"", True)), sent.set()))
        t.start()
        self.assertFalse(sent.wait(0.05), "send went on without credit")
        j._on_credit(1)
        self.assertTrue(sent.wait(5))
        t.join()
        self.assertEqual([h for h, _ in w.messages], [
            b'{"type":"output","job":5,"kind":"audio","sample_rate":16000,"data_length":2}\n',
            b'{"type":"output","job":5,"kind":"audio","sample_rate":16000,"end_of_sentence":true}\n'])
        with self.assertRaisesRegex(ValueError, "the stage's output is audio"):
            j.send(st.Text("hi"))

    def test_cancel(self):
        j = job(Writer())
        j._on_input(*chunk())
        j._on_cancel()
        self.assertTrue(j.cancelled)
        self.assertEqual(list(j.input()), [], "input() goes on after a cancel")
        with self.assertRaises(st.Cancelled):
            j.send(st.Audio(16000, b""))
        self.assertEqual(j._end(st.Cancelled("x"), self.fail), b'{"type":"cancelled","job":5}\n')

    def test_cancel_after_the_end(self):
        j = job(Writer())
        self.assertEqual(j._end(None, self.fail), b'{"type":"done","job":5}\n')
        j._on_cancel()
        j._on_shutdown()
        self.assertFalse(j.cancelled, "a cancel crossing the job's end stopped it")

    def test_ends(self):
        logged = []
        for err, want in [
            (st.ParamError("gain", "too loud"), b'{"type":"error","job":5,"code":"bad_params","field":"gain","message":"too loud"}\n'),
            (st.InputError("not 16 kHz"), b'{"type":"error","job":5,"code":"bad_input","message":"not 16 kHz"}\n'),
            (RuntimeError("out of road"), b'{"type":"error","job":5,"code":"failed","message":"out of road"}\n'),
            (st.Cancelled("x"), b'{"type":"error","job":5,"code":"failed","message":"job.send raised Cancelled, but the runtime did not cancel the job"}\n'),
        ]:
            self.assertEqual(job(Writer())._end(err, logged.append), want)
        self.assertEqual(len(logged), 2)  # the failures' tracebacks
        j = job(Writer())
        j._on_shutdown()
        self.assertEqual(j._end(None, self.fail), b'{"type":"error","job":5,"code":"failed","message":"the stage program is shutting down"}\n')


if __name__ == "__main__":
    unittest.main()
