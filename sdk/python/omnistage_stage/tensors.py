"""The tensor kind: named tensors (an element type, a shape, the elements
row-major and little-endian), with NumPy arrays in and out when NumPy is
installed, and the standard library's array.array otherwise."""

import struct
import sys
from array import array

from .errors import ProtocolError

# The element types, named as NumPy names them, and each one's size.
DTYPES = {"float32": 4, "float64": 8, "float16": 2, "int8": 1, "uint8": 1, "int16": 2, "int32": 4, "int64": 8, "bool": 1}

MAX_TENSOR_RANK = 8
MAX_TENSOR_ELEMENTS = 1 << 26
MAX_TENSOR_BYTES = 1 << 28
MAX_TENSORS = 16  # tensors in one chunk

_BIG_ENDIAN = sys.byteorder == "big"


def _typecode(size, codes):
    for c in codes:
        if array(c).itemsize == size:
            return c
    return None


# array.array's typecode of each element type that has one; float16 and
# bool have none (array() gives them as "f" and "B").
_ARRAY_CODES = {"float32": "f", "float64": "d", "int8": "b", "uint8": "B", "int16": "h",
                "int32": _typecode(4, "il"), "int64": _typecode(8, "lq")}
_FROM_ARRAY = {c: d for d, c in _ARRAY_CODES.items() if c}
_FROM_ARRAY.update({c: ("int32" if array(c).itemsize == 4 else "int64") for c in "ilq" if array(c).itemsize in (4, 8)})


