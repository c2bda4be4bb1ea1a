"""The step functions: pure functions of the state and a batch, built on ``model_fn``.

This is the only place that calls ``jax.value_and_grad`` and ``optax.apply_updates``.
Each takes the :class:`~estimator.model.ModelFunction` first (bound with
``functools.partial`` before ``jax.jit``), and returns, beside its arrays, a
:class:`StepInfo`: what running ``model_fn`` revealed that is not an array (its hooks,
``train_op``, the names hooks can fetch). ``StepInfo`` is a pytree node without leaves, so
it comes back from ``jax.jit(...).trace(...).out_info`` and ``jax.eval_shape`` as an
ordinary return value and costs nothing on the device.

* TRAIN ``train_step(model, state, features, labels) -> (state', outputs, info)``: the
  loss's gradient, then ``train_op`` (row by row for lookup tables when ``train_op``
  allows: ``estimator.engine.sparse``); a non-finite loss changes nothing, then or later.
* EVAL ``eval_step(model, state, acc, features, labels) -> (acc', outputs, info)``:
  ``acc`` holds the merged metrics, the sum of batch losses and the number of batches.
* TRAIN with training metrics (``RunConfig(train_metrics_steps=N)``)
  ``train_metrics_step(model, state, acc, features, labels) -> (state', acc', outputs,
  info)``: a train step that also merges the batch's ``eval_metric_ops`` (computed with the
  variables the batch saw, before the update) into ``acc``, evaluation's accumulator. The
  host reads and resets ``acc`` every N steps; nothing leaves the device in between.
* PREDICT ``predict_step(model, state, features) -> (predictions, outputs, info)``.

``outputs`` maps the names hooks can fetch (``"loss"``, ``identity`` names, summaries,
arrays held by hooks made inside ``model_fn``) to arrays. Their fused multi-step forms, and
which functions run each mode, are ``estimator.engine.programs``.

A ``model_fn`` that records a histogram (``estimator.summary``) has none of its summaries
among its step's ``outputs`` in a one-process job, except ``"loss"`` (the step's loss):
:func:`summary_step`, a program of their own, computes them from the state before the step
and its batch, at the steps whose hooks fetch them (``SummarySaverHook``: every
``save_summary_steps``), as TF runs its summary ops only when a hook fetches them. In the
step they would cost at every step, and in its compile: outputs carried through every step
of a fused call, each summary's reduction a kernel of its own (``benchmarks/dnn_summaries.py``
and ``benchmarks/census_vs_hand_written.py`` measure both for the census DNN). Their names
are in ``StepInfo.output_names`` and ``StepInfo.apart``. Scalar and text summaries alone
stay outputs (another program would cost them more than they cost the step), and so do all
in a multi-process job: a program of their own, run where one process's hooks fetch them,
would have to run on every process.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from estimator import keys
from estimator.checkpoint import tree_form
from estimator.engine import row_plan, sparse, table_groups
from estimator.events import histograms
from estimator.hooks.session_run_hook import SessionRunHook
from estimator.hooks.summary import HISTOGRAM, ROW_MASK_SUFFIX, kind_of
from estimator.mode_keys import ModeKeys
from estimator.model import dtype_policy
from estimator.model.function import ModelFunction
from estimator.model.rows import RowAccess
from estimator.model.spec import EstimatorSpec
from estimator.model.train_op import row_rule, row_wise

__all__ = [
    "FetchName",
    "StepInfo",
    "TrainState",
    "batch_stats",
    "eval_step",
    "merge_stats",
    "predict_step",
    "replay",
    "run_model",
    "summary_step",
    "traced",
    "train_batch",
    "train_metrics_step",
    "train_step",
]


class TrainState(NamedTuple):
    """The state of a model between steps.

    Attributes:
      trainable: ``{name: array}`` updated by ``train_op``.
      non_trainable: ``{name: array}`` updated by ``estimator.assign``.
      opt_state: ``train_op``'s state in its saved form (``estimator.checkpoint.tree_form``:
        nested dicts keyed by name, as checkpoints hold it; the train step rebuilds
        optax's structure in its trace), or None outside training.
      global_step: shape=(), dtype=int32: the number of train steps run.
      non_finite_step: shape=(), dtype=int32: the first global step whose loss was NaN or
        infinite (that step was skipped), or -1.
      rng: shape=(2,), dtype=uint32: the base random key's data (from the seed; not
        checkpointed), or None for the model's own key. An argument of the compiled steps,
        not a constant in them, so programs do not depend on the seed.
    """

    trainable: dict
    non_trainable: dict
    opt_state: Any
    global_step: jax.Array
    non_finite_step: jax.Array
    rng: Any = None


@jax.tree_util.register_static
class StepInfo:
    """What a run of ``model_fn`` inside a step revealed besides arrays (static).

    Attributes:
      hooks: the mode's hooks from the ``EstimatorSpec`` (``training_hooks``,
        ``evaluation_hooks`` or ``prediction_hooks``), the very objects ``model_fn``
        returned (TF's identity semantics).
      chief_hooks: ``training_chief_hooks`` (TRAIN), else ``()``.
      output_names: the names of the step's ``outputs`` (what hooks may fetch besides
        ``global_step``).
      train_op: the ``optax.GradientTransformation`` (TRAIN), else None.
      row_tables: the trainable tables the train step updates row by row (sparse updates,
        ``estimator.engine.sparse``), sorted; ``()`` outside TRAIN.
      apart: the output names that the step leaves to :func:`summary_step` (array
        summaries), sorted; also in ``output_names``.
      groups: the ``estimator.engine.table_groups.Group`` s of tables the train step updates as
        one array; ``()`` outside TRAIN.
    """

    def __init__(
        self,
        hooks: tuple,
        chief_hooks: tuple,
        output_names: tuple,
        train_op,
        row_tables: tuple = (),
        apart: tuple = (),
        groups: tuple = (),
    ) -> None:
        self.hooks = hooks
        self.chief_hooks = chief_hooks
        self.output_names = output_names
        self.train_op = train_op
        self.row_tables = row_tables
        self.apart = apart
        self.groups = groups

    def replace(self, **changes) -> StepInfo:
        """A copy with ``changes`` (keyword arguments named as the attributes)."""
        return StepInfo(**{**vars(self), **changes})


class FetchName(str):
    """A name standing for an array that a hook created inside ``model_fn`` held."""


def _lift_hook_arrays(hooks: Iterable[SessionRunHook], outputs: dict) -> None:
    """Replaces traced arrays held by hooks made inside ``model_fn`` with the names of
    step outputs (added to ``outputs``), so the hooks can fetch them by name."""

    def lift(value, path):
        if isinstance(value, jax.core.Tracer):
            name = FetchName(path)
            outputs[name] = value
            return name
        if isinstance(value, dict):
            items = {k: lift(v, f"{path}/{k}") for k, v in value.items()}
            if any(items[k] is not value[k] for k in value):
                return type(value)(items)
        elif isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
            items = [lift(v, f"{path}/{i}") for i, v in enumerate(value)]
            if any(new is not old for new, old in zip(items, value, strict=True)):
                return type(value)(items)
        return value  # unchanged: keep the very object (hooks may share it)

    for index, hook in enumerate(hooks):
        for attr, value in list(vars(hook).items()):
            new = lift(value, f"hook_{index}_{type(hook).__name__}/{attr}")
            if new is not value:
                setattr(hook, attr, new)


_SPEC_HOOKS: dict[str, Callable[[EstimatorSpec], tuple[tuple, tuple]]] = {
    ModeKeys.TRAIN: lambda spec: (spec.training_hooks, spec.training_chief_hooks),
    ModeKeys.EVAL: lambda spec: (spec.evaluation_hooks, ()),
    ModeKeys.PREDICT: lambda spec: (spec.prediction_hooks, ()),
}


def _run(
    model: ModelFunction,
    mode: str,
    state: TrainState,
    features,
    labels,
    trainable=None,
    rows=None,
    train_metrics: bool = False,
):
    """``model_fn`` on the state's variables: ``(spec, frame, outputs, info)``."""
    variables = {
        "trainable": state.trainable if trainable is None else trainable,
        "non_trainable": state.non_trainable,
    }
    spec, frame = model.apply(
        mode,
        features,
        labels,
        variables,
        state.global_step,
        rows,
        state.rng,
        train_metrics=train_metrics,
    )
    hooks, chief_hooks = _SPEC_HOOKS[mode](spec)
    apart = _apart(frame)
    outputs = {**frame.named, **{k: v for k, v in frame.summaries.items() if k not in apart}}
    if spec.loss is not None:
        outputs[keys.LOSS] = spec.loss
    _lift_hook_arrays(tuple(hooks) + tuple(chief_hooks), outputs)
    names = tuple(sorted({*outputs, *apart}))
    info = StepInfo(tuple(hooks), tuple(chief_hooks), names, spec.train_op, apart=apart)
    return spec, frame, outputs, info


