"""The SDK over pipes: each test starts a stage program and plays the
runtime's side of the stage protocol with it (runtime.Runtime)."""

import os
import re
import unittest

from runtime import SDK, TIMEOUT, Runtime, pcm


def audio(rt, job, samples, rate=16000, **fields):
    rt.send("input", job=job, kind="audio", sample_rate=rate, data=pcm(*samples), **fields)


def collect(rt, jobs, window=8):
    """Reads the messages of jobs until each has ended, giving output
    credit back as the runtime does; returns {job: (outputs, credit the
    program gave, its end message)}."""
    outs = {j: [] for j in jobs}
    credit = {j: 0 for j in jobs}
    taken = {j: 0 for j in jobs}
    ends = {}
    while len(ends) < len(jobs):
        m = rt.recv()
        if m is None:
            raise AssertionError("the program ended its output; stderr:\n" + rt.stderr())
        h, data = m
        j = h.get("job")
        if j not in outs or j in ends:
            raise AssertionError("message %s of no running job" % h)
        if h["type"] == "output":
            outs[j].append((h, data))
            taken[j] += 1
            if taken[j] >= window // 2:
                rt.send("credit", job=j, chunks=taken[j])
                taken[j] = 0
        elif h["type"] == "credit":
            credit[j] += h["chunks"]
        else:
            ends[j] = h
    return {j: (outs[j], credit[j], ends[j]) for j in jobs}


class Case(unittest.TestCase):
    def launch(self, script, *args):
        """Starts tests/script with args as self.rt, stopped when the test
        ends."""
        self.rt = Runtime(script, *args)
        self.addCleanup(self.rt.close)

    def run_job(self, job, chunks, params=None, window=8):
        """Runs one job with chunks (lists of samples) as its input and
        returns its outputs and end."""
        self.rt.send("job", job=job, request_id="r%d" % job, stage_id=2, params=params, prompt="Hi.", window=window)
        for c in chunks:
            audio(self.rt, job, c)
        self.rt.send("input_end", job=job)
        outs, _, end = collect(self.rt, [job], window)[job]
        return outs, end


