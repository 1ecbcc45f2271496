"""The protocol's constants and its framing: a header line of JSON, then
the data it announces; read from the runtime on one thread, written by
any thread, a message at a time."""

import json
import os
import threading

from .chunks import nbytes
from .errors import ProtocolError

PROTOCOL_VERSION = 1  # the version of the stage protocol the SDK speaks

MAX_HEADER = 64 << 10  # a header line, its line feed included
MAX_DATA = 16 << 20  # the data of one message

DEFAULT_MAX_JOBS = 1  # hello's max_jobs, when a stage sets none
DEFAULT_WINDOW = 8  # a window of credit, when a message gives none
DEFAULT_MAX_BATCH = 64  # hello's max_batch of a stage that takes batches and sets none


def credit_batch(window):
    """How many chunks of a window a side takes in before it gives credit
    back: half of it (as the runtime does), so that the other side never
    waits long and a credit message serves several chunks."""
    return max(window // 2, 1)


class Reader:
    """Reads the runtime's messages from a binary file (a BufferedReader:
    readline and read(n)). Not safe for concurrent use."""

    def __init__(self, f):
        self._readline = f.readline
        self._read = f.read

    def read(self):
        """Returns the next message's header (a dict with a str "type") and
        its data (bytes, b"" when there is none), or (None, b"") at the end
        of the stream. A malformed message is a ProtocolError."""
        line = self._readline(MAX_HEADER)
        if not line:
            return None, b""
        if line[-1] != 10:
            if len(line) >= MAX_HEADER:
                raise ProtocolError("a header line is longer than %d bytes" % MAX_HEADER)
            raise ProtocolError("the runtime's messages end inside a header")
        try:
            h = json.loads(line)
        except ValueError as e:
            raise ProtocolError("header %s is not a JSON object: %s" % (_short(line), e)) from None
        if type(h) is not dict:
            raise ProtocolError("header %s is not a JSON object" % _short(line))
        t = h.get("type")
        if type(t) is not str or not t:
            raise ProtocolError("header %s has no type" % _short(line))
        n = h.get("data_length")
        if n is None or n == 0:
            return h, b""
        if type(n) is not int or n < 0:
            raise ProtocolError("%s message announces %r bytes of data" % (t, n))
        if n > MAX_DATA:
            raise ProtocolError("%s message announces %d bytes of data; the limit is %d" % (t, n, MAX_DATA))
        data = self._read(n)
        if len(data) != n:
            raise ProtocolError("%s message's data ends after %d of its %d bytes" % (t, len(data), n))
        return h, data


def _short(line):
    s = line[:120].decode("utf-8", "replace").rstrip("\n")
    return repr(s + "..." if len(line) > 120 else s)


class Writer:
    """Writes messages to a file descriptor, each whole with one system
    call (no buffer to flush). Safe for concurrent use. After a failed
    write, every write raises that error."""

    def __init__(self, fd):
        self._fd = fd
        self._lock = threading.Lock()
        self._err = None

    def write(self, header, data=None):
        """Writes the message of header, a JSON object's bytes ending in a
        line feed (data_length included when data is not empty), and data,
        a bytes-like object."""
        with self._lock:
            if self._err is not None:
                raise self._err
            try:
                if data:
                    want = len(header) + nbytes(data)
                    n = os.writev(self._fd, (header, data))
                    if n != want:
                        self._rest(memoryview(header + bytes(data))[n:])
                else:
                    n = os.write(self._fd, header)
                    if n != len(header):
                        self._rest(memoryview(header)[n:])
            except OSError as e:
                self._err = e
                raise

    def _rest(self, b):
        while b:
            b = b[os.write(self._fd, b):]
