"""``tensorflow.TensorProto`` <-> NumPy without TensorFlow (``tf.make_ndarray`` and
``tf.make_tensor_proto``'s rules for the dtypes a served signature uses).

A request tensor is read from ``tensor_content`` (little-endian bytes) or from the typed
``*_val`` field, with TF's rule that fewer values than the shape holds are completed by
repeating the last one (``tf.make_ndarray``; ``[]`` with elements to fill gives zeros).
Numeric outputs are written as ``tensor_content`` (one copy of the array's bytes, what TF
Serving's ``AsProtoTensorContent`` writes), strings as ``string_val``.
"""

import math

import numpy as np

from estimator.serve._protos import messages


class TensorError(ValueError):
    """A ``TensorProto`` that cannot be read (answered as INVALID_ARGUMENT)."""


# DataType name -> (NumPy dtype, the TensorProto field holding its values).
_TYPES = {
    "DT_FLOAT": (np.float32, "float_val"),
    "DT_DOUBLE": (np.float64, "double_val"),
    "DT_INT32": (np.int32, "int_val"),
    "DT_UINT8": (np.uint8, "int_val"),
    "DT_INT16": (np.int16, "int_val"),
    "DT_INT8": (np.int8, "int_val"),
    "DT_UINT16": (np.uint16, "int_val"),
    "DT_INT64": (np.int64, "int64_val"),
    "DT_UINT32": (np.uint32, "uint32_val"),
    "DT_UINT64": (np.uint64, "uint64_val"),
    "DT_BOOL": (np.bool_, "bool_val"),
    "DT_HALF": (np.float16, "half_val"),
    "DT_STRING": (object, "string_val"),
}
_BY_NUMPY = {np.dtype(d).name: name for name, (d, _) in _TYPES.items() if d is not object}
# A typed field's own element type: values are read as it, then cast as TF's ``static_cast``
# (an ``int_val`` of 300 is 44 as DT_UINT8), so no value is out of range for NumPy.
_FIELDS = {
    "float_val": np.float32,
    "double_val": np.float64,
    "int_val": np.int32,
    "int64_val": np.int64,
    "uint32_val": np.uint32,
    "uint64_val": np.uint64,
    "bool_val": np.bool_,
    "half_val": np.int32,
}


def dtype_name(number: int) -> str:
    """``1`` -> ``"DT_FLOAT"`` (or ``"DataType(n)"`` for numbers outside the enum)."""
    value = messages.DataType.values_by_number.get(number)
    return value.name if value is not None else f"DataType({number})"


def data_type(name: str) -> int:
    """A manifest dtype (``"float32"``, ``"string"``) -> its ``tensorflow.DataType`` number."""
    key = "DT_STRING" if name == "string" else _BY_NUMPY.get(name)
    if key is None:
        raise TensorError(f"dtype {name!r} has no TensorProto DataType.")
    return messages.DataType.values_by_name[key].number


def short_name(name: str) -> str:
    """``"DT_FLOAT"`` -> ``"float"`` (as TF's errors name dtypes)."""
    return name[3:].lower() if name.startswith("DT_") else name


MAX_RANK = 64  # NumPy's most dimensions
_INT64_MAX = (1 << 63) - 1


def _refuse(reason: str) -> TensorError:
    return TensorError(f"Cannot parse tensor from proto: {reason}")


def check(tensor) -> tuple[str, tuple, int]:
    """What a ``TensorProto`` declares, checked before anything is allocated for it.

    Args:
      tensor: a ``tensorflow.TensorProto`` message.

    Returns:
      ``(DataType name, shape, bytes)``: the bytes its array takes once decoded (8 per
      string element: the array holds references to the values the message carries).

    Raises:
      TensorError: for an unsupported dtype, an unknown rank or one above 64, a negative
        dimension, more elements than int64 counts, ``tensor_content`` whose size does not
        fit the shape (or on a string tensor), or more values than the shape holds.
    """
    name = dtype_name(tensor.dtype)
    if name not in _TYPES:
        raise _refuse(f"dtype {name} is not supported; send one of {', '.join(sorted(_TYPES))}.")
    itemsize = np.dtype(_TYPES[name][0]).itemsize
    shape, count = _declared_shape(tensor.tensor_shape, name, itemsize)
    _check_values(tensor, name, shape, count)
    return name, shape, count * itemsize