class TestGain(Case):
    def setUp(self):
        self.launch("gain.py")

    def test_hello(self):
        hello = self.rt.start()
        self.assertEqual(hello["name"], "gain")
        self.assertEqual((hello["input"], hello["output"], hello["max_jobs"], hello["window"]), ("audio", "audio", 4, 8))
        self.assertEqual(hello["params"], {"gain": {"type": "number", "description": "a factor from 0 to 4"}})

    def test_job(self):
        self.rt.start()
        outs, end = self.run_job(1, [[1, 2, 3], [-4, 30000]], params={"gain": 2})
        self.assertEqual(end, {"type": "done", "job": 1})
        self.assertEqual([d for _, d in outs], [pcm(2, 4, 6), pcm(-8, 32767)])
        self.assertEqual(outs[0][0], {"type": "output", "job": 1, "kind": "audio", "sample_rate": 16000, "data_length": 6})
        # The end of a sentence, and defaults for null params.
        self.rt.send("job", job=2, request_id="r2", stage_id=2, params=None, prompt="", window=8)
        audio(self.rt, 2, [], end_of_sentence=True)
        self.rt.send("input_end", job=2)
        outs, _, end = collect(self.rt, [2])[2]
        self.assertEqual(end["type"], "done")
        self.assertEqual(outs, [({"type": "output", "job": 2, "kind": "audio", "sample_rate": 16000, "end_of_sentence": True}, b"")])

    def test_check(self):
        self.rt.start()
        for params, error in [({"gain": 3}, None), ({"gain": 9}, {"field": "gain", "reason": "must be between 0 and 4"}),
                              (None, None), ([1], {"field": "", "reason": "want an object of params"})]:
            self.rt.send("check", id=7, params=params)
            h, _ = self.rt.expect("checked", id=7)
            self.assertEqual(h.get("error"), error, params)

    def test_bad_params_fail_the_job(self):
        self.rt.start()
        _, end = self.run_job(1, [[1]], params={"gain": -1})
        self.assertEqual(end, {"type": "error", "job": 1, "code": "bad_params", "field": "gain", "message": "must be between 0 and 4"})

    def test_input_of_another_kind(self):
        self.rt.start()
        self.rt.send("job", job=1, request_id="r1", stage_id=2, params=None, prompt="", window=8)
        self.rt.send("input", job=1, kind="text", data=b"Hi.")
        self.rt.expect("error", job=1, code="bad_input", message="a text chunk, but the stage takes audio")

    def test_output_waits_for_credit(self):
        self.rt.start()
        self.rt.send("job", job=1, request_id="r1", stage_id=2, params=None, prompt="", window=2)
        for i in range(6):
            audio(self.rt, 1, [i])
        self.rt.expect("output", job=1)
        self.rt.expect("output", job=1)
        # Its credit spent, the job sends nothing more (and so takes no
        # more input: no credit for it either) until it gets credit.
        self.assertTrue(self.rt.quiet(0.2), "output beyond the credit")
        self.rt.send("credit", job=1, chunks=1)
        self.rt.expect("output", job=1)
        # It has taken 4 chunks: half the window of 8, credited at once.
        h, _ = self.rt.recv()
        self.assertEqual(h, {"type": "credit", "job": 1, "chunks": 4})
        self.rt.send("credit", job=1, chunks=3)
        self.rt.send("input_end", job=1)
        outs, credit, end = collect(self.rt, [1], window=2)[1]
        self.assertEqual((len(outs), end["type"]), (3, "done"))

    def test_input_credit(self):
        self.rt.start()
        # 30 chunks through a window of 8: the runtime sends only against
        # the credit the program gives back.
        self.rt.send("job", job=1, request_id="r1", stage_id=2, params=None, prompt="", window=8)
        credit, sent, outs, taken = 8, 0, 0, 0
        while outs < 30:
            while credit and sent < 30:
                audio(self.rt, 1, [sent])
                sent, credit = sent + 1, credit - 1
            if sent == 30:
                self.rt.send("input_end", job=1)
                sent += 1
            h, data = self.rt.recv()
            if h["type"] == "credit":
                self.assertEqual(h["chunks"], 4)
                credit += h["chunks"]
                continue
            self.assertEqual((h["type"], data), ("output", pcm(outs)))
            outs, taken = outs + 1, taken + 1
            if taken == 4:
                self.rt.send("credit", job=1, chunks=4)
                taken = 0
        self.rt.expect("done", job=1)

    def test_jobs_interleave(self):
        self.rt.start()
        for j in (1, 2, 3):
            self.rt.send("job", job=j, request_id="r", stage_id=2, params={"gain": j}, prompt="", window=8)
        for k in range(5):
            for j in (1, 2, 3):
                audio(self.rt, j, [k])
        for j in (1, 2, 3):
            self.rt.send("input_end", job=j)
        res = collect(self.rt, [1, 2, 3])
        for j in (1, 2, 3):
            outs, _, end = res[j]
            self.assertEqual(end["type"], "done")
            self.assertEqual([d for _, d in outs], [pcm(j * k) for k in range(5)])

    def test_cancel_after_done(self):
        self.rt.start()
        self.run_job(1, [[1]])
        # The job has ended: a cancel crossing its done gets no answer, and
        # input for it is dropped.
        self.rt.send("cancel", job=1)
        audio(self.rt, 1, [2])
        self.rt.send("check", id=1, params={})
        self.rt.expect("checked", id=1)

    def test_unknown_types_are_ignored(self):
        self.rt.start()
        self.rt.send("future", job=1, data=b"xyz")
        self.rt.send("check", id=2, params={})
        self.rt.expect("checked", id=2)

    def test_shutdown(self):
        self.rt.start()
        self.rt.send("shutdown")
        self.assertEqual(self.rt.wait(), 0)

    def test_eof(self):
        self.rt.start()
        self.rt.proc.stdin.close()
        self.assertEqual(self.rt.wait(), 0)

    def test_tutorial_is_this_stage(self):
        """docs/sdk-python.md's first program is gain.py, which these tests run."""
        with open(os.path.join(SDK, "..", "..", "docs", "sdk-python.md")) as f:
            doc = f.read()
        m = re.search(r"```python\n(.*?)```", doc, re.S)
        self.assertIsNotNone(m, "no python block in docs/sdk-python.md")
        with open(os.path.join(os.path.dirname(__file__), "gain.py")) as f:
            self.assertEqual(m.group(1), f.read())


