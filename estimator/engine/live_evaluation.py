"""Evaluation of the live training state, also spread over the processes of a job.

``InMemoryEvaluatorHook`` and ``ValidationHandler`` evaluate the variables on the device
now (no checkpoint) with ``Estimator.evaluate``'s loop. In a multi-process job (ElasticDL's
design) every process evaluates at the same step, the one the chief decided (a step count,
or a time broadcast from the chief: ``distribute.SyncedTimer``):

* each process reads its shard of the evaluation input (``input_fn(input_context)``:
  ``InputContext(num_input_pipelines=processes, input_pipeline_id=process)``) and runs it on
  its own devices, on its own copy of the variables, as many batches as its shard has: the
  shards may be uneven (one more batch, a shorter last batch), nothing is padded, and no
  process waits for another during the evaluation;
* at the end the processes exchange their accumulators (metric statistics, the sum of batch
  losses and the batch count: one gather) and merge them with the metrics' own ``merge``:
  sums of counts and weights, so the merged metrics are the whole set's, as if one process
  had evaluated every batch. ``loss`` is the mean of the batch losses over all processes'
  batches: a shard of whole batches (``dataset.batch(b).shard(n, i)``) gives exactly the
  single-process ``evaluate()``'s;
* every process returns the merged results; the chief writes them to ``eval_dir(name)``.

``steps`` bounds each process's batches (its shard's first ``steps``). Hooks given for the
evaluation run on every process, over its own batches.
"""

from __future__ import annotations

import copy
import functools
import time

import jax
import numpy as np
from jax.experimental import multihost_utils

from estimator import distribute
from estimator.engine.compiler import StepCompiler
from estimator.engine.input_pipeline import batch_pipeline, call_input_fn, host_batches, placement
from estimator.engine.steps import merge_stats
from estimator.mode_keys import ModeKeys
from estimator.model.padding import RowPadding

__all__ = ["evaluate"]

#: The key of the runtime's compilers of the per-process evaluation program.
LOCAL_EVAL = "eval_local"


def evaluate(runtime, session, input_fn, steps, hooks: list, name) -> dict:
    """Evaluates ``session``'s state (see the module docstring); returns the results.

    Raises:
      ValueError: a process whose shard of the evaluation input has no batch (on every
        process, naming them), and ``Estimator.evaluate``'s errors.
    """
    state = session.state
    if runtime.processes == 1:
        return runtime.evaluate(input_fn, steps, hooks, name, None, state)
    start = time.time()
    mesh = _local_mesh()
    compiler = _compiler(runtime, mesh)
    params = copy.deepcopy(runtime.model.params)
    result = call_input_fn(input_fn, ModeKeys.EVAL, params, runtime.config, runtime.input_context())
    pad = RowPadding() if runtime.model.masks_padding else None
    place = placement(mesh)
    checks = runtime.model.input_checks
    prefetcher = batch_pipeline(result, ModeKeys.EVAL, runtime.input_transform, place, pad, checks)
    _check_every_shard_has_a_batch(prefetcher)
    local = compiler.place(distribute.local_copy(state._replace(opt_state=None)))
    acc, finalize, _ = runtime.evaluation_loop(compiler, prefetcher, steps, hooks, None, local)
    merged = _merge_over_processes(jax.device_get(acc))
    metrics, loss = jax.device_get(finalize(merged))
    return runtime.record_evaluation(metrics, loss, session.global_step, name, None, start)


def _local_mesh():
    """This process's devices as a data-parallel mesh (None for one device)."""
    devices = jax.local_devices()
    if len(devices) == 1:
        return None
    return jax.sharding.Mesh(np.array(devices), ("data",))


def _compiler(runtime, mesh) -> StepCompiler:
    """The evaluation program on this process's devices (compiled once, kept)."""
    if LOCAL_EVAL not in runtime._compilers:
        sharding = (
            None
            if mesh is None
            else functools.partial(distribute.state_shardings, mesh=mesh, partitions=None)
        )
        runtime._compilers[LOCAL_EVAL] = StepCompiler(
            runtime.model,
            ModeKeys.EVAL,
            sharding,
            runtime.config.steps_per_execution,  # no process waits for another: fuse freely
            host_batches=host_batches(mesh),
            fast_compile=runtime.fast_compile,
        )
    return runtime._compilers[LOCAL_EVAL]


def _check_every_shard_has_a_batch(prefetcher) -> None:
    """Raises on every process when some process's shard is empty (its accumulator would
    have no structure to merge), instead of leaving the others waiting."""
    try:
        prefetcher.peek()
        has_batch = True
    except StopIteration:
        has_batch = False
    flags = np.asarray(multihost_utils.process_allgather(np.int32(has_batch)))
    empty = [int(i) for i in np.flatnonzero(flags == 0)]
    if empty:
        raise ValueError(
            f"The evaluation input of process(es) {empty} of this {len(flags)}-process job has "
            "no batch: in a distributed evaluation every process evaluates its shard "
            "(input_fn(input_context) reads 1/input_context.num_input_pipelines of the data). "
            "Use an evaluation set with at least one batch per process, or shard it by batches: "
            "dataset.batch(b).shard(ctx.num_input_pipelines, ctx.input_pipeline_id)."
        )


def _merge_over_processes(acc):
    """Every process's accumulator (host values), merged as batches are: metric
    statistics with ``Metric.merge``, losses and batch counts added."""
    gathered = multihost_utils.process_allgather(acc)  # each leaf: [processes, ...]
    count = jax.process_count()
    parts = [jax.tree.map(lambda x, i=i: np.asarray(x)[i], gathered) for i in range(count)]
    return functools.reduce(merge_stats, parts)
