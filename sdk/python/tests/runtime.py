"""A tiny runtime for the tests: it starts a stage program and speaks the
stage protocol with it, raw, over its standard input and output."""

import json
import os
import queue
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SDK = os.path.dirname(HERE)

# TIMEOUT bounds every wait for the program: long enough for a slow, shared
# machine, short enough for a broken test to fail rather than hang.
TIMEOUT = 15


class Runtime:
    """One stage program, started from tests/<script> with args."""

    def __init__(self, script, *args):
        env = dict(os.environ, PYTHONPATH=SDK)
        path = script if os.path.isabs(script) else os.path.join(HERE, script)
        self.proc = subprocess.Popen([sys.executable, path, *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.messages = queue.Queue()
        self._peeked = []  # a message quiet took, for the next recv
        self._stderr = []
        self._stderr_lock = threading.Lock()
        self._threads = [threading.Thread(target=self._read, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for t in self._threads:
            t.start()

    def _read(self):
        out = self.proc.stdout
        while True:
            line = out.readline()
            if not line:
                self.messages.put(None)
                return
            try:
                h = json.loads(line)
            except ValueError:
                self.messages.put(("garbage", line))
                continue
            data = out.read(h.get("data_length", 0)) if h.get("data_length") else b""
            self.messages.put((h, data))

    def _read_stderr(self):
        for line in self.proc.stderr:
            with self._stderr_lock:
                self._stderr.append(line.decode("utf-8", "replace"))

    def stderr(self):
        with self._stderr_lock:
            return "".join(self._stderr)

    def wait_stderr(self, text, timeout=TIMEOUT):
        """Waits until the program has written text on its standard error."""
        deadline = time.monotonic() + timeout
        while text not in self.stderr():
            if time.monotonic() > deadline:
                raise AssertionError("the program has not written %r on its stderr:\n%s" % (text, self.stderr()))
            time.sleep(0.001)

    def send(self, type, data=b"", **fields):
        """Writes a message of type with fields and data."""
        h = dict(type=type, **fields)
        if data:
            h["data_length"] = len(data)
        self.write(json.dumps(h).encode() + b"\n" + data)

    def write(self, raw):
        self.proc.stdin.write(raw)
        self.proc.stdin.flush()

    def recv(self, timeout=TIMEOUT):
        """Returns the program's next message (header, data); None once its
        output has ended."""
        try:
            m = self._peeked.pop() if self._peeked else self.messages.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no message from the program within %s s; its stderr:\n%s" % (timeout, self.stderr()))
        if m is not None and m[0] == "garbage":
            raise AssertionError("the program wrote %r, not a header" % (m[1],))
        return m

    def expect(self, type, **fields):
        """Reads the next message and checks its type and fields; returns
        (header, data)."""
        m = self.recv()
        if m is None:
            raise AssertionError("the program ended its output; want %s; its stderr:\n%s" % (type, self.stderr()))
        h, data = m
        want = dict(type=type, **fields)
        got = {k: h.get(k) for k in want}
        if got != want:
            raise AssertionError("message %s; want %s" % (h, want))
        return h, data

    def quiet(self, timeout):
        """Reports whether the program sends nothing for timeout seconds."""
        if self._peeked:
            return False
        try:
            self._peeked.append(self.messages.get(timeout=timeout))
        except queue.Empty:
            return True
        return False

    def start(self):
        """Reads hello, warms the program and waits for ready; returns
        hello."""
        hello, _ = self.expect("hello", protocol=1)
        self.send("warm", config={})
        self.expect("ready")
        return hello

    def wait(self, timeout=TIMEOUT):
        """Waits for the program to exit and returns its status; stderr then
        holds all it wrote there."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("the program did not exit within %s s; its stderr:\n%s" % (timeout, self.stderr()))
        self._threads[1].join(timeout)  # the whole of its stderr
        return code

    def close(self):
        """Stops the program: it is killed if it still runs."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for t in self._threads:
            t.join(TIMEOUT)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass


def pcm(*samples):
    """The 16-bit little-endian PCM of samples."""
    return b"".join(int(s).to_bytes(2, "little", signed=True) for s in samples)
