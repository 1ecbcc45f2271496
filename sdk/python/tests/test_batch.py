"""Batches over pipes: a stage with process_batch (batcher.py) says so in
hello and answers each job of a batch message on its own."""

import json
import unittest

from runtime import Runtime, pcm


def batch(rt, jobs, window=8):
    """Sends a batch message of jobs, each (job, params, sample rate,
    samples) or (job, params, kind, data)."""
    entries, data = [], b""
    for job, params, kind, body in jobs:
        e = {"job": job, "request_id": "r%d" % job, "stage_id": 1, "params": params, "prompt": ""}
        if isinstance(kind, int):
            e.update(kind="audio", sample_rate=kind)
            body = pcm(*body)
        else:
            e["kind"] = kind
        if body:
            e["data_length"] = len(body)
        entries.append(e)
        data += body
    h = {"type": "batch", "window": window, "jobs": entries}
    if data:
        h["data_length"] = len(data)
    rt.write(json.dumps(h).encode() + b"\n" + data)


def ends(rt, n):
    """Reads messages until n jobs have ended; returns {job: (outputs'
    data, end)}."""
    out = {}
    done = {}
    while len(done) < n:
        m = rt.recv()
        if m is None:
            raise AssertionError("the program ended its output; stderr:\n" + rt.stderr())
        h, data = m
        if h["type"] == "output":
            out.setdefault(h["job"], []).append(data)
        elif h["type"] == "credit":
            raise AssertionError("credit for a job of a batch: %s" % h)
        else:
            done[h["job"]] = h
    return {j: (out.get(j, []), done[j]) for j in done}


class TestBatch(unittest.TestCase):
    def launch(self, *args):
        self.rt = Runtime("batcher.py", *args)
        self.addCleanup(self.rt.close)
        return self.rt.start()

    def test_hello(self):
        hello = self.launch()
        self.assertEqual((hello["max_batch"], hello["max_jobs"]), (4, 2))
        # A stage without process_batch says nothing of batches.
        rt = Runtime("gain.py")
        self.addCleanup(rt.close)
        self.assertNotIn("max_batch", rt.start())

    def test_each_job_its_own(self):
        self.launch()
        batch(self.rt, [(1, {"gain": 2}, 16000, [1, 2]), (2, None, 8000, [5]), (3, {"gain": 9}, 16000, [1]),
                        (4, {"gain": 3}, "text", b"Hi."), (5, {"gain": 0.5}, 16000, [10])])
        got = ends(self.rt, 5)
        self.assertEqual(got[1], ([pcm(2, 4)], {"type": "done", "job": 1}))
        self.assertEqual(got[2], ([], {"type": "error", "job": 2, "code": "bad_input", "message": "want 16000 Hz, got 8000"}))
        self.assertEqual(got[3], ([], {"type": "error", "job": 3, "code": "bad_params", "field": "gain", "message": "must be between 0 and 4"}))
        self.assertEqual(got[4], ([], {"type": "error", "job": 4, "code": "bad_input", "message": "a text chunk, but the stage takes audio"}))
        self.assertEqual(got[5], ([pcm(5)], {"type": "done", "job": 5}))
        # Jobs 3 and 4 fail before the call: it gets the other three.
        self.rt.wait_stderr("batch of 3")

    def test_raise_fails_every_job(self):
        self.launch("raise")
        batch(self.rt, [(1, {"gain": 2}, 16000, [1]), (2, {"gain": 0}, 16000, [1])])
        got = ends(self.rt, 2)
        for j in (1, 2):
            self.assertEqual((got[j][1]["code"], got[j][1]["message"]), ("failed", "a gain of 0 breaks the whole batch"))
        # The program goes on.
        batch(self.rt, [(3, None, 16000, [7])])
        self.assertEqual(ends(self.rt, 1)[3], ([pcm(7)], {"type": "done", "job": 3}))

    def test_output_beyond_the_window(self):
        self.launch("many")
        batch(self.rt, [(1, None, 16000, [1])])
        outs, end = ends(self.rt, 1)[1]
        self.assertEqual(len(outs), 8)
        self.assertEqual((end["code"], end["message"]), ("failed", "job.send: a job of a batch sends at most 8 output chunks"))

    def test_cancel(self):
        self.launch()
        batch(self.rt, [(1, None, 16000, [1])])
        self.rt.send("cancel", job=1)
        # The job ended first (done, with its output), or the cancel came
        # first (cancelled): before or after the job's output was sent, which
        # the runtime then drops.
        outs, end = ends(self.rt, 1)[1]
        self.assertIn((len(outs), end["type"]), [(1, "done"), (0, "cancelled"), (1, "cancelled")])

    def test_malformed_batch(self):
        for h, data, want in [
            ({"type": "batch", "jobs": [{"job": 1, "kind": "audio", "sample_rate": 16000, "data_length": 4}], "data_length": 2}, b"\0\0", "announces 4 bytes of data, of 2 left"),
            ({"type": "batch", "jobs": [{"job": 1, "kind": "audio", "sample_rate": 16000}], "data_length": 2}, b"\0\0", "announce 0 bytes of data, but the message has 2"),
            ({"type": "batch", "jobs": []}, b"", "want a list of jobs"),
            ({"type": "batch", "jobs": [{"job": "1", "kind": "text"}]}, b"", "with job '1'"),
        ]:
            with self.subTest(want):
                self.launch()
                self.rt.write(json.dumps(h).encode() + b"\n" + data)
                self.assertEqual(self.rt.wait(), 2)
                self.assertIn(want, self.rt.stderr())
                self.rt.close()


if __name__ == "__main__":
    unittest.main()
