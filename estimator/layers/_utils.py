"""What the layers share: default names, regularizer and constraint plumbing, and the
argument checks of the windowed layers (TF's ``conv_utils``)."""

from __future__ import annotations

from estimator.model.variables import require_frame, unique_name


def layer_name(name: str | None, default: str) -> str:
    """``name``, or the next unused ``default``, ``default_1``, ... in the current scope."""
    return name if name is not None else unique_name(default)


def activity(regularizer, outputs) -> None:
    """Adds ``regularizer(outputs)`` to the regularization losses (TF's
    ``activity_regularizer``)."""
    if regularizer is not None:
        require_frame("layers").regularization.append(regularizer(outputs))


def constrained(value, constraint):
    """The variable's value as a layer reads it: ``constraint(value)`` when there is one."""
    return value if constraint is None else constraint(value)


def int_tuple(value, n: int, what: str) -> tuple[int, ...]:
    """An int or an ``n``-sequence as an ``n``-tuple (TF's ``normalize_tuple`` message)."""
    if isinstance(value, int):
        return (value,) * n
    value = tuple(int(v) for v in value)
    if len(value) != n:
        noun = "integer" if n == 1 else "integers"
        raise ValueError(f"The `{what}` argument must be a tuple of {n} {noun}. Received: {value}")
    return value


_LAYOUTS = {1: ("NWC", "(0, 2, 1)"), 2: ("NHWC", "(0, 2, 3, 1)")}


def check_format(data_format: str, padding: str, rank: int = 2) -> str:
    """The upper-cased padding, after checking it and the data format (TF's messages)."""
    if data_format != "channels_last":
        layout, perm = _LAYOUTS[rank]
        raise ValueError(
            f"data_format={data_format!r} is not supported; use 'channels_last' ({layout}) and "
            f"transpose channels-first inputs with jnp.transpose(x, {perm})."
        )
    padding = padding.upper()
    if padding not in ("VALID", "SAME"):
        raise ValueError(f"The `padding` argument must be 'valid' or 'same'. Received: {padding}")
    return padding