def _apart(frame) -> tuple:
    """The names of the run's summaries, but ``"loss"``, which its step leaves to
    :func:`summary_step`: all of them when it records a histogram, else none (a program
    of its own is worth its compile where a histogram's values would be step outputs;
    a few scalars cost the step less than another program), and none in a multi-process
    job (see the module docstring)."""
    if jax.process_count() > 1:
        return ()
    names = [n for n in frame.summaries if n != keys.LOSS]
    if not any(kind_of(n) == HISTOGRAM for n in names):
        return ()
    return tuple(sorted(names))


def summary_step(model: ModelFunction, mode: str, state: TrainState, features, labels=None):
    """The summaries of ``mode``'s step on this batch (``StepInfo.apart``): ``{name:
    array}``, from ``model_fn`` run forward on ``state``, the state the step starts from
    (its variables, global step and random key: the values the step would have output).

    A program of its own, run only at the steps whose hooks fetch them (see the module
    docstring); ``model_fn`` runs in ``mode`` as in the step, without the train step's row
    by row table access (``estimator.engine.sparse``), which reads the same values. A
    histogram's value is its bucket counts (``estimator.events.histograms.counts``, over
    the rows its row mask keeps), a row mask's the mask."""
    frame = _run(model, mode, state, features, labels)[1]
    values = {name: frame.summaries[name] for name in _apart(frame)}
    # Histograms leave the device binned (TF bins them in its graph too).
    return {
        name: histograms.counts(value, values.get(name + ROW_MASK_SUFFIX))
        if kind_of(name) == HISTOGRAM
        else value
        for name, value in values.items()
    }


