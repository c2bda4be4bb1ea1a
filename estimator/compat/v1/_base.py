"""What every compat op shares: TF's ``name=`` argument, dtypes, host (string) values.

* ``name=``: in TF every op output is a named tensor that ``LoggingTensorHook`` can fetch
  (``tf.nn.softmax(logits, name="softmax_tensor")``). :func:`op` gives each wrapped
  function that behaviour: inside ``model_fn`` a given name registers the result with
  ``estimator.identity``; outside (``input_fn``) it is ignored.
* dtypes: TF's ``int64``/``float64`` become jax's default width (int32/float32) unless
  ``jax_enable_x64`` is set, silently, as jax's own array creation does (:func:`dtype`).
* strings: jax arrays hold numbers only. Ops that TF also runs on strings (``equal``,
  ``reshape``, ``concat``, ...) run with NumPy when an input holds strings (``xnp``), so
  input-pipeline code on string features keeps working. A TF string is bytes: TF converts a
  Python ``str`` operand (``tf.equal(labels, '>50K')``) to UTF-8 bytes before comparing it
  with the bytes ``tf.decode_csv`` returns; :func:`tf_strings` does the same here, so every
  string op sees bytes (NumPy alone would compare ``b'>50K' == '>50K'`` as False).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from estimator.compat.v1._placeholders import Deferred, is_symbolic
from estimator.model import variables as _variables

__all__ = ["op", "dtype", "xnp", "is_host", "named", "in_model_fn", "tf_strings"]


def in_model_fn() -> bool:
    """Whether a ``model_fn`` is being run (variables, names and the global step exist)."""
    return _variables.current_frame() is not None


def named(value: Any, name: str | None) -> Any:
    """Registers ``value`` under ``name`` for hooks when inside ``model_fn``; returns it."""
    if name and in_model_fn() and _is_numeric(value):
        _variables.identity(value, name)
    return value


def _is_numeric(value: Any) -> bool:
    if isinstance(value, jax.Array):
        return True
    return isinstance(value, np.ndarray) and value.dtype.kind in "biufc"


def op(function: Callable) -> Callable:
    """Decorates a TF op: a ``name`` argument (keyword or positional) names the result; on a
    ``tf.placeholder`` (or a value made from one) the op is deferred to the export
    (``_placeholders``)."""
    params = list(inspect.signature(function).parameters)
    index = params.index("name") if "name" in params else None

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        if any(map(is_symbolic, jax.tree.leaves((args, kwargs), is_leaf=is_symbolic))):
            return Deferred(function, args, kwargs)
        result = function(*args, **kwargs)
        name = kwargs.get("name")
        if name is None and index is not None and len(args) > index:
            name = args[index]
        if name is not None:
            named(result, name)
        return result

    return wrapper


def dtype(value: Any) -> np.dtype | None:
    """A TF dtype (``tf.float32``, ``"float32"``, ``np.int64``) as the dtype jax will use.

    ``int64``/``float64``/``uint64``/``complex128`` narrow to 32 bits unless
    ``jax_enable_x64`` is on; ``tf.string`` is NumPy's ``object``.
    """
    if value is None:
        return None
    if value is str or value is bytes:
        return np.dtype(object)
    dt = np.dtype(value)
    if dt.kind in "OUS":
        return np.dtype(object)
    return np.dtype(jax.dtypes.canonicalize_dtype(dt))


def is_host(*values: Any) -> bool:
    """Whether any value holds strings or Python objects (which jax arrays cannot)."""
    for value in values:
        if isinstance(value, (str, bytes)):
            return True
        if isinstance(value, np.ndarray) and value.dtype.kind in "OUS":
            return True
        if isinstance(value, (list, tuple)) and value and is_host(*value):
            return True
    return False


def tf_strings(value: Any) -> Any:
    """A host value with its strings as TF holds them: ``bytes`` in an ``object`` array.

    ``str`` (and NumPy ``<U``) elements are encoded as UTF-8, ``<S`` arrays become
    ``object`` arrays of ``bytes``, as TF converts a Python string to a ``tf.string``
    tensor. Values without strings (numbers, jax arrays) are returned unchanged.

    Args:
      value: a ``str``/``bytes`` scalar, a (nested) list of them, or a NumPy array.

    Returns:
      ``value``, or an ``object`` array of ``bytes`` of the same shape.
    """
    if isinstance(value, jax.Array):
        return value
    if isinstance(value, (str, bytes)):
        array = np.empty((), dtype=object)
        array[()] = value.encode() if isinstance(value, str) else bytes(value)
        return array
    if isinstance(value, (list, tuple)):
        if not is_host(value):
            return value
        value = np.asarray(value, dtype=object)
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "OUS":
        return value
    if value.dtype.kind == "S":
        return value.astype(object)
    flat = value.ravel()
    if value.dtype.kind == "O" and not any(isinstance(e, str) for e in flat):
        return value
    out = np.empty(value.shape, dtype=object)
    out.ravel()[:] = [e.encode() if isinstance(e, str) else e for e in flat]
    return out


def xnp(*values: Any):
    """``numpy`` when a value holds strings (host data), else ``jax.numpy``."""
    return np if is_host(*values) else jnp


def axis_arg(axis: Any, legacy: Any = None, legacy_name: str = "reduction_indices") -> Any:
    """TF's ``axis`` with its deprecated alias (``reduction_indices``, ``dimension``)."""
    if axis is not None and legacy is not None:
        raise ValueError(f"Cannot specify both 'axis' and '{legacy_name}'.")
    axis = legacy if axis is None else axis
    if isinstance(axis, (list, tuple)):
        return tuple(int(a) for a in axis)
    if isinstance(axis, (np.ndarray, jax.Array)):
        return tuple(int(a) for a in np.ravel(np.asarray(axis)))
    return axis
