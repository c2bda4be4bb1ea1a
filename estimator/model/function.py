"""``ModelFunction``: the one way ``model_fn`` is run (train, evaluate, predict, export).

It passes TF's arguments by name (``labels``, ``mode``, ``params``, ``config`` when
``model_fn`` takes them; TF's ``_call_model_fn``), runs the function under the variable
transform (``estimator.model.variables``) and checks that it returned an
``EstimatorSpec``. The engine's step functions and the export writer call
:meth:`ModelFunction.apply`; nothing else calls ``model_fn``.
"""

from __future__ import annotations

import difflib
import functools
import logging
import zlib
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from estimator.config import dtype_policies
from estimator.config.dtype_policies import DTypePolicy
from estimator.fn_args import fn_args
from estimator.model import dtype_policy
from estimator.model.input_checks import InputChecks
from estimator.model.padding import MASK_KEY
from estimator.model.spec import EstimatorSpec
from estimator.model.variables import APPLY, INIT, Frame, transform_context

__all__ = ["Features", "ModelFunction", "verify_model_fn_args"]

logger = logging.getLogger("estimator")

_VALID_MODEL_FN_ARGS = {"features", "labels", "mode", "params", "self", "config"}


def verify_model_fn_args(model_fn: Callable, params) -> None:
    """TF's ``_verify_model_fn_args``: the names ``model_fn`` may take.

    Raises:
      ValueError: no ``features`` argument, ``params`` given to a ``model_fn`` without a
        ``params`` argument, or arguments other than TF's (TF's messages).
    """
    args = set(fn_args(model_fn))
    if "features" not in args:
        raise ValueError(f"model_fn ({model_fn}) must include features argument.")
    if params is not None and "params" not in args:
        raise ValueError(
            f"model_fn ({model_fn}) does not include params argument, but params ({params}) "
            "is passed to Estimator."
        )
    if params is None and "params" in args:
        logger.warning(
            "Estimator's model_fn (%s) includes params argument, but params are not passed "
            "to Estimator.",
            model_fn,
        )
    unexpected = sorted(args - _VALID_MODEL_FN_ARGS)
    if unexpected:
        raise ValueError(f"model_fn ({model_fn}) has following not expected args: {unexpected}")