class TestMalformed(Case):
    def setUp(self):
        self.launch("gain.py")

    def check_exit(self, raw, want, start=True):
        if start:
            self.rt.start()
        try:
            self.rt.write(raw)
            self.rt.proc.stdin.close()
        except BrokenPipeError:
            pass  # it stopped reading at the malformed header
        self.assertEqual(self.rt.wait(), 2)
        self.assertIn(want, self.rt.stderr())

    def test_not_json(self):
        self.check_exit(b"this is not a header\n", "is not a JSON object")

    def test_no_type(self):
        self.check_exit(b'{"job": 1}\n', "has no type")

    def test_data_ends_early(self):
        self.check_exit(b'{"type":"input","job":1,"data_length":10}\nabc', "ends after 3 of its 10 bytes")

    def test_header_too_long(self):
        self.check_exit(b'{"type":"x","pad":"' + b"a" * (64 << 10) + b'"}\n', "longer than 65536 bytes")

    def test_bad_chunk(self):
        self.rt.start()
        self.rt.send("job", job=1, request_id="r", stage_id=2, params=None, prompt="", window=8)
        self.check_exit(b'{"type":"input","job":1,"kind":"audio","sample_rate":0}\n', "job 1: audio chunk: sample_rate 0", start=False)


class TestBehave(Case):
    def start_with(self, mode):
        self.launch("behave.py", mode)
        self.rt.start()

    def test_concurrent_jobs(self):
        # Each job waits until another runs: both end only if they run at once.
        self.start_with("pair")
        for j in (1, 2):
            self.rt.send("job", job=j, request_id="r", stage_id=2, params=None, prompt="", window=8)
            audio(self.rt, j, [j])
            self.rt.send("input_end", job=j)
        res = collect(self.rt, [1, 2])
        self.assertEqual([res[j][2]["type"] for j in (1, 2)], ["done", "done"])

    def test_job_threads_are_reused(self):
        # One job after another runs on the one thread started for the first.
        self.start_with("threads")
        for j in (1, 2, 3):
            _, end = self.run_job(j, [[j]])
            self.assertEqual(end["type"], "done")
            self.rt.wait_stderr("job %d on thread" % j)
        threads = set(re.findall(r"job \d on thread (\d+)", self.rt.stderr()))
        self.assertEqual(len(threads), 1, self.rt.stderr())

    def test_input_beyond_credit(self):
        # The job takes no input while it waits for a pair: the 9th chunk
        # is past the window of 8.
        self.start_with("pair")
        self.rt.send("job", job=1, request_id="r", stage_id=2, params=None, prompt="", window=8)
        for i in range(9):
            audio(self.rt, 1, [i])
        self.assertEqual(self.rt.wait(), 2)
        self.assertIn("input for job 1 beyond the credit the program gave", self.rt.stderr())

    def test_cancel(self):
        self.start_with("stall")
        self.rt.send("job", job=1, request_id="r", stage_id=2, params=None, prompt="", window=8)
        audio(self.rt, 1, [1])
        audio(self.rt, 1, [2])
        self.rt.expect("output", job=1)
        self.rt.send("cancel", job=1)
        self.rt.expect("cancelled", job=1)
        self.rt.wait_stderr("stalled job 1: input ended, cancelled True, send raised Cancelled")
        # Input for the cancelled job is dropped; the program keeps serving.
        audio(self.rt, 1, [3])
        outs, end = self.run_job(2, [])
        self.assertEqual(end["type"], "done")

    def test_shutdown_cancels_running_jobs(self):
        self.start_with("stall")
        self.rt.send("job", job=1, request_id="r", stage_id=2, params=None, prompt="", window=8)
        audio(self.rt, 1, [1])
        self.rt.expect("output", job=1)
        self.rt.send("shutdown")
        self.assertEqual(self.rt.wait(), 0)
        self.assertIn("stalled job 1: input ended, cancelled True, send raised Cancelled", self.rt.stderr())

    def test_close_after_the_jobs(self):
        # close comes once the running job has returned, before the exit.
        self.start_with("stall")
        self.rt.send("job", job=1, request_id="r", stage_id=2, params=None, prompt="", window=8)
        audio(self.rt, 1, [1])
        self.rt.expect("output", job=1)
        self.rt.send("shutdown")
        self.assertEqual(self.rt.wait(), 0)
        err = self.rt.stderr()
        self.assertRegex(err, r"(?s)stalled job 1: .*closed behave-stall")
        self.assertEqual(err.count("closed behave-stall"), 1)

    def test_close_at_the_end_of_input(self):
        self.start_with("fail")
        self.rt.proc.stdin.close()
        self.assertEqual(self.rt.wait(), 0)
        self.assertIn("closed behave-fail", self.rt.stderr())

    def test_no_close_without_warm(self):
        self.launch("behave.py", "refuse")
        self.rt.expect("hello")
        self.rt.send("warm", config={})
        self.rt.expect("error", message="no model here")
        self.rt.send("shutdown")
        self.assertEqual(self.rt.wait(), 0)
        self.assertNotIn("closed", self.rt.stderr())

    def test_no_close_after_a_protocol_break(self):
        self.start_with("fail")
        self.rt.write(b"not a header\n")
        self.assertEqual(self.rt.wait(), 2)
        self.assertNotIn("closed", self.rt.stderr())

    def test_exception_fails_one_job(self):
        self.start_with("fail")
        _, end = self.run_job(1, [[1], [2]])
        self.assertEqual(end, {"type": "error", "job": 1, "code": "failed", "message": "the model ran out of road"})
        self.rt.wait_stderr("RuntimeError: the model ran out of road")
        self.assertRegex(self.rt.stderr(), r"(?s)job 1 \(request r1\) failed:\nTraceback.*RuntimeError: the model ran out of road")
        outs, end = self.run_job(2, [[5]])
        self.assertEqual((len(outs), end["type"]), (1, "done"))

    def test_bad_input(self):
        self.start_with("badinput")
        self.rt.send("job", job=1, request_id="r", stage_id=2, params=None, prompt="", window=8)
        audio(self.rt, 1, [1], rate=22050)
        self.rt.expect("error", job=1, code="bad_input", message="want 16000 Hz, got 22050")

    def test_refuse_to_warm(self):
        self.launch("behave.py", "refuse")
        self.rt.expect("hello")
        self.rt.send("warm", config={})
        self.rt.expect("error", message="no model here")

    def test_warm_config(self):
        self.launch("behave.py", "config")
        self.rt.expect("hello")
        self.rt.send("warm", config={"rate": 8000})
        self.rt.expect("ready")
        outs, _ = self.run_job(1, [[1]])
        self.assertEqual(outs[0][0]["sample_rate"], 8000)

    def test_print_goes_to_stderr(self):
        self.start_with("noisy")
        outs, end = self.run_job(1, [[1], [2]])
        self.assertEqual((len(outs), end["type"]), (2, "done"))
        for want in ("warming, on stdout", "warming, on descriptor 1", "chunk 1 on stdout", "chunk on descriptor 1"):
            self.rt.wait_stderr(want)