def run_model(model: ModelFunction, mode: str, state: TrainState, features, labels) -> StepInfo:
    """The :class:`StepInfo` of one forward run of ``model_fn`` (its hooks: TF calls
    ``model_fn``, and so creates its hooks anew, on every ``train``/``evaluate``/``predict``
    call)."""
    return _run(model, mode, state, features, labels)[3]


def _sparse_tables(model: ModelFunction, state: TrainState, features, labels) -> dict:
    """``{table: ids per step}`` to update row by row (``estimator.engine.row_plan``)."""

    def run(trainable, access, non_trainable, features, labels, global_step, rng):
        variables = {"trainable": trainable, "non_trainable": non_trainable}
        spec, _ = model.apply(ModeKeys.TRAIN, features, labels, variables, global_step, access, rng)
        return spec.loss, spec.train_op

    args = (state.non_trainable, features, labels, state.global_step, state.rng)
    return row_plan.tables(model, run, state.trainable, args)


def train_step(model: ModelFunction, state: TrainState, features, labels):
    """One train step: ``(state', outputs, info)`` (see the module docstring)."""
    new_state, outputs, info, _ = _train(model, state, features, labels, metrics=False)
    return new_state, outputs, info


def train_batch(model: ModelFunction, state: TrainState, features, labels):
    """One train step and its batch's metric statistics: ``(state', outputs, info,
    stats)``, ``stats`` as :func:`batch_stats`'s (metrics, loss, one batch).

    The metrics are the TRAIN run's ``eval_metric_ops`` (the canned heads return theirs in
    TRAIN mode for such a step), computed in the same forward pass as the loss, with the
    variables before the update. A ``model_fn`` that returns ``eval_metric_ops`` only in
    EVAL mode (TF's habit) is also run in EVAL mode on the batch, with those same variables:
    one more forward pass, which XLA does not share with the training one.

    Raises:
      ValueError: a metric named ``loss`` or ``global_step`` (TF's messages).
    """
    return _train(model, state, features, labels, metrics=True)