class Tensor:
    """One named tensor: dtype (an element type's name: float32, float64,
    float16, int8, uint8, int16, int32, int64 or bool), shape (a list of
    ints, [] for a scalar) and data, its elements row-major, each
    little-endian: bytes, or any bytes-like object (a memoryview,
    bytearray). On input, data is a read-only memoryview.

    Tensor.from_numpy and numpy() convert from and to NumPy arrays;
    Tensor.from_array and array() from and to array.array, with the
    standard library alone."""

    __slots__ = ("name", "dtype", "shape", "data")

    def __init__(self, name, dtype, shape, data):
        self.name = name
        self.dtype = dtype
        self.shape = list(shape)
        self.data = data

    @classmethod
    def from_numpy(cls, name, arr):
        """Returns a tensor named name holding a NumPy array's elements (a
        little-endian, C-ordered copy when arr is not one already); its
        data shares the array's memory otherwise."""
        import numpy as np

        arr = np.asarray(arr)
        dtype = arr.dtype.name
        if dtype not in DTYPES:
            raise TypeError("Tensor.from_numpy: NumPy %s is not a tensor element type (%s)" % (dtype, ", ".join(DTYPES)))
        arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
        return cls(name, dtype, arr.shape, memoryview(arr.reshape(-1)).cast("B"))

    def numpy(self):
        """Returns the tensor as a NumPy array of its shape, in its data's
        memory (read-only when the data is)."""
        import numpy as np

        return np.frombuffer(self.data, dtype=np.dtype(self.dtype).newbyteorder("<")).reshape(self.shape)

    @classmethod
    def from_array(cls, name, shape, a):
        """Returns a tensor named name of shape holding an array.array's
        elements, its element type the array's (array("f"): float32,
        array("B"): uint8, ...)."""
        if not isinstance(a, array) or a.typecode not in _FROM_ARRAY:
            raise TypeError("Tensor.from_array: want an array.array of one of the typecodes %s" % "".join(sorted(_FROM_ARRAY)))
        if _BIG_ENDIAN:
            a = array(a.typecode, a)
            a.byteswap()
        return cls(name, _FROM_ARRAY[a.typecode], shape, a.tobytes())

    def array(self):
        """Returns the elements as an array.array, row-major: float16 as
        array("f"), bool as array("B") of 0 and 1."""
        data = memoryview(self.data).cast("B")
        if self.dtype == "float16":
            return array("f", struct.unpack("<%de" % (len(data) // 2), data))
        code = "B" if self.dtype == "bool" else _ARRAY_CODES.get(self.dtype)
        if code is None:
            raise ValueError("Tensor.array: no array.array holds %s" % self.dtype)
        a = array(code)
        a.frombytes(data)
        if _BIG_ENDIAN:
            a.byteswap()
        return a

    def elements(self):
        """The number of elements its shape makes."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __eq__(self, other):
        return (type(other) is Tensor and (self.name, self.dtype, list(self.shape)) == (other.name, other.dtype, list(other.shape))
                and bytes(self.data) == bytes(other.data))

    def __repr__(self):
        return "Tensor(%r, %r, %r, <%d bytes>)" % (self.name, self.dtype, self.shape, memoryview(self.data).nbytes)


def _elements(shape, where):
    """The element count of shape, checked: a list of at most
    MAX_TENSOR_RANK ints, 0 or more, making at most MAX_TENSOR_ELEMENTS."""
    if not isinstance(shape, (list, tuple)) or not all(type(d) is int for d in shape):
        raise ValueError("%s: shape %r is not a list of ints" % (where, shape))
    if len(shape) > MAX_TENSOR_RANK:
        raise ValueError("%s: rank %d; the limit is %d" % (where, len(shape), MAX_TENSOR_RANK))
    n = 1
    for i, d in enumerate(shape):
        if d < 0:
            raise ValueError("%s: dimension %d is %d; dimensions are 0 or more" % (where, i, d))
        n *= d
    if n > MAX_TENSOR_ELEMENTS:
        raise ValueError("%s: shape %r has more than %d elements" % (where, list(shape), MAX_TENSOR_ELEMENTS))
    return n


def _size(dtype, shape, where):
    if dtype not in DTYPES:
        raise ValueError("%s: unknown dtype %r" % (where, dtype))
    return _elements(shape, where) * DTYPES[dtype]


def encode(tensors):
    """Returns the header fields and data of a list of Tensor (a tensor
    chunk's): a ValueError or TypeError says what is wrong with it."""
    if not tensors:
        raise ValueError("Tensors: no tensors")
    if len(tensors) > MAX_TENSORS:
        raise ValueError("Tensors: %d tensors; the limit is %d" % (len(tensors), MAX_TENSORS))
    fields, parts, names = [], [], set()
    for t in tensors:
        if type(t) is not Tensor:
            raise TypeError("Tensors: %r is not a Tensor" % (t,))
        if not isinstance(t.name, str):
            raise TypeError("Tensor.name must be a str, not %s" % type(t.name).__name__)
        if t.name in names:
            raise ValueError("Tensors: two tensors named %r" % t.name)
        names.add(t.name)
        where = "tensor %r" % t.name
        want = _size(t.dtype, t.shape, where)
        try:
            data = memoryview(t.data).cast("B")
        except TypeError:
            raise TypeError("%s: data must be bytes-like, not %s" % (where, type(t.data).__name__)) from None
        if len(data) != want:
            raise ValueError("%s: shape %r of %s makes %d bytes, but its data has %d" % (where, list(t.shape), t.dtype, want, len(data)))
        fields.append({"name": t.name, "dtype": t.dtype, "shape": list(t.shape)})
        parts.append(data)
    return {"kind": "tensor", "tensors": fields}, parts[0] if len(parts) == 1 else b"".join(parts)


def decode(h, data):
    """Returns the tensors of a tensor chunk's header h and data, each
    one's data a memoryview of data; a chunk that does not fit its kind is
    a ProtocolError."""
    fields = h.get("tensors")
    if not isinstance(fields, list) or not fields:
        raise ProtocolError("tensor chunk: no tensors")
    if len(fields) > MAX_TENSORS:
        raise ProtocolError("tensor chunk: %d tensors; the limit is %d" % (len(fields), MAX_TENSORS))
    view = memoryview(data).toreadonly()
    out, names, at = [], set(), 0
    for f in fields:
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            raise ProtocolError("tensor chunk: a tensor %r without a name" % (f,))
        name, dtype, shape = f["name"], f.get("dtype"), f.get("shape", [])
        if name in names:
            raise ProtocolError("tensor chunk: two tensors named %r" % name)
        names.add(name)
        try:
            n = _size(dtype, shape, "tensor %r" % name)
        except ValueError as e:
            raise ProtocolError("tensor chunk: %s" % e) from None
        if n > len(data) - at:
            raise ProtocolError("tensor chunk: tensor %r: shape %r of %s makes %d bytes, but only %d of the data are left for it"
                                % (name, shape, dtype, n, len(data) - at))
        out.append(Tensor(name, dtype, shape, view[at:at + n]))
        at += n
    if at != len(data):
        raise ProtocolError("tensor chunk: the tensors' shapes make %d bytes, but the data has %d" % (at, len(data)))
    return out