def _declared_shape(shape_proto, name: str, itemsize: int) -> tuple[tuple, int]:
    """``(shape, elements)`` of a ``TensorShapeProto``, refused where no array could have it
    (unknown or too high a rank, a negative dimension, more elements or bytes than int64
    counts)."""
    if shape_proto.unknown_rank:
        raise _refuse("tensor_shape has unknown_rank set; give every dimension's size.")
    if len(shape_proto.dim) > MAX_RANK:
        raise _refuse(f"tensor_shape has {len(shape_proto.dim)} dimensions; at most {MAX_RANK}.")
    shape = tuple(d.size for d in shape_proto.dim)
    if any(d < 0 for d in shape):
        raise _refuse(f"tensor_shape {list(shape)} has a negative dimension.")
    count = math.prod(shape)  # Python's integers: no overflow
    if count > _INT64_MAX:
        raise _refuse(f"tensor_shape {list(shape)} holds {count} elements, more than int64 counts.")
    if math.prod(d for d in shape if d) * itemsize > _INT64_MAX:  # NumPy's limit, zeros or not
        raise _refuse(
            f"tensor_shape {list(shape)}: its nonzero dimensions multiply to more bytes of {name} "
            "than int64 counts (no array has such a shape, even with a zero dimension)."
        )
    return shape, count


def _check_values(tensor, name: str, shape: tuple, count: int) -> None:
    """Refuses values that do not fit the declared shape: ``tensor_content`` of another size
    (or on a string tensor), or a typed field with more values than ``count`` (fewer are
    completed by repeating the last, as ``tf.make_ndarray``)."""
    dtype, field = _TYPES[name]
    if tensor.tensor_content:
        if dtype is object:
            raise _refuse("DT_STRING tensors carry their values in string_val.")
        nbytes = count * np.dtype(dtype).itemsize
        if len(tensor.tensor_content) != nbytes:
            raise _refuse(
                f"tensor_content has {len(tensor.tensor_content)} bytes; shape {list(shape)} "
                f"of {name} needs {nbytes}."
            )
    elif len(getattr(tensor, field)) > count:
        values = len(getattr(tensor, field))
        raise _refuse(f"{field} has {values} values; shape {list(shape)} holds {count}.")


def to_numpy(tensor) -> np.ndarray:
    """A ``TensorProto`` -> ``np.ndarray`` (strings as an ``object`` array of ``bytes``).

    Args:
      tensor: a ``tensorflow.TensorProto`` message.

    Returns:
      The array, shaped by ``tensor_shape``.

    Raises:
      TensorError: :func:`check`'s, before anything is allocated.
    """
    name, shape, _ = check(tensor)
    dtype, field = _TYPES[name]
    if tensor.tensor_content:
        little = np.dtype(dtype).newbyteorder("<")
        return np.frombuffer(tensor.tensor_content, dtype=little).reshape(shape)
    values = getattr(tensor, field)
    if dtype is object:
        array = np.empty(len(values), dtype=object)
        array[:] = list(values)
    elif field == "half_val":  # float16 bit patterns
        array = np.asarray(values, _FIELDS[field]).astype(np.uint16).view(np.float16)
    else:
        array = np.asarray(values, _FIELDS[field]).astype(dtype, copy=False)
    count = math.prod(shape)
    if len(array) == count:
        return array.reshape(shape)
    if not len(array):
        return np.zeros(shape, dtype=dtype) if dtype is not object else np.full(shape, b"")
    # tf.make_ndarray: the last value repeats to fill the shape.
    return np.concatenate([array, np.repeat(array[-1:], count - len(array))]).reshape(shape)


def from_numpy(array: np.ndarray, out=None):
    """An array -> ``TensorProto`` (``out`` if given, e.g. a map entry of a response).

    Args:
      array: a NumPy array; ``object``/bytes/str arrays become ``DT_STRING``.
      out: the ``TensorProto`` to fill; a new one if ``None``.

    Returns:
      The filled ``TensorProto``.
    """
    tensor = messages.TensorProto() if out is None else out
    array = np.asarray(array)
    for size in array.shape:
        tensor.tensor_shape.dim.add().size = size
    if array.dtype == object or array.dtype.kind in "SU":
        tensor.dtype = messages.DataType.values_by_name["DT_STRING"].number
        tensor.string_val.extend(
            v if isinstance(v, bytes) else str(v).encode() for v in array.reshape(-1)
        )
        return tensor
    name = _BY_NUMPY.get(array.dtype.name)
    if name is None:
        raise TensorError(f"Output dtype {array.dtype} has no TensorProto DataType.")
    tensor.dtype = messages.DataType.values_by_name[name].number
    tensor.tensor_content = np.ascontiguousarray(array, array.dtype.newbyteorder("<")).tobytes()
    return tensor
