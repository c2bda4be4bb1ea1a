"""Table lookups the train step can differentiate row by row (sparse updates).

TF trains embedding and linear weight tables with sparse gradients (``IndexedSlices``):
``SparseApplyFtrl``/``SparseApplyAdagrad`` touch only the rows a batch looked up, so a step
costs O(batch), not O(table). JAX gradients are dense arrays; a lookup's gradient would be
a table-sized scatter and every row of the table and its optimizer slots would be updated.

:func:`lookup_rows` is the one lookup of a variable's rows (``est.layers.embedding_lookup``
and the feature columns' lookups use it). Outside training it is a plain gather. In a train
step whose ``train_op`` updates a table row by row (``est.sparse_updates``, the canned FTRL,
Adagrad and SGD) and whose ``model_fn`` reads that table *only* through this function, the
engine (``estimator.engine.sparse``) runs ``model_fn`` with a :class:`RowAccess` in the
frame: each lookup adds a differentiable zero ``delta`` to the rows it gathers, so the
gradient with respect to ``delta`` is the gradient of each looked-up row, and the table
itself is never differentiated. The engine then applies ``train_op`` to the looked-up rows
and their slots only (see ``estimator.engine.sparse``).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from estimator.model.variables import current_frame

__all__ = ["LOOKUP_SCOPE", "PlanMismatch", "RowAccess", "lookup_rows"]

#: The name scope of a differentiated run's row lookups (their gathers): the step's trace
#: shows which uses of a table are lookups (``estimator.engine.row_plan.lookups_only``).
LOOKUP_SCOPE = "estimator_row_lookup"


class PlanMismatch(Exception):
    """A differentiated run with a recorded plan (``RowAccess(recorded=True)``) looked up
    another number of ids than the plan says: the engine drops the plan and traces again
    (``estimator.engine.row_plan.planned``)."""


class RowAccess:
    """How :func:`lookup_rows` reads tables in one run of ``model_fn`` (internal).

    Args:
      shadows: discovery run: ``{name: table}`` to gather from instead of the variable
        itself, so that any other use of the variable is visible in the traced program
        (see ``estimator.engine.sparse.plan``). None in the differentiated run.
      deltas: differentiated run: ``{name: float [n_ids, *row_shape]}`` zeros, one row per
        looked-up id in call order; None in the discovery run.
      tagged: the init run (TRAIN mode): each lookup gathers from its own identity copy of
        the table (``lax.optimization_barrier``, kept in :attr:`reads`), so the init run's
        traced program shows whether the table is used otherwise
        (``estimator.engine.sparse.plan_from_init``).
      whole: differentiated run: the tables differentiated whole (as dense variables)
        whose lookups' ids are recorded (the rows the step updates: see
        ``estimator.engine.sparse.whole_tables``); their lookups are plain gathers.
      grouped: differentiated run: ``{name: (array, offset, group)}`` for the tables of
        ``whole`` that are rows of one array the step differentiates
        (``estimator.engine.table_groups``): their lookups gather from it, and their ids
        are recorded as rows of it, under ``group``.
      recorded: differentiated run whose ``deltas`` follow a plan a checkpoint recorded,
        not yet checked against this ``model_fn``: another number of ids raises
        :class:`PlanMismatch`, not ``RuntimeError``.

    Attributes:
      ids: ``{name: [flat int32 ids of each lookup]}`` in call order (-1: no row); a
        group's under its name, as rows of its array.
      shapes: ``{name: [ids shape of each lookup]}`` in call order.
      reads: ``{name: [the copy each lookup gathered from]}`` (``tagged`` runs).
    """

    def __init__(
        self,
        *,
        shadows: dict | None = None,
        deltas: dict | None = None,
        tagged: bool = False,
        whole: frozenset = frozenset(),
        grouped: dict | None = None,
        recorded: bool = False,
    ) -> None:
        self.shadows = shadows
        self.deltas = deltas
        self.tagged = tagged
        self.whole = whole
        self.grouped = grouped or {}
        self.recorded = recorded
        self.ids: dict[str, list] = {}
        self.shapes: dict[str, list] = {}
        self.reads: dict[str, list] = {}
        self._offsets: dict[str, int] = {}

    def lookup(self, name: str, table: jax.Array, ids: jax.Array) -> jax.Array | None:
        """The rows of ``name`` for ``ids`` (valid, in range), or None when ``name`` is not
        read row by row in this run."""
        if self.tagged:
            self.shapes.setdefault(name, []).append(tuple(ids.shape))
            copy = jax.lax.optimization_barrier(table)
            self.reads.setdefault(name, []).append(copy)
            return _gather(copy, ids)
        if self.shadows is not None:
            if name not in self.shadows:
                return None
            self.shapes.setdefault(name, []).append(tuple(ids.shape))
            return _gather(self.shadows[name], ids)
        if name in self.grouped:
            array, offset, group = self.grouped[name]
            rows = jnp.where(_valid(ids, table), ids + offset, -1)
            self.ids.setdefault(group, []).append(rows.reshape(-1))
            with jax.named_scope(LOOKUP_SCOPE):
                return _gather(array, rows)
        if name in self.whole:
            self.ids.setdefault(name, []).append(ids.reshape(-1))
            with jax.named_scope(LOOKUP_SCOPE):
                return _gather(table, ids)
        if self.deltas is None or name not in self.deltas:
            return None
        delta = self.deltas[name]
        start = self._offsets.get(name, 0)
        count = math.prod(ids.shape)
        if start + count > delta.shape[0]:
            self._mismatch(
                f"model_fn looked up more rows of {name} in this trace than in the previous one"
            )
        self._offsets[name] = start + count
        self.ids.setdefault(name, []).append(ids.reshape(-1))
        with jax.named_scope(LOOKUP_SCOPE):
            rows = _gather(table, ids)
        piece = jax.lax.dynamic_slice_in_dim(delta, start, count).reshape(rows.shape)
        return rows + jnp.where(_valid(ids, table)[..., None], piece, 0)

    def check_complete(self) -> None:
        """Checks that every delta row was used (the run made the planned lookups).

        Raises:
          RuntimeError: fewer lookups than the plan's (PlanMismatch with ``recorded``).
        """
        deltas = self.deltas or {}
        if any(self._offsets.get(n, 0) != d.shape[0] for n, d in deltas.items()):
            self._mismatch(
                "model_fn looked up fewer table rows in this trace than in the previous one"
            )

    def _mismatch(self, what: str):
        if self.recorded:
            raise PlanMismatch(what)
        raise RuntimeError(
            f"{what}: it must look up the same tables with the same id shapes on every call."
        )


def _valid(ids: jax.Array, table: jax.Array) -> jax.Array:
    return (ids >= 0) & (ids < table.shape[0])


def _gather(table: jax.Array, ids: jax.Array) -> jax.Array:
    """``table[ids]`` with zeros for ids outside ``[0, len(table))``, negative ones too: one
    gather (``FILL_OR_DROP``, which never wraps a negative index as NumPy indexing does),
    whose gradient drops those ids."""
    dims = jax.lax.GatherDimensionNumbers(
        offset_dims=tuple(range(ids.ndim, ids.ndim + table.ndim - 1)),
        collapsed_slice_dims=(0,),
        start_index_map=(0,),
    )
    return jax.lax.gather(
        table,
        ids[..., None],
        dims,
        slice_sizes=(1, *table.shape[1:]),
        mode=jax.lax.GatherScatterMode.FILL_OR_DROP,
        fill_value=0,
    )


def lookup_rows(params: jax.typing.ArrayLike, ids: jax.typing.ArrayLike) -> jax.Array:
    """Rows of a table: ``params[ids]``, with ids outside ``[0, len(params))`` giving zeros.

    The lookup of ``tf.nn.embedding_lookup`` and of the feature columns' weight and
    embedding tables. When ``params`` is a trainable variable (the array ``get_variable``
    returned) read only through this function, and ``train_op`` updates it row by row
    (``est.sparse_updates``), a train step computes gradients for the looked-up rows only and
    updates only those rows and their optimizer slots, as TF's sparse kernels do.

    Args:
      params: ``[num_rows, *row_shape]`` table.
      ids: integer array of any shape; ``-1`` (or any id out of range) means "no row".

    Returns:
      ``ids.shape + row_shape`` rows, zeros where the id is out of range; ``params``' dtype.
    """
    ids = jnp.asarray(ids, jnp.int32)
    frame = current_frame()
    access = None if frame is None else frame.rows
    name = None if frame is None else frame.by_id.get(id(params))
    if name is not None:
        frame.lookups.add(name)  # the engine plans row-wise updates for these tables only
    if access is not None and name is not None:
        rows = access.lookup(name, params, ids)
        if rows is not None:
            return rows
    return _gather(jnp.asarray(params), ids)