def _train(model: ModelFunction, state: TrainState, features, labels, *, metrics: bool):
    """A train step; with ``metrics``, also its batch's metric statistics (else None).

    The sparse plan's candidates are the tables ``lookup_rows`` is known to read
    (``estimator.engine.row_plan``). When the run looks up another table that its
    ``train_op`` may update row by row (a training resumed from a checkpoint whose
    metadata does not record it), the step raises ``row_plan.LookupsFound``; the caller
    traces it again (``row_plan.planned``), with that table a candidate. The run records
    the candidates it found (``ModelFunction.sparse_candidates``, saved in checkpoints'
    metadata). The planned tables reach ``model_fn`` marked (``row_plan.mark``), so the
    trace shows how it used them."""
    known = model.init_lookups.get(ModeKeys.TRAIN, frozenset())
    tables = _sparse_tables(model, state, features, labels)
    # Small tables are differentiated whole, as dense variables; their lookups' ids give
    # the rows the step updates (estimator.engine.sparse.whole_tables). Those under one
    # elementwise rule of train_op are one array (estimator.engine.table_groups), by its first name.
    whole = sparse.whole_tables(tables, state.trainable)
    groups = table_groups.table_groups(whole, state.trainable, model.row_rule)
    grouped = frozenset(n for g in groups for n in g.names)
    joined = table_groups.join_tables(groups, state.trainable)
    dense = {
        **{
            k: v
            for k, v in state.trainable.items()
            if (k not in tables or k in whole) and k not in grouped
        },
        **joined,
    }

    def loss_fn(dense, deltas):
        access = (
            RowAccess(
                deltas=deltas,
                whole=whole,
                grouped=table_groups.group_lookups(groups, dense),
                recorded=bool(model.unchecked),
            )
            if tables
            else None
        )
        plain = {k: v for k, v in dense.items() if k not in grouped}  # but the groups' arrays
        marked = row_plan.mark(model, {**state.trainable, **plain}, tables)
        trainable = {**state.trainable, **plain, **marked}
        spec, frame, outputs, info = _run(
            model, ModeKeys.TRAIN, state, features, labels, trainable, access, metrics
        )
        rows_ok = row_wise(info.train_op)
        model.sparse_candidates = frozenset(n for n in frame.lookups if rows_ok(n))
        if model.sparse_candidates - known:
            raise row_plan.LookupsFound(known | frame.lookups)
        rule = row_rule(info.train_op)
        if table_groups.table_groups(whole, state.trainable, rule) != groups:
            raise row_plan.RuleFound(rule)
        opt_state = _optimizer_state(info.train_op, state)
        # mixed_float16: the loss is differentiated scaled; train_op unscales (dtype_policy).
        scale = dtype_policy.loss_scale(opt_state)
        ids = {}
        if access is not None:
            access.check_complete()
            ids = {name: jnp.concatenate(parts) for name, parts in access.ids.items()}
        non_trainable = {**state.non_trainable, **frame.assigned}
        objective = spec.loss if scale is None else spec.loss * scale.astype(spec.loss.dtype)
        batch_metrics = spec.eval_metric_ops if metrics else None
        aux = (spec.loss, non_trainable, outputs, info, ids, batch_metrics, opt_state)
        return objective, aux

    by_rows = {name: count for name, count in tables.items() if name not in whole}
    (_, aux), (grads, delta_grads) = jax.value_and_grad(loss_fn, argnums=(0, 1), has_aux=True)(
        dense, sparse.zero_deltas(by_rows, state.trainable)
    )
    loss, non_trainable, outputs, info, ids, batch_metrics, old_opt_state = aux
    stats = _train_stats(model, state, features, labels, batch_metrics, loss) if metrics else None
    # The update sees each group as one table (its array, slots, ids and row mask).
    old_opt_state = table_groups.group_slots(old_opt_state, groups, state.trainable)
    updated = (tables.keys() - grouped) | joined.keys()
    variables = {**state.trainable, **joined}
    rows = (
        sparse.gather(variables, old_opt_state, delta_grads, ids, (whole - grouped) | joined.keys())
        if tables
        else None
    )
    params = dense if rows is None else {**dense, **rows.params}
    opt_state = old_opt_state if rows is None else rows.state
    if rows is not None:
        grads = {**grads, **rows.grads}

    def apply(_):
        updates, new_opt_state = info.train_op.update(grads, opt_state, params)
        new_params = optax.apply_updates(params, updates)
        if rows is not None and rows.whole:
            new_params, new_opt_state = sparse.looked_up_only(
                rows, params, opt_state, new_params, new_opt_state
            )
        return new_params, non_trainable, new_opt_state

    def skip(_):
        return params, state.non_trainable, opt_state

    # A non-finite loss leaves everything as it was, and so does every later step of this
    # loop: nothing computed after a NaN can reach the variables or a checkpoint before the
    # host sees the record (at its next fetch) and stops. A conditional, not an elementwise
    # select over every variable: the skipped branch costs nothing. Tables updated row by
    # row are outside it: only their rows are, and the unchanged rows are written back.
    finite = jnp.isfinite(loss)
    healthy = finite & (state.non_finite_step < 0)
    trainable, non_trainable, opt_state = jax.lax.cond(healthy, apply, skip, None)
    if rows is not None and len(rows.whole) < len(updated):
        new_rows = {name: trainable.pop(name) for name in updated if name not in rows.whole}
        full, opt_state = sparse.scatter(rows, variables, old_opt_state, new_rows, opt_state)
        trainable = {**full, **trainable}
    trainable, opt_state = table_groups.split_tables(groups, trainable, opt_state)
    new_state = TrainState(
        trainable,
        non_trainable,
        tree_form.saved_form(opt_state),
        state.global_step + 1,
        jnp.where(finite | (state.non_finite_step >= 0), state.non_finite_step, state.global_step),
        state.rng,
    )
    if tables:
        info = info.replace(row_tables=tuple(sorted(tables)), groups=groups)
    return new_state, outputs, info, stats


