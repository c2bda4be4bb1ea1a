"""One ``train_op`` that trains variable groups with different optimizers.

TF 1 code trains two parts of a model with two optimizers and groups the ops::

    train_op = tf.group(
        dnn_optimizer.minimize(loss, var_list=dnn_vars),
        linear_optimizer.minimize(loss, var_list=linear_vars),
    )

Here ``train_op`` is an optax transformation of the gradient of every trainable variable,
so the same thing is one transformation that routes each variable, by its variable scope,
to its optimizer (``optax.multi_transform`` underneath)::

    train_op = est.train_op_by_scope({"dnn": optax.adagrad(0.001), "linear": canned.ftrl(0.005)})
"""

from __future__ import annotations

from collections.abc import Mapping

import optax

__all__ = ["train_op_by_scope"]

_UNCHANGED = "__unchanged__"


def train_op_by_scope(transforms: Mapping[str, optax.GradientTransformation]):
    """A ``train_op`` applying ``transforms[scope]`` to the variables under each scope.

    A variable belongs to the longest listed scope its name starts with (``"dnn"`` holds
    ``dnn/hiddenlayer_0/kernel``, not ``dnnx/w``). Variables under no listed scope are not
    changed, as variables no ``minimize(var_list=...)`` lists are not in TF. Each optimizer
    keeps its own state (slots) for its own variables only; one global step counts steps.

    Args:
      transforms: ``{scope: optax.GradientTransformation}``; scopes without a trailing
        ``/`` (``"dnn"``, ``"tower_1/dense"``).

    Returns:
      An ``optax.GradientTransformation`` to give as ``EstimatorSpec.train_op``.

    Raises:
      TypeError: a scope that is not a non-empty string, or a value that is not an optax
        transformation.
    """
    for scope, transform in transforms.items():
        if not isinstance(scope, str) or not scope.strip("/"):
            raise TypeError(f"Scopes must be non-empty strings like 'dnn'; got {scope!r}.")
        if not isinstance(transform, optax.GradientTransformation):
            raise TypeError(
                f"transforms[{scope!r}] must be an optax.GradientTransformation; got "
                f"{type(transform).__name__}."
            )
    scopes = sorted((s.strip("/") for s in transforms), key=len, reverse=True)
    by_scope = {s.strip("/"): t for s, t in transforms.items()}

    def scope_of(name: str) -> str:
        return next((s for s in scopes if name == s or name.startswith(s + "/")), _UNCHANGED)

    def labels(params: Mapping) -> dict:
        return {name: scope_of(name) for name in params}

    return optax.multi_transform({**by_scope, _UNCHANGED: optax.set_to_zero()}, labels)
