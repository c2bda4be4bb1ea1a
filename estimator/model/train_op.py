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

It also holds :func:`sparse_updates`, which declares that a transformation may be applied
to the looked-up rows of a table only (TF's sparse updates; ``estimator.model.rows``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
import optax

__all__ = ["sparse_updates", "train_op_by_scope"]

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

    combined = optax.multi_transform({**by_scope, _UNCHANGED: optax.set_to_zero()}, labels)
    rows = {scope: row_wise(transform) for scope, transform in by_scope.items()}
    if all(r is _NO_ROWS for r in rows.values()):
        return combined
    rules = {scope: row_rule(transform) for scope, transform in by_scope.items()}

    def rule(name: str) -> Hashable | None:
        scope = scope_of(name)
        key = rules.get(scope, _NO_RULE)(name)
        return None if key is None else (scope, key)

    return mark_row_wise(combined, lambda name: rows.get(scope_of(name), _NO_ROWS)(name), rule)


class _RowWise(optax.GradientTransformationExtraArgs):
    """An optax transformation with :attr:`row_wise`: the names of the variables it may
    update row by row, and :attr:`row_rule` (see :func:`row_rule`; no ``__slots__``:
    instances carry these attributes)."""

    row_wise: Callable[[str], bool]
    row_rule: Callable[[str], Hashable | None]


def _NO_ROWS(name: str) -> bool:
    return False


def _NO_RULE(name: str) -> None:
    return None


def ELEMENTWISE(name: str) -> Hashable:
    """The :func:`row_rule` of a transformation that updates every variable by the same
    elementwise rule (the canned FTRL, Adagrad and SGD): one key for all."""
    return ()


def row_wise(train_op) -> Callable[[str], bool]:
    """``name -> bool``: whether ``train_op`` may be applied to the looked-up rows of the
    variable ``name`` alone (internal; see :func:`sparse_updates`)."""
    return getattr(train_op, "row_wise", _NO_ROWS)


def row_rule(train_op) -> Callable[[str], Hashable | None]:
    """``name -> key``: variables with the same key (not None) are updated by ``train_op``
    with one elementwise rule, with no state or hyperparameter of their own, so a train step
    may update them as one concatenated array with the same result (internal;
    ``estimator.engine.table_groups``). None, the default: no such promise."""
    return getattr(train_op, "row_rule", _NO_RULE)


def mark_row_wise(
    transform: optax.GradientTransformation,
    rows: Callable[[str], bool] | None = None,
    rule: Callable[[str], Hashable | None] | None = None,
) -> optax.GradientTransformation:
    """``transform``, declared row-wise for the variables ``rows`` names (all by default),
    without the check :func:`sparse_updates` makes (internal: for transformations known to be
    row-wise, such as the canned FTRL, Adagrad and SGD), with ``rule`` as its
    :func:`row_rule` (:func:`ELEMENTWISE` for those three; default: none)."""
    extra = optax.with_extra_args_support(transform)
    marked = _RowWise(extra.init, extra.update)
    marked.row_wise = rows or (lambda name: True)
    marked.row_rule = rule or _NO_RULE
    return marked


def sparse_updates(
    transform: optax.GradientTransformation, *, lazy: bool = False
) -> optax.GradientTransformation:
    """Lets the Estimator apply ``transform`` to the looked-up rows of tables only.

    TF updates embedding and linear weight tables with sparse gradients
    (``SparseApplyAdagrad``, ``SparseApplyFtrl``, ...): a step touches only the rows in the
    batch, so its cost does not grow with the table. Wrapping a ``train_op`` with this gives
    the same here: for every trainable table that ``model_fn`` reads only through lookups
    (``est.layers.embedding_lookup``, feature columns), the train step differentiates with
    respect to the looked-up rows, gathers those rows and their optimizer slots, applies
    ``transform`` to them and scatters the results back into the (donated) buffers. Other
    variables get the ordinary dense update.

    For SGD, Adagrad and FTRL a row without gradient is left unchanged by the dense update
    too, so the results are equal. The canned estimators' ``'SGD'``, ``'Adagrad'`` and
    ``'Ftrl'`` optimizers (and ``canned.ftrl``) are marked already.

    Args:
      transform: the optax transformation (``train_op``). It must keep per-variable state
        (slots) in dicts keyed by variable name, as optax's transformations do.
      lazy: accept a transformation that *does* change rows without gradient (momentum,
        Adam, RMSProp): only the looked-up rows and their slots are updated, which is a
        different optimizer (the "lazy" variant, as TF Addons' ``LazyAdam``).

    Returns:
      An ``optax.GradientTransformation`` with the same ``init``/``update``.

    Raises:
      ValueError: without ``lazy``, when a probe (two steps on a two-row table) shows that
        ``transform`` changes a row that had no gradient, or updates a row from other rows.
    """
    if not lazy:
        problem = _row_wise_problem(transform)
        if problem:
            raise ValueError(
                f"sparse_updates: this transformation {problem}, so updating only the "
                "looked-up rows would differ from its dense update. Optimizers with momentum "
                "or moving averages (Adam, RMSProp, momentum SGD) and weight decay do this. "
                "Pass lazy=True to update only the looked-up rows anyway (a different "
                "optimizer: the 'lazy' variant, as TF Addons' LazyAdam), or leave it "
                "unwrapped for dense updates."
            )
    return mark_row_wise(transform)


def _row_wise_problem(transform: optax.GradientTransformation) -> str | None:
    """Runs ``transform`` for two steps on a two-row table whose row 1 has no gradient in
    the second step, and on row 0 alone; says what is not row-wise, or None."""
    table = np.array([[0.5, -0.25], [0.75, 1.0]], np.float32)
    grads = (
        np.array([[0.3, -0.2], [0.1, 0.4]], np.float32),
        np.array([[-0.1, 0.2], [0.0, 0.0]], np.float32),
    )

    def run(rows: slice):
        params = {"table": jnp.asarray(table[rows])}
        state = transform.init(params)
        history = []
        for g in grads:
            updates, state = transform.update({"table": jnp.asarray(g[rows])}, state, params)
            params = optax.apply_updates(params, updates)
            slots = [
                np.asarray(x)
                for x in jax.tree.leaves(state)
                if np.shape(x) == np.shape(table[rows])
            ]
            history.append((np.asarray(params["table"]), slots))
        return history

    with jax.ensure_compile_time_eval():
        both, alone = run(slice(0, 2)), run(slice(0, 1))
    (params_1, slots_1), (params_2, slots_2) = both
    unchanged = np.array_equal(params_2[1], params_1[1]) and all(
        np.array_equal(a[1], b[1]) for a, b in zip(slots_1, slots_2, strict=True)
    )
    if not unchanged:
        return "changes a row that has no gradient"
    separate = all(
        np.allclose(b[0][0], a[0][0], rtol=1e-6, atol=0)
        and all(np.allclose(x[0], y[0], rtol=1e-6, atol=0) for x, y in zip(b[1], a[1], strict=True))
        for a, b in zip(both, alone, strict=True)
    )
    if not separate:
        return "updates a row from the values of other rows"
    return None
