"""Where the state of a train, evaluate or predict call comes from.

In order: the state kept in memory from the last ``train()`` or ``evaluate()`` while its
checkpoint is still the latest (TF re-reads the checkpoint on every call), the given or
latest checkpoint (restored with orbax into the model's structure), or fresh initial
values, warm-started when the Estimator has a ``warm_start_from`` (TF's rule: only
without a checkpoint; evaluate/predict are warm-started too).

What this needs it is given: the warm start as a callable (the Estimator's
``estimator.warm_starting.WarmStart``; the engine does not import the warm-starting
rules), and a training run's ``train_op`` with the :meth:`StateSource.read` that needs it.
"""

from __future__ import annotations

import weakref
from typing import Protocol

import jax
import numpy as np
import optax

from estimator import checkpoint as ckpt
from estimator.checkpoint import tree_form
from estimator.engine.compiler import StepCompiler, signature
from estimator.engine.steps import TrainState
from estimator.mode_keys import ModeKeys
from estimator.model.function import ModelFunction


class WarmStartFn(Protocol):
    """What :class:`StateSource` calls to warm-start a fresh state."""

    def __call__(self, state: TrainState, *, key: jax.Array, init_opt_state) -> TrainState: ...

    def skipped(self, checkpoint_path: str) -> None: ...


class StateSource:
    """Reads and caches the :class:`TrainState` runs start from (internal).

    Args:
      model: the :class:`ModelFunction`.
      sharding: ``sharding(state) -> pytree of shardings``: where the state lives (None:
        the default device).
      warm_start: None, or ``warm_start(state, *, key, init_opt_state) -> state`` with a
        ``skipped(checkpoint_path)`` method (``estimator.warm_starting.WarmStart``): applied
        to fresh states; ``skipped`` is told when training resumes from a checkpoint
        instead.
    """

    def __init__(
        self, model: ModelFunction, sharding, warm_start: WarmStartFn | None = None
    ) -> None:
        self.model = model
        self.sharding = sharding
        self.warm_start = warm_start
        self._cache: tuple[str, TrainState] | None = None
        self._abstracts: dict = {}  # (mode, batch signature) -> abstract state
        self._from_kept: set = set()  # keys whose abstract came from the kept state or a
        # checkpoint's metadata (not from model_fn)
        self._not_kept: set = set()  # keys for which the kept state's variables did not fit
        self._readers: weakref.WeakSet = weakref.WeakSet()  # see lend()

    def keep(self, path: str, state: TrainState) -> None:
        """Remembers ``state`` as the content of checkpoint ``path``."""
        self._cache = (path, state)

    def lend(self, reader) -> None:
        """Notes that ``reader`` (an object holding a state from :meth:`read`, alive while
        it reads) may still use the cached arrays: training then starts from a copy."""
        self._readers.add(reader)

    def abstract(self, compiler: StepCompiler, batch, path: str | None = None) -> TrainState:
        """The state's shapes and dtypes (with its sharding) for this mode's model, decided
        once per mode and batch signature, without running ``model_fn`` to create the
        variables when they exist: the kept state's after a ``train()`` or ``evaluate()``
        of this Estimator, else those checkpoint ``path``'s metadata lists (training takes
        the optimizer state's structure from there too, in its saved form). Otherwise (no
        checkpoint, or one written before its metadata described the optimizer state)
        ``model_fn`` runs once, abstractly, in init mode.

        Raises:
          estimator.checkpoint.DataLossError: ``path``'s metadata is damaged.
        """
        key = (compiler.mode, signature(batch))
        if key not in self._abstracts:
            training = compiler.mode == ModeKeys.TRAIN
            given = key not in self._not_kept
            kept = None if self._cache is None else self._cache[1]
            abstract = None
            if given and kept is not None and not (training and kept.opt_state is None):
                abstract = jax.tree.map(
                    lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype),
                    kept if training else kept._replace(opt_state=None),
                )
            elif given and path is not None:
                abstract, candidates, plans = _saved_state(path, self.model.key_data, training)
                if abstract is not None and candidates is not None:
                    # The sparse plan's candidates, which an init run would have given,
                    # and the plans the step's trace checks (estimator.engine.row_plan).
                    self.model.init_lookups.setdefault(compiler.mode, candidates)
                    for name, plan in plans.items():
                        self.model.plan_records.setdefault(name, plan)
            if abstract is not None:
                self._from_kept.add(key)
            else:
                labels = batch[1] if len(batch) > 1 else None
                abstract = compiler.abstract_state(batch[0], labels)
            if self.sharding is not None:
                abstract = jax.tree.map(
                    lambda s, where: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=where),
                    abstract,
                    self.sharding(abstract),
                )
            self._abstracts[key] = abstract
        return self._abstracts[key]

    def retry_without_kept(self, compiler: StepCompiler, batch) -> bool:
        """After the first trace of a mode failed on the kept state's or the checkpoint's
        variables or optimizer state (the model now asks for others: see
        :meth:`abstract`), forgets them for this mode and batch signature and returns
        True: the caller runs ``model_fn`` in init mode instead, and a checkpoint's restore
        then says what differs. False when they were not used."""
        key = (compiler.mode, signature(batch))
        if key not in self._from_kept:
            return False
        self._from_kept.discard(key)
        self._abstracts.pop(key, None)
        self._not_kept.add(key)
        return True

    def read(
        self,
        compiler: StepCompiler,
        batch,
        path: str | None,
        *,
        training: bool,
        abstract: TrainState | None = None,
        train_op: optax.GradientTransformation | None = None,
    ) -> TrainState:
        """The state to run from: cached, restored from ``path``, warm-started or new.

        A cached training state is handed over once (the train step donates it); without
        ``training`` the optimizer state is left out. The cache is used only when its
        variables have the shapes the model now asks for (``abstract``, computed when not
        given); otherwise the checkpoint is read, whose restore explains the difference.
        ``train_op`` (training only: the ``train_op`` of the step about to run) lets a warm
        start rebuild the optimizer state from the warm-started variables.
        """
        labels = batch[1] if len(batch) > 1 else None
        if path is not None and training and self.warm_start is not None:
            self.warm_start.skipped(path)
        if (
            path is not None
            and self._cache is not None
            and self._cache[0] == path
            and _same_variables(
                self._cache[1],
                abstract or self.abstract(compiler, batch, path),
            )
        ):
            cached = self._cache[1]
            if not training:
                return cached._replace(opt_state=None)
            if cached.opt_state is not None:
                # The train step donates (consumes) its state. Handed over as it is, without
                # a copy (a model with large tables must not need twice its memory), unless
                # a predict() generator still reads these arrays: then it gets a copy, made
                # by a transfer rather than a jitted copy (which would compile per shape).
                self._cache = None
                if not self._readers:
                    return cached
                return jax.tree.map(
                    lambda x: jax.device_put(x, x.sharding, may_alias=False), cached
                )
        if path is None:
            state = compiler.init_state(batch[0], labels)
            if self.warm_start is not None:
                state = compiler.place(self._warm_start(state, train_op))
            return state
        trainable, non_trainable, opt_state = ckpt.restore(
            path,
            abstract or self.abstract(compiler, batch, path),
            with_opt_state=training,
        )
        state = compiler.place(
            TrainState(
                trainable,
                non_trainable,
                opt_state,
                np.int32(ckpt.read_meta(path)["global_step"]),  # placed below: no eager op
                np.int32(-1),
                self.model.key_data,
            )
        )
        if not training:
            self._cache = (path, state)
        return state

    def _warm_start(self, state: TrainState, train_op) -> TrainState:
        """``state`` with the warm-started variables (``estimator.warm_starting``: TF's
        ``WarmStartSettings`` rules), the optimizer state rebuilt by ``train_op.init`` when
        training."""
        init_opt_state = None
        if state.opt_state is not None and train_op is not None:
            init_opt_state = jax.jit(lambda params: tree_form.saved_form(train_op.init(params)))
        return self.warm_start(
            state,
            key=jax.random.fold_in(self.model.base_key, 0x5741524D),  # "WARM"
            init_opt_state=init_opt_state,
        )