def _train_stats(model: ModelFunction, state: TrainState, features, labels, batch_metrics, loss):
    """A train step's metric statistics: its ``eval_metric_ops`` (TRAIN mode's), or, from a
    ``model_fn`` that returns them in EVAL mode only, an EVAL run's on the same batch."""
    if not batch_metrics:
        batch_metrics = _run(model, ModeKeys.EVAL, state, features, labels)[0].eval_metric_ops
    return _stats(batch_metrics, loss)


def _optimizer_state(train_op, state: TrainState):
    """``state.opt_state`` (its saved form) in the structure of ``train_op``'s state, which
    ``train_op.init`` gives abstractly (in the trace: nothing runs per step).

    Raises:
      ValueError: ``train_op``'s state has other leaves (the optimizer changed since the
        state was saved), listing the differences.
    """
    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), state.trainable)
    template = jax.eval_shape(train_op.init, abstract)
    return tree_form.structured(
        state.opt_state, template, "The optimizer state training starts from"
    )


def _stats(metrics: dict, loss) -> dict:
    """One batch's accumulator entry: its metrics, loss and a count of one.

    Raises:
      ValueError: a metric named ``loss`` or ``global_step`` (TF's messages).
    """
    for reserved, quoted in ((keys.LOSS, '"loss"'), (keys.GLOBAL_STEP, "`global_step`")):
        if reserved in metrics:  # TF quotes the two names differently
            raise ValueError(
                f"Metric with name {quoted} is not allowed, because Estimator already defines "
                "a default metric with the same name."
            )
    return {
        "metrics": metrics,
        "loss_sum": jnp.asarray(loss).astype(jnp.float32),
        "batches": jnp.ones((), jnp.int32),
    }


