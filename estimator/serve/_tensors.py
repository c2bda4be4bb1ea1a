"""``tensorflow.TensorProto`` <-> NumPy without TensorFlow (``tf.make_ndarray`` and
``tf.make_tensor_proto``'s rules for the dtypes a served signature uses).

A request tensor is read from ``tensor_content`` (little-endian bytes) or from the typed
``*_val`` field, with TF's rule that fewer values than the shape holds are completed by
repeating the last one (``tf.make_ndarray``; ``[]`` with elements to fill gives zeros).
Numeric outputs are written as ``tensor_content`` (one copy of the array's bytes, what TF
Serving's ``AsProtoTensorContent`` writes), strings as ``string_val``.
"""

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


def to_numpy(tensor) -> np.ndarray:
    """A ``TensorProto`` -> ``np.ndarray`` (strings as an ``object`` array of ``bytes``).

    Args:
      tensor: a ``tensorflow.TensorProto`` message.

    Returns:
      The array, shaped by ``tensor_shape``.

    Raises:
      TensorError: for an unsupported dtype, an unknown-rank or negative shape, content
        whose size does not fit the shape, or more values than the shape holds.
    """
    name = dtype_name(tensor.dtype)
    if name not in _TYPES:
        raise TensorError(
            f"dtype {name} is not supported; send one of {', '.join(sorted(_TYPES))}."
        )
    dtype, field = _TYPES[name]
    shape_proto = tensor.tensor_shape
    if shape_proto.unknown_rank:
        raise TensorError("tensor_shape has unknown_rank set; give every dimension's size.")
    shape = tuple(d.size for d in shape_proto.dim)
    if any(d < 0 for d in shape):
        raise TensorError(f"tensor_shape {list(shape)} has a negative dimension.")
    count = int(np.prod(shape, dtype=np.int64))
    if tensor.tensor_content:
        if dtype is object:
            raise TensorError("DT_STRING tensors carry their values in string_val.")
        content = tensor.tensor_content
        itemsize = np.dtype(dtype).itemsize
        if len(content) != count * itemsize:
            raise TensorError(
                f"tensor_content has {len(content)} bytes; shape {list(shape)} of {name} "
                f"needs {count * itemsize}."
            )
        return np.frombuffer(content, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape)
    values = getattr(tensor, field)
    if len(values) > count:
        raise TensorError(f"{field} has {len(values)} values; shape {list(shape)} holds {count}.")
    if dtype is object:
        array = np.empty(len(values), dtype=object)
        array[:] = list(values)
    elif field == "half_val":
        array = np.asarray(values, dtype=np.uint16).view(np.float16)
    else:
        array = np.asarray(values, dtype=dtype)
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
