"""The engine: how an Estimator runs ``model_fn``.

* ``steps`` — the pure train/eval/predict step functions and ``TrainState``;
  ``init_run`` — a fresh state, from one init-mode run of ``model_fn`` per input
  signature, which also plans the sparse updates (``sparse``: tables updated row by
  row; ``row_plan`` — where each step's plan comes from, and its check).
* ``compiler`` — ``StepCompiler``: a mode's step compiled once per batch signature.
* ``state`` — where a run's state comes from (memory, a checkpoint, a warm start: the
  Estimator hands it the warm start as a callable, and ``train()`` the ``train_op``).
* ``loop`` — the session loop: the compiled steps, with the call's hooks and handlers
  called through their dispatcher (``estimator.handlers.events.Dispatcher``); ``session`` —
  what hooks and handlers see of it; ``epochs`` — the input's pass boundaries, and more
  passes while a handler wants them; ``lazy_outputs`` —
  a step's values for ``batch_end``, fetched when read.
* ``input_pipeline`` — the host input pipeline: what an ``input_fn`` may return, the
  host phase, canonical dtypes, and batches placed ahead of the step (``Prefetcher``);
  ``input_shapes`` — every batch of a call keeps the first one's shapes but for the
  batch dimension (``ShapeCheck``).
* ``live_evaluation`` — evaluation of the live training state, over a job's processes.
* ``runtime`` — ``Runtime``: one Estimator's engine (``Estimator.runtime``).
* ``default_hooks`` — the hooks ``train()`` adds, in TF's order.
* ``interrupt``, ``model_dir_lock``, ``eval_results`` — signals, the one-writer lock on
  ``model_dir``, evaluation's final values.

Layers, each importing only those before it (the complete map: ``docs/architecture.md``,
checked by ``tests/test_layout.py``): the base (keys, config, storage, checkpoints),
``estimator.hooks`` and ``estimator.handlers`` (the protocols, TF's hooks, Gluon's
handlers), ``estimator.model`` (what ``model_fn`` writes), ``estimator.inputs``,
``estimator.distribute``, this package, ``estimator.export``, ``estimator.Estimator``,
``estimator.training``.
"""

from estimator.engine.compiler import StepCompiler as StepCompiler
from estimator.engine.runtime import Runtime as Runtime
from estimator.engine.steps import StepInfo as StepInfo
from estimator.engine.steps import TrainState as TrainState

__all__ = ["Runtime", "StepCompiler", "StepInfo", "TrainState"]