def merge_stats(acc: dict, stats: dict) -> dict:
    """``acc`` with one batch's ``stats`` merged in (metrics merged, losses and counts
    added): evaluation's and training metrics' accumulation."""
    return {
        "metrics": {k: acc["metrics"][k].merge(stats["metrics"][k]) for k in acc["metrics"]},
        "loss_sum": acc["loss_sum"] + stats["loss_sum"],
        "batches": acc["batches"] + stats["batches"],
    }


def batch_stats(model: ModelFunction, state: TrainState, features, labels):
    """One evaluation batch's metric statistics, loss and count: ``(stats, outputs, info)``.

    Raises:
      ValueError: a metric named ``loss`` or ``global_step`` (TF's messages).
    """
    spec, _, outputs, info = _run(model, ModeKeys.EVAL, state, features, labels)
    return _stats(spec.eval_metric_ops, spec.loss), outputs, info


def traced(model: ModelFunction, function: Callable, *args) -> tuple:
    """``function(model, *args)`` traced once per argument signature, kept on ``model``:
    ``(closed jaxpr, abstract result)``. :func:`replay` runs it again without tracing
    ``model_fn``: the structure a program needs before it is traced (an accumulator's) and
    the program itself then come from one run of ``model_fn``."""
    leaves, tree = jax.tree.flatten(args)
    key = (function, tree, tuple((x.shape, x.dtype, _weak(x)) for x in leaves))
    if key not in model.step_traces:
        make = jax.make_jaxpr(functools.partial(function, model), return_shape=True)
        model.step_traces[key] = make(*args)
    return model.step_traces[key]


def _weak(x) -> bool:
    aval = getattr(x, "aval", x)
    return bool(getattr(aval, "weak_type", False))


def replay(trace: tuple, *args):
    """The result of the function traced in ``trace`` (from :func:`traced` or
    ``jax.make_jaxpr(..., return_shape=True)``) on ``args``, computed from its jaxpr."""
    closed, shapes = trace
    out = jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *jax.tree.leaves(args))
    return jax.tree.unflatten(jax.tree.structure(shapes), out)


def eval_step(model: ModelFunction, state: TrainState, acc, features, labels):
    """One evaluation step: ``(acc', outputs, info)``, the batch merged into ``acc``.
    ``batch_stats`` is replayed from its one trace (:func:`traced`), which also gave the
    accumulator's structure (``StepCompiler.empty_accumulator``)."""
    args = (state, features, labels)
    stats, outputs, info = replay(traced(model, batch_stats, *args), *args)
    return merge_stats(acc, stats), outputs, info


def train_metrics_step(model: ModelFunction, state: TrainState, acc, features, labels):
    """One train step whose batch's metrics are merged into ``acc``: ``(state', acc',
    outputs, info)``. :func:`train_batch` is replayed from its one trace (:func:`traced`),
    which also gave the accumulator's structure (``StepCompiler.empty_accumulator``)."""
    args = (state, features, labels)
    new_state, outputs, info, stats = replay(traced(model, train_batch, *args), *args)
    return new_state, merge_stats(acc, stats), outputs, info


def predict_step(model: ModelFunction, state: TrainState, features):
    """One prediction step: ``(predictions, outputs, info)``."""
    spec, _, outputs, info = _run(model, ModeKeys.PREDICT, state, features, None)
    return spec.predictions, outputs, info