class TestKinds(Case):
    """Each kind's chunks go through an echo stage unchanged."""

    def echo(self, kind, header, data=b""):
        self.launch("echo.py", kind)
        self.rt.start()
        self.rt.send("job", job=1, request_id="r", stage_id=2, params=None, prompt="", window=8)
        self.rt.send("input", job=1, kind=kind, data=data, **header)
        self.rt.send("input_end", job=1)
        outs, _, end = collect(self.rt, [1])[1]
        self.assertEqual(end["type"], "done", self.rt.stderr())
        h, got = outs[0]
        want = dict(type="output", job=1, kind=kind, **header)
        if data:
            want["data_length"] = len(data)
        self.assertEqual(h, want)
        self.assertEqual(got, data)

    def test_text(self):
        self.echo("text", {}, "Grüße.".encode())

    def test_timestamps(self):
        self.echo("timestamps", {"words": [{"word": "Hi", "char_start": 0, "char_end": 2, "start_ms": 0, "end_ms": 310, "spoken": ["hi"]}]})

    def test_frames(self):
        import struct
        data = struct.pack("<6f", 1, 2, 3, 4, 0.5, 0.25)  # two frames of 2 params, then 2 strengths of 1
        self.echo("frames", {"voice": "slt", "channels": 2, "str_channels": 1, "frame_shift": 0.005}, data)

    def test_segments(self):
        self.echo("segments", {"voice": "kal", "names": ["pau", "h"], "ends": [0.1, 0.2], "cluster": [False, True],
                               "target_pos": [0.05], "target_f0": [110.0]})

    def test_declared_kind(self):
        self.echo("phonemes", {"meta": {"alphabet": "ipa"}}, "həˈloʊ".encode())


if __name__ == "__main__":
    unittest.main()
