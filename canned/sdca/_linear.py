"""``LinearSDCA`` (``tf.estimator.experimental.LinearSDCA``) and the linear estimators'
SDCA ``model_fn`` (TF 2.15's ``canned/linear.py``: ``_sdca_model_fn``,
``LinearSDCA.get_train_step``, ``_SDCAModel.minimize`` / ``update_weights``).

Per training step, as TF: the logits (and the head's loss, metrics, predictions) come from
the current weights; then one SDCA pass over the batch updates the *unshrunk* weights
(non-trainable ``<variable>_unshrunk``, TF's slots) and the examples' states (a table keyed
by the example ids' fingerprints), and the model's weights become the unshrunk ones after
the L1 proximal step, ``sign(w)·max(|w| - l1/l2, 0)``.

Under JAX: a ``train_op`` is an optax transformation of gradients, so the SDCA update is
handed to it as a gradient: the step's loss is the head's loss (its gradient stopped) plus
``Σ ½‖w - w_new‖²`` minus its own value (0, so the loss reported is the head's), and the
``train_op`` is SGD at rate 1: ``w - 1·(w - w_new) = w_new`` (to float32 rounding of that
subtraction).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

import estimator as est
from canned import feature_column as fc
from canned._base import HostTransform, model_features, weight_key
from canned.feature_column._base import CategoricalColumn, DenseColumn
from canned.head import BinaryClassHead, RegressionHead
from canned.sdca import _kernel, _table
from canned.sdca._losses import get_loss
from estimator.hooks.session_run_hook import SessionRunArgs, SessionRunHook
from estimator.model import variables as est_variables

__all__ = ["LinearSDCA"]

logger = logging.getLogger("canned")

_KEYS = "ShardedMutableHashTable-1-of-1-keys"  # TF's checkpoint names of the state table
_VALUES = "ShardedMutableHashTable-1-of-1-values"
_SEEN = "linear/sdca/examples_seen"
_LEFT_OUT = "linear/sdca/examples_left_out"
_SUMS = "linear/sdca/state_sums"  # Σ primal loss, Σ dual loss, Σ weight over the table


class LinearSDCA:
    """Stochastic Dual Coordinate Ascent for ``LinearClassifier`` / ``LinearRegressor`` /
    ``LinearEstimator`` (``tf.estimator.experimental.LinearSDCA``, TF 2.15).

    Give it as ``optimizer=``. Conditions, as TF: ``sparse_combiner="sum"``; a binary
    classifier (logistic loss) or a one-dimensional regressor (squared loss); every
    training example has a unique id in ``features[example_id_column]`` (strings; integers
    are used as their decimal strings). SDCA minimizes ``Σᵢ sᵢ·loss(w·xᵢ) + l2/2·‖w‖² +
    l1·‖w‖₁`` (``sᵢ`` the example weights), the regularization not divided by the number of
    examples: ``symmetric_l2_regularization`` should be of the order of the examples'
    squared norms.

    References: SDCA, www.jmlr.org/papers/volume14/shalev-shwartz13a/shalev-shwartz13a.pdf;
    the L1 proximal step, https://arxiv.org/abs/1309.2375; CoCoA+ (``num_loss_partitions``),
    https://arxiv.org/abs/1502.03508; adaptive sampling, https://arxiv.org/abs/1502.08053.

    What differs from TF:

    * The examples' states live in a fixed-size table of ``table_capacity`` slots
      (keyword-only; TF's table grows). A run that meets more distinct example ids stops
      with an error naming it (checked every 100 steps and at the end of ``train``).
    * Within a batch, examples are visited in a random order drawn from the step's key
      (``RunConfig.tf_random_seed``): reproducible, where TF's order comes from
      ``std::random_device``. One-example batches match TF exactly.
    * ``adaptive=True`` visits every example of the batch once, in an order sampled by
      importance (see ``canned.sdca._kernel.adaptive_order``).
    * ``num_table_shards`` is accepted and unused (one table on the device).

    Args:
      example_id_column: the feature key of the example ids.
      num_loss_partitions: the CoCoA+ factor: the number of concurrent workers (1).
      num_table_shards: accepted for TF's signature.
      symmetric_l1_regularization: ``l1 >= 0``.
      symmetric_l2_regularization: ``l2 > 0`` (TF warns when it is ``<= 1``).
      adaptive: adaptive sampling.
      table_capacity: keyword-only: slots of the example table, a power of two (default
        2**20; 24 bytes each).

    Raises:
      ValueError: TF's messages for a non-positive ``l2`` or a negative ``l1``; a
        ``table_capacity`` that is not a power of two or ``num_loss_partitions < 1``.
    """

    def __init__(
        self,
        example_id_column: str,
        num_loss_partitions: int = 1,
        num_table_shards: int | None = None,
        symmetric_l1_regularization: float = 0.0,
        symmetric_l2_regularization: float = 1.0,
        adaptive: bool = False,
        *,
        table_capacity: int = 2**20,
    ) -> None:
        if symmetric_l2_regularization <= 0.0:
            raise ValueError("symmetric_l2_regularization should be positive.")
        if symmetric_l2_regularization <= 1.0:
            logger.warning(
                "symmetric_l2_regularization for SDCA should typically be larger than for "
                "online optimization methods. Recommended value is of the order of the "
                "average L2 norm of the training examples."
            )
        if symmetric_l1_regularization < 0.0:
            raise ValueError("symmetric_l1_regularization should be non-negative.")
        if not isinstance(num_loss_partitions, int) or num_loss_partitions < 1:
            raise ValueError(f"num_loss_partitions must be an int >= 1; got {num_loss_partitions}.")
        if table_capacity < 2 or table_capacity & (table_capacity - 1):
            raise ValueError(
                f"table_capacity must be a power of two >= 2; got {table_capacity}. It bounds "
                "the number of distinct example ids one training run can see."
            )
        self._example_id_column = example_id_column
        self._num_loss_partitions = num_loss_partitions
        self._num_table_shards = num_table_shards
        self._symmetric_l1_regularization = float(symmetric_l1_regularization)
        self._symmetric_l2_regularization = float(symmetric_l2_regularization)
        self._adaptive = bool(adaptive)
        self._table_capacity = int(table_capacity)

    @property
    def example_id_column(self) -> str:
        return self._example_id_column

    def __repr__(self) -> str:
        return (
            f"LinearSDCA(example_id_column={self._example_id_column!r}, "
            f"num_loss_partitions={self._num_loss_partitions}, "
            f"symmetric_l1_regularization={self._symmetric_l1_regularization}, "
            f"symmetric_l2_regularization={self._symmetric_l2_regularization}, "
            f"adaptive={self._adaptive}, table_capacity={self._table_capacity})"
        )


def loss_type_of(head) -> str:
    """TF's ``_sdca_model_fn`` choice: logistic for the binary head, squared for a 1-D
    regression head.

    Raises:
      ValueError: for another head (TF's message).
    """
    if isinstance(head, BinaryClassHead):
        return "logistic_loss"
    if type(head) is RegressionHead and head.logits_dimension == 1:
        return "squared_loss"
    raise ValueError(f"Unsupported head type: {head}")


class SDCAHostTransform(HostTransform):
    """The linear host phase plus, when present, the example ids as ``int32 [B, 4]``
    fingerprints under ``example_id_column``; binary labels checked to be 0 or 1 (TF's
    ``ConvertLabel``)."""

    def __init__(
        self, transform, head, example_id_column: str, loss_type: str, weight=None
    ) -> None:
        super().__init__(transform, head, weight)
        self._key = example_id_column
        self._binary = get_loss(loss_type).binary

    def apply(self, features, labels=None):
        out, labels = super().apply(features, labels)
        if isinstance(features, dict) and self._key in features:
            out[self._key] = _table.example_keys(features[self._key])
        if labels is not None and self._binary:
            bad = np.asarray(labels)[(np.asarray(labels) != 0) & (np.asarray(labels) != 1)]
            if bad.size:
                raise ValueError(
                    "Only labels of 0.0 or 1.0 are supported right now. Found example with "
                    f"label: {bad.ravel()[0]}"
                )
        return out, labels


class _TableHook(SessionRunHook):
    """Raises once an example found no slot in the state table (every 100 steps, at end)."""

    def __init__(self, capacity: int, every_n_steps: int = 100) -> None:
        self._capacity = capacity
        self._every = every_n_steps
        self._count = 0

    def before_run(self, run_context):
        self._count += 1
        return SessionRunArgs(_LEFT_OUT) if self._count % self._every == 0 else None

    def after_run(self, run_context, run_values) -> None:
        if run_values.results is not None:
            self._check(run_values.results)

    def end(self, session) -> None:
        self._check(session.run(_LEFT_OUT))

    def _check(self, left_out) -> None:
        if int(left_out) > 0:
            raise ValueError(
                f"LinearSDCA's example table is full: its {self._capacity} slots hold as many "
                f"example ids, and {int(left_out)} example visits found no slot (those examples "
                "did not train). Pass LinearSDCA(..., table_capacity=...) a power of two above "
                "the number of distinct example ids."
            )


def _groups(columns, features):
    """TF's ``get_train_step`` feature lists: ``(sparse [(name, ids, values, n)], dense
    [(name, x, d)])`` for the columns in order of name, then the bias."""
    sparse, dense = [], []
    batch = None
    for column in sorted(columns, key=lambda c: c.name):
        name = f"linear/linear_model/{column._var_scope_name}/weights"
        categorical = column if isinstance(column, CategoricalColumn) else None
        if categorical is None and isinstance(column, fc.IndicatorColumn):
            categorical = column.categorical_column  # a multi-hot dense column: sparse here
        if categorical is not None:
            ids, weights = categorical._ids_and_weights(features)
            values = jnp.ones(ids.shape, jnp.float32) if weights is None else weights
            ids, values = _kernel.dedupe_ids(ids, values)
            sparse.append((name, ids, values, categorical.num_buckets))
            batch = ids.shape[0]
        elif isinstance(column, DenseColumn):
            if len(column.variable_shape) != 1:
                raise ValueError(
                    f"Column {type(column).__name__} has rank {len(column.variable_shape)}, "
                    "larger than 1."
                )
            # In linear_model's scope, so that an embedding column reuses its variable.
            with est.variable_scope("linear"), est.variable_scope("linear_model"):
                with est.variable_scope(column._var_scope_name):
                    x = column._dense_tensor(features, trainable=True)
            x = jnp.asarray(x, jnp.float32).reshape(x.shape[0], -1)
            dense.append((name, x, x.shape[1]))
            batch = x.shape[0]
        else:
            raise ValueError(f"LinearSDCA does not support column type {type(column).__name__}.")
    dense.append(("linear/linear_model/bias_weights", jnp.ones((batch, 1), jnp.float32), 1))
    return sparse, dense


def _variable(name: str, shape, dtype=jnp.float32, trainable=True) -> jax.Array:
    with est_variables.root_scope():
        return est.get_variable(
            name, shape, dtype, est.initializers.zeros_initializer(), trainable=trainable
        )


def _state_variables(capacity: int) -> dict[str, jax.Array]:
    """The table and counters (non-trainable), created in every mode."""
    return {
        _KEYS: _variable(_KEYS, (capacity, 4), jnp.int32, trainable=False),
        _VALUES: _variable(_VALUES, (capacity, 4), trainable=False),
        _SEEN: _variable(_SEEN, (), jnp.int32, trainable=False),
        _LEFT_OUT: _variable(_LEFT_OUT, (), jnp.int32, trainable=False),
        _SUMS: _variable(_SUMS, (3,), trainable=False),
    }


def _train(optimizer: LinearSDCA, loss_type, columns, features, labels, example_weights):
    """One SDCA step: assigns the slots, the table and the counters; returns ``(penalty,
    summaries)`` where ``penalty = Σ ½‖w - w_new‖²`` over the model's weights."""
    o = optimizer
    loss = get_loss(loss_type)
    l1, l2 = o._symmetric_l1_regularization, o._symmetric_l2_regularization
    sparse, dense = _groups(columns, features)
    variables, slots = {}, {}
    for name, *_, size in sparse + dense:
        shape = (size, 1) if name.endswith("/weights") else (1,)
        variables[name] = _variable(name, shape)
        slots[name] = _variable(name + "_unshrunk", shape, trainable=False)
    state = _state_variables(o._table_capacity)
    if o.example_id_column not in features:
        raise ValueError(
            f"Feature {o.example_id_column} is not in features dictionary: LinearSDCA reads "
            f"each training example's unique id from example_id_column={o.example_id_column!r}."
        )
    queries = jnp.asarray(features[o.example_id_column], jnp.int32).reshape(-1, 4)
    slot_ids, keys, inserted = _table.find_slots(state[_KEYS], queries)
    old = _table.gather_states(state[_VALUES], slot_ids)
    weights = jnp.where(slot_ids >= 0, example_weights, 0.0)  # no slot: no update
    tables = [slots[n].reshape(-1) for n, *_ in sparse]
    dense_tables = [slots[n].reshape(-1) for n, *_ in dense]
    ids, values = [g[1] for g in sparse], [g[2] for g in sparse]
    xs = [g[1] for g in dense]
    batch = labels.shape[0]
    if o._adaptive:
        wx = _kernel.logits(ids, values, xs, tables, dense_tables, l1, l2)
        norms = _kernel.squared_norms(ids, values, xs)
        order = _kernel.adaptive_order(
            est.next_rng_key(), loss, labels, weights, old, norms, wx, l2
        )
    else:
        order = jax.random.permutation(est.next_rng_key(), batch).astype(jnp.int32)
    new, sparse_deltas, dense_deltas = _kernel.sdca_batch(
        loss,
        sparse_ids=ids,
        sparse_values=values,
        dense=xs,
        sparse_tables=tables,
        dense_tables=dense_tables,
        labels=labels,
        weights=weights,
        state=old,
        order=order,
        l1=l1,
        l2=l2,
        num_loss_partitions=o._num_loss_partitions,
    )
    deltas = sparse_deltas + dense_deltas
    penalty, l1_sum, l2_sum = 0.0, 0.0, 0.0
    for (name, *_), delta in zip(sparse + dense, deltas, strict=True):
        unshrunk = slots[name] + delta.reshape(slots[name].shape)
        est.assign(name + "_unshrunk", unshrunk)
        target = jax.lax.stop_gradient(_kernel.shrink(unshrunk, l1, l2))
        penalty = penalty + 0.5 * jnp.sum(jnp.square(variables[name] - target))
        l1_sum = l1_sum + jnp.sum(jnp.abs(target))
        l2_sum = l2_sum + jnp.sum(jnp.square(target))
    kept = (slot_ids >= 0) & _table.last_occurrence(slot_ids)
    sums = state[_SUMS] + jnp.sum(jnp.where(kept[:, None], new[:, 1:] - old[:, 1:], 0.0), axis=0)
    left_out = state[_LEFT_OUT] + jnp.sum(slot_ids < 0).astype(jnp.int32)
    seen = state[_SEEN] + inserted
    est.assign(_KEYS, keys)
    est.assign(_VALUES, _table.scatter_states(state[_VALUES], slot_ids, new))
    est.assign(_SUMS, sums)
    est.assign(_SEEN, seen)
    est.assign(_LEFT_OUT, est.identity(left_out, _LEFT_OUT))
    # TF's summaries (approximate_duality_gap from the running sums of the example states).
    gap = (sums[0] + sums[1] + l1 * l1_sum + l2 * l2_sum) / jnp.maximum(sums[2], 1e-30)
    non_bias = [variables[n] for n, *_ in sparse + dense[:-1]]
    size = sum(int(math.prod(v.shape)) for v in non_bias)
    zeros = sum(jnp.sum(v == 0) for v in non_bias)
    summaries = {
        "approximate_duality_gap": gap,
        "examples_seen": seen,
        "bias": variables["linear/linear_model/bias_weights"][0],
        "fraction_of_zero_weights": jnp.asarray(zeros, jnp.float32) / max(size, 1),
    }
    return penalty, summaries


def sdca_model_fn(head, columns: tuple, optimizer: LinearSDCA, weight_column) -> Any:
    """The ``model_fn`` of a linear estimator trained by ``optimizer`` (TF's
    ``_sdca_model_fn``): ``linear_model`` logits with ``sparse_combiner='sum'``."""
    loss_type = loss_type_of(head)
    key, _ = weight_key(weight_column)

    def model_fn(features, labels, mode, config):
        del config
        features = model_features(features, weight_column)
        with est.variable_scope("linear"):
            logits = fc.linear_model(features, columns, units=1, sparse_combiner="sum")
        _state_variables(optimizer._table_capacity)  # every mode creates the same variables
        for name, shape in _names(columns).items():
            _variable(name + "_unshrunk", shape, trainable=False)
        if mode != est.ModeKeys.TRAIN:
            return head.create_estimator_spec(
                features=features, mode=mode, labels=labels, logits=logits
            )
        spec = head.create_estimator_spec(
            features=features,
            mode=mode,
            labels=labels,
            logits=jax.lax.stop_gradient(logits),  # SDCA, not the loss's gradient, trains
            optimizer=optax.sgd(1.0),
        )
        batch = logits.shape[0]
        example_weights = (
            jnp.ones((batch,), jnp.float32)
            if key is None
            else jnp.asarray(features[key], jnp.float32).reshape(batch)
        )
        flat_labels = jnp.asarray(labels, jnp.float32).reshape(batch)
        penalty, summaries = _train(
            optimizer, loss_type, columns, features, flat_labels, example_weights
        )
        for name, value in summaries.items():
            est.summary.scalar(name, value)
        return spec._replace(
            loss=spec.loss + (penalty - jax.lax.stop_gradient(penalty)),
            training_hooks=tuple(spec.training_hooks) + (_TableHook(optimizer._table_capacity),),
        )

    return model_fn


def _names(columns) -> dict[str, tuple[int, ...]]:
    """``{weights variable name: shape}`` of the linear model, bias last."""
    out = {}
    for column in sorted(columns, key=lambda c: c.name):
        if isinstance(column, CategoricalColumn):
            size = column.num_buckets
        elif isinstance(column, fc.IndicatorColumn):
            size = column.categorical_column.num_buckets
        else:
            size = int(math.prod(column.variable_shape))
        out[f"linear/linear_model/{column._var_scope_name}/weights"] = (size, 1)
    out["linear/linear_model/bias_weights"] = (1,)
    return out