class Features(dict):
    """The features dict ``model_fn`` receives: a ``dict`` whose missing key raises a
    ``KeyError`` that lists the keys present (TF's plain dict says only ``KeyError: 'x'``).

    ``features.get``, ``in``, iteration and copies (``dict(features)``, ``{**features}``,
    which are plain dicts) behave as a dict's. A pytree node like a dict (keys sorted,
    ``DictKey`` paths): ``jax.tree.map(f, features)`` and ``jax.jit`` keep the type. A tree
    operation over ``features`` and a plain dict together (``jax.tree.map(f, features,
    other)``) needs ``dict(features)``: JAX compares node types.
    """

    __slots__ = ()

    def __missing__(self, key):
        present = sorted(self, key=str)
        close = difflib.get_close_matches(str(key), [str(k) for k in present], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise KeyError(
            f"{key!r}: features has no key {key!r}; it has {present}{hint}. The keys are those "
            "of input_fn's features (after the Estimator's input_transform, when it has one)."
        )


def _flatten_with_keys(features: Features):
    keys = sorted(features)
    return [(jax.tree_util.DictKey(k), features[k]) for k in keys], tuple(keys)


jax.tree_util.register_pytree_with_keys(
    Features,
    _flatten_with_keys,
    lambda keys, values: Features(zip(keys, values, strict=True)),
    lambda features: ([features[k] for k in sorted(features)], tuple(sorted(features))),
)


def seed_key_data(seed: int) -> np.ndarray:
    """``jax.random.key_data(jax.random.key(seed))``, shape ``(2,)`` ``uint32``, computed
    on the host for JAX's default key (threefry, 32-bit integers: ``[0, seed mod 2**32]``,
    JAX's ``threefry_seed``); other configurations ask JAX. Making the key with JAX runs
    two eager ops, each a program to compile, before anything else can start."""
    if (
        jax.config.jax_default_prng_impl == "threefry2x32"
        and not jax.config.jax_enable_x64
        and -(2**63) <= seed < 2**63
    ):
        return np.array([0, seed & 0xFFFFFFFF], np.uint32)
    return np.asarray(jax.random.key_data(jax.random.key(seed)))


def _with_policy(spec: EstimatorSpec, policy: DTypePolicy) -> EstimatorSpec:
    """Under a mixed policy: the loss in float32 (a lower-precision loss from the user's
    own layers is widened; gradients then reach the variables in float32), and under
    ``mixed_float16`` the ``train_op`` wrapped in dynamic loss scaling."""
    if not policy.mixed:
        return spec
    changes = {}
    loss = spec.loss
    if loss is not None and jnp.issubdtype(loss.dtype, jnp.floating) and loss.dtype != jnp.float32:
        changes["loss"] = loss.astype(jnp.float32)
    if policy.loss_scaling and spec.train_op is not None:
        changes["train_op"] = dtype_policy.loss_scaling(spec.train_op)
    return spec._replace(**changes) if changes else spec


class ModelFunction:
    """A user's ``model_fn`` with its params, config and random seed.

    Args:
      model_fn: the user's function.
      params: the Estimator's params (passed when ``model_fn`` takes ``params``).
      config: the ``RunConfig``.
      seed: the base random seed (``RunConfig.tf_random_seed``, or one drawn).

    Attributes:
      trace_count: how many times :meth:`apply` has run ``model_fn`` (each run is a
        trace: ``model_fn`` runs on tracers, never per step).
    """

    def __init__(self, model_fn: Callable, params: dict, config, seed: int) -> None:
        self.model_fn = model_fn
        self.params = params
        self.config = config
        # The key as data (uint32), passed to compiled steps as an argument (the state's
        # ``rng``), so a program does not depend on the seed: Estimators with other seeds
        # reuse it (persistent compilation cache) instead of compiling their own.
        self.key_data = seed_key_data(seed)
        self.arg_names = set(fn_args(model_fn))
        self.trace_count = 0
        # The sparse plans (estimator.engine.row_plan): {plan key: {table: ids per step}}
        # made or checked in this process; {input signature's digest: plan} that the next
        # checkpoints record (this process's, and those read from a checkpoint's
        # metadata); the keys whose recorded plan a step's trace contradicted; the
        # recorded plans the step being traced uses, until its trace is checked.
        self.sparse_plans: dict = {}
        self.plan_records: dict[str, dict[str, int]] = {}
        self.rejected_plans: set = set()
        self.unchecked: list = []
        # {mode: names of the variables lookup_rows reads}: from the init run, else from a
        # checkpoint's metadata or a train step's trace; the tables a train step may update
        # row by row (estimator.engine.row_plan).
        self.init_lookups: dict[str, frozenset] = {}
        # The tables the last train step looked up under a train_op that may update them
        # row by row (the sparse plan's candidates; saved in checkpoints' metadata).
        self.sparse_candidates: frozenset = frozenset()
        # row_rule(train_op) of the TRAIN mode's model_fn, once a run showed it (the init
        # run, else a train step's trace): the tables a train step updates as one array.
        self.row_rule = None
        self.step_traces: dict = {}  # see estimator.engine.steps.traced
        # Batches may be padded (estimator.model.padding.masks_padding).
        self.masks_padding = bool(getattr(model_fn, "masks_padding", False))
        # Host checks of input features (ids of embedding lookups) the input pipeline runs.
        self.input_checks = InputChecks()

    def check_labels(self, labels) -> None:
        """Raises TF's ValueError when ``input_fn`` gives labels ``model_fn`` can't take."""
        if "labels" not in self.arg_names and labels is not None:
            raise ValueError("model_fn does not take labels, but input_fn returns labels.")

    def apply(
        self,
        mode: str,
        features,
        labels,
        variables: dict | None = None,
        global_step=0,
        rows=None,
        key_data=None,
        *,
        train_metrics: bool = False,
    ) -> tuple[EstimatorSpec, Frame]:
        """Runs ``model_fn`` once.

        Args:
          mode: a ``ModeKeys`` value.
          features, labels: arrays (traced or concrete) as ``input_fn`` gives them. For a
            ``model_fn`` marked ``masks_padding``, ``features[MASK_KEY]`` (a padded batch's
            row mask, see ``estimator.model.padding``) is taken out of ``features`` and
            passed as ``row_mask()``. A dict of features reaches ``model_fn`` as
            :class:`Features` (a missing key's error lists the keys present).
          variables: ``{"trainable": {name: array}, "non_trainable": {...}}`` to read; None
            creates every variable from its initializer (the *init* run).
          global_step: int32 scalar: what ``get_global_step()`` returns; it also picks the
            step's random key (``next_rng_key``).
          rows: a ``estimator.model.rows.RowAccess``: how table lookups read their rows in
            a train step with sparse updates, or in the init run that plans them.
          key_data: ``uint32`` key data of the base random key (the state's ``rng``); None
            uses this model's own key.
          train_metrics: keyword-only; a TRAIN run whose ``eval_metric_ops`` the step
            accumulates (``RunConfig(train_metrics_steps=...)``): ``Frame.train_metrics``,
            which tells the canned heads to return their metrics in TRAIN mode.

        Returns:
          ``(spec, frame)``: the ``EstimatorSpec`` and what the run read and wrote
          (variables created, assigned, named arrays, summaries).

        Raises:
          ValueError: labels ``model_fn`` does not take, or a return value that is not an
            ``EstimatorSpec``; whatever ``model_fn`` raises.
        """
        self.check_labels(labels)
        mask = None
        if self.masks_padding and isinstance(features, dict) and MASK_KEY in features:
            features = dict(features)
            mask = features.pop(MASK_KEY)
        if type(features) is dict:
            features = Features(features)  # once per trace: no cost in the compiled step
        global_step = jnp.asarray(global_step, jnp.int32)
        if variables is None:
            frame = Frame(
                INIT, functools.partial(self.init_key, mode, key_data), global_step, rows=rows
            )
        else:
            frame = Frame(
                APPLY,
                functools.partial(self.step_key, global_step, key_data),
                global_step,
                trainable=variables["trainable"],
                non_trainable=dict(variables["non_trainable"]),
                rows=rows,
            )
        frame.row_mask = mask
        frame.mode = mode
        frame.input_checks = self.input_checks
        frame.input_paths = {
            id(leaf): path for path, leaf in jax.tree_util.tree_flatten_with_path(features)[0]
        }
        policy = dtype_policies.get(getattr(self.config, "dtype_policy", None))
        frame.dtype_policy = policy
        frame.train_metrics = train_metrics
        kwargs = {}
        if "labels" in self.arg_names:
            kwargs["labels"] = labels
        if "mode" in self.arg_names:
            kwargs["mode"] = mode
        if "params" in self.arg_names:
            kwargs["params"] = self.params
        if "config" in self.arg_names:
            kwargs["config"] = self.config
        self.trace_count += 1
        with transform_context(frame):
            spec = self.model_fn(features=features, **kwargs)
        if not isinstance(spec, EstimatorSpec):
            raise ValueError(
                f"model_fn should return an EstimatorSpec; it returned {type(spec).__name__}."
            )
        return _with_policy(spec, policy), frame

    def public(self) -> Callable:
        """TF's ``Estimator.model_fn``: ``(features, labels, mode, config) -> EstimatorSpec``
        with the Estimator's params. Variables take their initial values: no checkpoint is
        read, as TF's graph variables stay uninitialised until a session runs."""

        def public_model_fn(features, labels, mode, config):
            model = ModelFunction(self.model_fn, self.params, config, 0)
            model.key_data = self.key_data
            return model.apply(mode, features, labels)[0]

        return public_model_fn

    @property
    def base_key(self) -> jax.Array:
        """``jax.random.key(seed)``, made where it is used (in a trace it is part of the
        program; outside one, an eager op)."""
        return jax.random.wrap_key_data(self.key_data)

    def _key(self, key_data) -> jax.Array:
        return self.base_key if key_data is None else jax.random.wrap_key_data(key_data)

    def step_key(self, global_step, key_data=None) -> jax.Array:
        """The random key of a step: the base key folded with the global step."""
        return jax.random.fold_in(self._key(key_data), global_step)

    def init_key(self, mode: str, key_data=None) -> jax.Array:
        """The random key of the init run of ``mode``."""
        return jax.random.fold_in(self._key(key_data), zlib.crc32(f"init/{mode}".encode()) >> 1)
