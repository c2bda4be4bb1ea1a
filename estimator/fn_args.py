"""The argument names of a user function (TF's ``function_utils.fn_args``): how the
Estimator decides which of ``mode``, ``params``, ``config`` ... to pass to ``model_fn``,
``input_fn`` and the other callables users hand it."""

from __future__ import annotations

import inspect

__all__ = ["fn_args"]


def fn_args(fn) -> tuple[str, ...]:
    """Argument names of a function (or ``functools.partial``/callable), as TF's
    ``function_utils.fn_args``."""
    if hasattr(fn, "func") and hasattr(fn, "args"):  # functools.partial
        bound = len(fn.args)
        return tuple(a for a in fn_args(fn.func)[bound:] if a not in (fn.keywords or {}))
    params = inspect.signature(fn).parameters
    return tuple(
        name for name, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )
