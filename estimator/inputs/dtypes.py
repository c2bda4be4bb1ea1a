"""The dtypes batches enter a jitted step with (internal): JAX's canonical dtypes, object
arrays of numbers made numeric, strings refused with the fix, and integers narrowed to 32
bits only when every value fits."""

from __future__ import annotations

import numbers

import jax
import numpy as np

__all__ = ["CANONICAL", "canonical", "check_int_range"]


CANONICAL = frozenset(
    [
        np.dtype(d)
        for d in (
            "float32",
            "float16",
            "int32",
            "uint32",
            "int16",
            "uint16",
            "int8",
            "uint8",
            "bool",
        )
    ]
    + [np.dtype(jax.numpy.bfloat16)]
)  # dtypes a jitted step takes as they are (x64 off)


def canonical(tree, what: str):
    """NumPy arrays of JAX's canonical dtypes; strings are refused with a hint (internal)."""
    if isinstance(tree, dict) and all(
        type(v) is np.ndarray and v.dtype in CANONICAL for v in tree.values()
    ):
        return tree  # the common case, checked cheaply on every batch

    def one(path, value):
        if isinstance(value, jax.Array):
            return value
        value = np.asarray(value)
        if value.dtype.kind == "O":
            value = _from_objects(value, what + jax.tree_util.keystr(path))
        if value.dtype.kind in "USO":
            where = jax.tree_util.keystr(path) or ""
            raise TypeError(
                f"{what}{where} holds strings (dtype {value.dtype}), which cannot enter a "
                "jitted step. Map them to numbers on the host: pass "
                "input_transform=canned.feature_column.input_transform(feature_columns) "
                "to the Estimator, or convert them in input_fn."
            )
        dtype = jax.dtypes.canonicalize_dtype(value.dtype)
        if value.dtype == dtype:
            return value
        if value.dtype.kind in "iu":
            check_int_range(value, dtype, f"{what}{jax.tree_util.keystr(path)}")
        return value.astype(dtype)

    return jax.tree_util.tree_map_with_path(one, tree)


def _from_objects(value: np.ndarray, what: str) -> np.ndarray:
    """An object array (e.g. a pandas column) as numbers when every element is one; an
    array of strings is returned as is (refused by the caller with its hint)."""
    flat = value.ravel().tolist()
    numbers_ = [isinstance(v, numbers.Number) for v in flat]
    if all(numbers_):
        return np.asarray(flat).reshape(value.shape)
    if all(isinstance(v, str | bytes) for v in flat):
        return value
    index = numbers_.index(False)
    raise TypeError(
        f"{what} is an object array whose element {flat[index]!r} (of type "
        f"{type(flat[index]).__name__}, at flat index {index}) is not a number; expected "
        "numbers only (or strings only, for feature columns). Convert the column in "
        "input_fn, e.g. pandas' df[col].astype('float32'), after filling missing values."
    )


def check_int_range(value: np.ndarray, dtype, what: str) -> None:
    """Raises if an integer array holds a value that ``dtype`` cannot represent, instead
    of letting the conversion wrap it (int64 ``3_000_000_000`` becomes int32
    ``-1294967296``; TF keeps int64, so a port must not lose it silently).

    Integer width policy: JAX computes with 32-bit integers unless 64-bit mode is on, so
    int64/uint64 inputs and labels are narrowed to int32/uint32 on the way to the device
    when every value fits, and refused otherwise. Floats narrow to float32 freely.

    Raises:
      ValueError: naming ``what``, the first value out of range, what it would have
        become, and the fixes.
    """
    info = np.iinfo(dtype)
    if value.size == 0 or (info.min <= value.min() and value.max() <= info.max):
        return
    flat = value.ravel()
    index = int(np.flatnonzero((flat < info.min) | (flat > info.max))[0])
    bad = flat[index]
    raise ValueError(
        f"{what} holds the {value.dtype} value {bad} (at flat index {index}), which does not "
        f"fit {np.dtype(dtype).name}: JAX computes with 32-bit integers unless 64-bit mode "
        f"is on, and the value would silently become {bad.astype(dtype)}. Enable 64-bit "
        "integers with jax.config.update('jax_enable_x64', True) at the start of the "
        "program, or map the values into range on the host (e.g. ids through "
        "categorical_column_with_hash_bucket or a vocabulary)."
    )