def _saved_state(path: str, key_data, training: bool) -> tuple:
    """``(state, candidates, plans)``: the abstract state of the variables checkpoint
    ``path``'s metadata lists, as :meth:`StateSource.read` restores it; the sparse plan's
    candidates its training recorded (None when not recorded); and its recorded sparse
    plans (``{input signature's digest: {table: ids per step}}``, ``{}`` when none or
    malformed: the step then plans as without them). With ``training``, the state has the
    optimizer state (its saved form), or is None when the metadata does not describe it (a
    checkpoint saved without it, or before its metadata described it)."""
    meta = ckpt.read_meta(path)
    trainable, non_trainable = ckpt.abstract_variables(meta)
    opt_state = None
    if training:
        try:
            opt_state = tree_form.from_description(meta["opt_state"])
        except (KeyError, ValueError):
            return None, None, {}  # model_fn's init run gives it; the restore checks the rest
    candidates = meta.get("sparse_candidates")
    candidates = frozenset(candidates) if isinstance(candidates, list) else None
    plans = meta.get("sparse_plans")
    plans = plans if _plans_form(plans) else {}
    scalar = jax.ShapeDtypeStruct((), np.int32)
    rng = None if key_data is None else jax.ShapeDtypeStruct(key_data.shape, key_data.dtype)
    return TrainState(trainable, non_trainable, opt_state, scalar, scalar, rng), candidates, plans


def _plans_form(plans) -> bool:
    """Whether ``plans`` has the form of recorded sparse plans: ``{str: {str: int}}``."""
    return isinstance(plans, dict) and all(
        isinstance(name, str)
        and isinstance(plan, dict)
        and all(isinstance(t, str) and type(n) is int and n > 0 for t, n in plan.items())
        for name, plan in plans.items()
    )


def _same_variables(state: TrainState, abstract: TrainState) -> bool:
    """Whether ``state``'s variables have ``abstract``'s names, shapes and dtypes."""
    return ckpt.variable_specs(state.trainable, state.non_trainable) == ckpt.variable_specs(
        abstract.trainable, abstract.non_trainable
    )
