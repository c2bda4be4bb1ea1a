"""Warm start: initialise a new model from another checkpoint or export
(``tf.estimator.WarmStartSettings``, ``tf.compat.v1.train.warm_start``).

Synopsis::

    import estimator as est

    ws = est.WarmStartSettings(
        ckpt_to_initialize_from="runs/old",        # a model_dir, a checkpoint or an export
        vars_to_warm_start=".*embedding.*",        # a regex: trainable variables only
        var_name_to_vocab_info={
            "input_layer/city_embedding/embedding_weights":
                est.VocabInfo("new_cities.txt", 120, 1, "old_cities.txt")},
        var_name_to_prev_var_name={"dense_1/kernel": "dense/kernel"})
    clf = est.Estimator(model_fn, "runs/new", warm_start_from=ws)   # or warm_start_from="runs/old"

When: as TF, only while ``model_dir`` has no checkpoint (the first ``train()`` of a new
model_dir, and ``evaluate``/``predict`` before any training). Once a checkpoint exists,
every later call and every restarted process resumes from it and warm start is skipped;
``train()`` logs that it skipped it and why.

Which variables (TF 2.15's rules):

* ``vars_to_warm_start`` a string: a regex matched with ``re.match`` (from the start of
  the name) against the **trainable** variables, as ``get_collection(TRAINABLE_VARIABLES,
  scope=regex)``. Names are matched with TF's ``":0"`` suffix (``"w:0"``) so TF's
  patterns keep their meaning: ``"v2[^/]"`` matches ``v2`` but not ``v2/...``.
* a list of strings: each a regex over **all** variables: trainable, non-trainable
  (batch-norm statistics) and optimizer state.
* None: only the variables in ``var_name_to_vocab_info``.

Optimizer state has no variables of its own in JAX: it is one optax pytree. Each of its
leaves is named here like a TF slot variable: ``<variable>/<path in the optax state>``
for a leaf kept per variable (``dense/kernel/0/mu`` is ``mu`` of the first transformation
of a chain for ``dense/kernel``; TF calls its counterpart ``dense/kernel/Adam``), and
``opt_state/<path>`` for the rest (``opt_state/0/count``). :func:`variable_names` lists
a checkpoint's names this way (``Estimator.get_variable_names()`` lists the variables
only).

Where this differs from TF (each a TF surprise):

* A selection that matches no variable raises (TF silently warm-starts nothing), and so
  does one none of whose variables is in the source. Selected variables that the source
  lacks keep their initial values and are listed in a warning (TF raises
  ``Tensor ... is not found``, so adding a layer forces a new regex).
* ``global_step`` is never warm-started (TF's ``[".*"]`` copies it, so the new model starts
  at the old step count and ``max_steps`` ends it early).
* Optimizer state follows its variable: the state of a renamed variable is read from the
  old name, that of a variable with a ``VocabInfo`` is remapped by the same vocabularies
  (new rows keep their initial state). The optimizer state is re-initialised from the
  warm-started variables before any selected state is copied.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from estimator import checkpoint as ckpt
from estimator.checkpoint import tree_form
from estimator.checkpoint.vocab_remap import VocabInfo, remap
from estimator.export import read_variables
from estimator.export._integrity import verify
from estimator.export._loader import MANIFEST
from estimator.io import fs, staging

__all__ = ["WarmStartSettings", "VocabInfo", "variable_names"]

logger = logging.getLogger("estimator")

OPT_STATE = "opt_state"


class WarmStartSettings(
    collections.namedtuple(
        "WarmStartSettings",
        [
            "ckpt_to_initialize_from",
            "vars_to_warm_start",
            "var_name_to_vocab_info",
            "var_name_to_prev_var_name",
        ],
    )
):
    """What to warm-start from, and how (``tf.estimator.WarmStartSettings``).

    Args:
      ckpt_to_initialize_from: a model directory (its latest checkpoint is used), a
        checkpoint (``<model_dir>/model.ckpt_<step>``) or an export directory written by
        ``export_saved_model`` (variables only; it has no optimizer state).
      vars_to_warm_start: a regex over trainable variables (default ``".*"``: all of them),
        a list of regexes over all variables including optimizer state, or None (only
        the keys of ``var_name_to_vocab_info``). See the module docstring.
      var_name_to_vocab_info: ``{variable name: VocabInfo}`` for variables whose
        vocabulary changed.
      var_name_to_prev_var_name: ``{variable name: its name in the source}``. Only maps
        names; ``vars_to_warm_start`` decides what is warm-started.

    Raises:
      ValueError: "`ckpt_to_initialize_from` MUST be set in WarmStartSettings" and TF's
        messages for a ``vars_to_warm_start`` that is not a str, a list of str or None;
        a map that is not a dict.
    """

    def __new__(
        cls,
        ckpt_to_initialize_from,
        vars_to_warm_start=".*",
        var_name_to_vocab_info=None,
        var_name_to_prev_var_name=None,
    ):
        if not ckpt_to_initialize_from:
            raise ValueError("`ckpt_to_initialize_from` MUST be set in WarmStartSettings")
        ckpt_to_initialize_from = fs.check(ckpt_to_initialize_from, "ckpt_to_initialize_from")
        if vars_to_warm_start is not None and not isinstance(vars_to_warm_start, str):
            if not isinstance(vars_to_warm_start, (list, tuple)):
                raise ValueError(
                    "`vars_to_warm_start must be a `list` or `str`.  Given type is "
                    f"{type(vars_to_warm_start)}"
                )
            if not all(isinstance(v, str) for v in vars_to_warm_start):
                raise ValueError(
                    "If `vars_to_warm_start` is a list, it must be all `str` (variable names "
                    "or regexes).  Given types are "
                    f"{[type(v) for v in vars_to_warm_start]}"
                )
            vars_to_warm_start = list(vars_to_warm_start)
        for what, mapping in (
            ("var_name_to_vocab_info", var_name_to_vocab_info),
            ("var_name_to_prev_var_name", var_name_to_prev_var_name),
        ):
            if mapping is not None and not isinstance(mapping, Mapping):
                raise ValueError(f"{what} must be a dict, given: {type(mapping)}")
        return super().__new__(
            cls,
            os.fsdecode(ckpt_to_initialize_from),
            vars_to_warm_start,
            dict(var_name_to_vocab_info or {}),
            dict(var_name_to_prev_var_name or {}),
        )


def as_warm_start_settings(warm_start_from) -> WarmStartSettings | None:
    """``Estimator(warm_start_from=...)`` as settings (TF's
    ``_get_default_warm_start_settings``): None, a path (str, bytes, PathLike: all
    trainable variables from it) or ``WarmStartSettings``.

    Raises:
      ValueError: 'warm_start_from must be a string or a WarmStartSettings, instead got
        ...' (TF's message).
    """
    if warm_start_from is None or isinstance(warm_start_from, WarmStartSettings):
        return warm_start_from
    if isinstance(warm_start_from, (str, bytes, os.PathLike)):
        return WarmStartSettings(ckpt_to_initialize_from=warm_start_from)
    raise ValueError(
        "warm_start_from must be a string or a WarmStartSettings, instead got "
        f"{type(warm_start_from)}"
    )


# ----- names of optimizer state ------------------------------------------------------------
def slot_paths(opt_state, trainable_names) -> dict[str, tuple[tuple, str | None]]:
    """``{name: (key path, owner)}`` of every leaf of an optax state.

    A leaf under a dict key that is a trainable variable's name is ``<variable>/<path>``
    (owner: that variable, the innermost such key: optax keeps a slot's variable
    innermost, ``mu/<variable>``); any other leaf is ``opt_state/<path>`` (owner None). A
    state in its saved form (``estimator.checkpoint.tree_form``, every level a dict, as the engine
    carries it and checkpoints hold it) or read back from an older checkpoint
    (NamedTuples as dicts, tuples as lists) gives the same names as the live state."""
    names = set(trainable_names)
    out = {}
    for path, _ in jax.tree_util.tree_flatten_with_path(opt_state)[0]:
        parts = [tree_form.part(k) for k in path]
        owner = next(
            (
                i
                for i in reversed(range(len(path)))
                if isinstance(path[i], jax.tree_util.DictKey) and parts[i] in names
            ),
            None,
        )
        if owner is None:
            out["/".join([OPT_STATE, *parts])] = (path, None)
        else:
            name = "/".join([parts[owner], *parts[:owner], *parts[owner + 1 :]])
            out[name] = (path, parts[owner])
    return out


def _slot_values(opt_state, trainable_names) -> dict[str, Any]:
    leaves = dict(jax.tree_util.tree_flatten_with_path(opt_state)[0])
    return {
        name: leaves[path] for name, (path, _) in slot_paths(opt_state, trainable_names).items()
    }


# ----- the source ----------------------------------------------------------------------------
class _Source:
    """The variables of a checkpoint or an export, by name (optimizer state included)."""

    def __init__(self, location: str) -> None:
        self.where, self.kind = _resolve(location)
        opt_state = None
        if self.kind == "checkpoint":  # checked against its checksums
            saved, opt_state = ckpt.read_checkpoint(self.where)
        else:  # checked against the manifest's sha256 of every file
            with staging.readable(self.where) as local:
                with open(os.path.join(local, MANIFEST)) as f:
                    verify(local, json.load(f).get("files"))
                saved = read_variables(local)
        self.values: dict[str, Any] = {**saved["non_trainable"], **saved["trainable"]}
        self.trainable = set(saved["trainable"])
        if opt_state is not None:
            for name, value in _slot_values(opt_state, self.trainable).items():
                self.values.setdefault(name, value)

    def __contains__(self, name: str) -> bool:
        return name in self.values

    def read(self, name: str) -> np.ndarray:
        return np.asarray(self.values[name])

    def describe(self, limit: int = 50) -> str:
        items = sorted(self.values.items())
        text = ", ".join(f"{n} {list(np.shape(v))}" for n, v in items[:limit])
        return text + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")


def _resolve(location: str) -> tuple[str, str]:
    """``(path, "checkpoint" | "export")`` of a warm-start source."""

    location = fs.as_str(location)
    if fs.isfile(fs.join(location, MANIFEST)):
        return location, "export"
    base = fs.basename(location)
    tf_style = re.fullmatch(re.escape(ckpt.STEP_PREFIX) + r"-(\d+)", base)
    if tf_style:  # TF's "model.ckpt-1000" names our "model.ckpt_1000"
        location = ckpt.step_dir(fs.dirname(location), tf_style[1])
        base = fs.basename(location)
    if ckpt.STEP_DIR.match(base) and fs.isdir(fs.join(location, "variables")):
        return location, "checkpoint"
    latest = ckpt.latest_checkpoint(location)
    if latest is not None:
        return latest, "checkpoint"
    raise ValueError(
        f"Cannot warm-start from {location!r}: it is neither a checkpoint "
        f"({ckpt.STEP_PREFIX}_<step>), a model_dir holding one, nor an export (a directory "
        f"with {MANIFEST}). Give ckpt_to_initialize_from the model_dir of the trained model, "
        "one of its checkpoints, or an export_saved_model directory."
    )


def variable_names(path) -> list[str]:
    """The names warm start sees in a checkpoint or export: its variables, the optimizer
    state as ``<variable>/<path>`` / ``opt_state/<path>`` (checkpoints only), sorted.

    Raises:
      ValueError: when ``path`` holds no checkpoint or export.
    """
    return sorted(_Source(os.fsdecode(path)).values)


# ----- warm start ----------------------------------------------------------------------------
def _tf_name(name: str) -> str:
    return name + ":0"


def _select(vars_to_warm_start, pool: dict[str, str]) -> list[str]:
    """TF's ``_get_grouped_variables``: the candidate names, in model order."""
    trainable = [n for n, group in pool.items() if group == "trainable"]
    if vars_to_warm_start is None:
        return trainable
    if isinstance(vars_to_warm_start, str):
        pattern = re.compile(vars_to_warm_start)
        return [n for n in trainable if pattern.match(_tf_name(n))]
    chosen: dict[str, None] = {}
    for item in vars_to_warm_start:
        pattern = re.compile(item)
        chosen.update((n, None) for n in pool if pattern.match(_tf_name(n)))
    return list(chosen)


def _check_unused(settings: WarmStartSettings, grouped: list[str]) -> None:
    """TF's checks: every key of the two maps must name a candidate variable."""
    viable = dict.fromkeys(grouped).keys()
    unused = set(settings.var_name_to_prev_var_name) - set(grouped)
    if unused:
        raise ValueError(
            "You provided the following variables in var_name_to_prev_var_name that were not "
            f"used: {unused}.  Perhaps you misspelled them?  Here is the list of viable "
            f"variable names: {viable}"
        )
    unused = set(settings.var_name_to_vocab_info) - set(grouped)
    if unused:
        raise ValueError(
            "You provided the following variables in var_name_to_vocab_info that were not "
            f"used: {unused}.  Perhaps you misspelled them?  Here is the list of viable "
            f"variable names: {viable}"
        )


class _Plan(NamedTuple):
    name: str
    prev: str
    vocab: VocabInfo | None
    keep_initial: bool  # optimizer state of a remapped variable: new rows stay as they are


def _plan(settings: WarmStartSettings, grouped: list[str], owners: dict[str, str]) -> list:
    renames = settings.var_name_to_prev_var_name
    vocab = settings.var_name_to_vocab_info
    plans = []
    for name in grouped:
        info = vocab.get(name)
        if info is None and not settings.vars_to_warm_start:
            continue  # vars_to_warm_start=None: only the variables with a vocabulary
        prev = renames.get(name)
        keep_initial = False
        owner = owners.get(name)
        if owner is not None:  # optimizer state follows its variable's rename and vocabulary
            if prev is None and owner in renames:
                prev = renames[owner] + name[len(owner) :]
            if info is None and owner in vocab:
                info, keep_initial = vocab[owner], True
        plans.append(_Plan(name, prev or name, info, keep_initial))
    return plans


def _describe_selection(settings: WarmStartSettings) -> str:
    spec = settings.vars_to_warm_start
    if isinstance(spec, str):
        return (
            f"vars_to_warm_start={spec!r} (a string is a regex over the trainable variables, "
            "matched from the start of the name)"
        )
    return f"vars_to_warm_start={spec!r}"


class _Names(NamedTuple):
    """The names of a model that warm start can select."""

    pool: dict[str, str]  # {name: "trainable" | "non_trainable" | OPT_STATE}, in model order
    paths: dict[str, tuple]  # {optimizer-state name: its key path in opt_state}
    owners: dict[str, str]  # {optimizer-state name: the variable it is kept for}


def _names(state) -> _Names:
    """The variables of ``state``, then its optimizer-state leaves (:func:`slot_paths`)."""
    pool = {n: "trainable" for n in state.trainable}
    pool.update((n, "non_trainable") for n in state.non_trainable)
    paths: dict[str, tuple] = {}
    owners: dict[str, str] = {}
    if state.opt_state is not None:
        for name, (path, owner) in slot_paths(state.opt_state, state.trainable).items():
            pool.setdefault(name, OPT_STATE)
            paths[name] = path
            if owner is not None:
                owners[name] = owner
    return _Names(pool, paths, owners)


def _nothing_selected(settings: WarmStartSettings, pool: dict[str, str]) -> None:
    """Logs an empty selection of ``vars_to_warm_start=None``; raises for any other."""
    if settings.vars_to_warm_start is None:
        logger.info("Warm-started 0 variables: vars_to_warm_start=None and no VocabInfo.")
        return
    raise ValueError(
        f"Nothing to warm-start: {_describe_selection(settings)} matches none of the "
        f"model's variables, which are: {', '.join(pool)}. Fix the pattern, or pass a list "
        "of patterns to also match non-trainable variables and optimizer state."
    )


def _missing(settings: WarmStartSettings, plans: list[_Plan], source: _Source) -> list[_Plan]:
    """The planned variables that ``source`` lacks; raises when it lacks them all."""
    missing = [p for p in plans if p.prev not in source]
    if len(missing) == len(plans):
        raise ValueError(
            f"Nothing to warm-start: none of the {len(plans)} variables selected by "
            f"{_describe_selection(settings)} is in {source.where} (looked for "
            f"{', '.join(p.prev for p in plans)}). It has: {source.describe()}. Map the names "
            "with var_name_to_prev_var_name, or warm-start from the right model."
        )
    return missing


class _Loader:
    """Reads planned variables from the source, remapped or checked against the model's
    shapes, and keeps a line of the log for each one read."""

    def __init__(self, source: _Source, key: jax.Array) -> None:
        self.source = source
        self.key = key
        self.done: list[str] = []

    def __call__(self, plan: _Plan, initial, index: int) -> jax.Array:
        """The warm-started value of ``plan.name`` (``initial``: its value in the model;
        ``index``: its place among the planned variables, for the PRNG key)."""
        value, note = self._read(plan, np.asarray(initial), index)
        self._record(plan, note)
        return jnp.asarray(value, initial.dtype)

    def _read(self, plan: _Plan, initial: np.ndarray, index: int) -> tuple[np.ndarray, str]:
        old = self.source.read(plan.prev)
        if plan.vocab is not None:
            sub = jax.random.fold_in(self.key, index)
            return remap(
                plan.name, plan.prev, old, initial, plan.vocab, sub, keep_initial=plan.keep_initial
            )
        if old.shape != initial.shape:
            raise ValueError(
                f"Cannot warm-start {plan.name} from {plan.prev} in {self.source.where}: shape "
                f"{list(old.shape)} there, {list(initial.shape)} in the model. If its "
                f"vocabulary changed, give var_name_to_vocab_info={{{plan.name!r}: "
                "VocabInfo(...)}; otherwise leave it out of vars_to_warm_start."
            )
        return old.astype(initial.dtype), ""

    def _record(self, plan: _Plan, note: str) -> None:
        via = [] if plan.prev == plan.name else [f"from {plan.prev}"]
        extra = "; ".join(via + ([note] if note else []))
        self.done.append(f"{plan.name} ({extra})" if extra else plan.name)


def _load_variables(
    present: list[_Plan], pool: dict[str, str], trainable: dict, non_trainable: dict, load
) -> None:
    """Reads the planned variables (not optimizer state) into ``trainable`` and
    ``non_trainable``, in place."""
    for index, plan in enumerate(present):
        group = pool[plan.name]
        if group == OPT_STATE:
            continue
        target = trainable if group == "trainable" else non_trainable
        target[plan.name] = load(plan, target[plan.name], index)


def _load_opt_state(opt_state, present: list[_Plan], names: _Names, load):
    """``opt_state`` with the planned optimizer-state leaves read from the source."""
    slots = [(i, p) for i, p in enumerate(present) if names.pool[p.name] == OPT_STATE]
    if not slots:
        return opt_state
    leaves, treedef = jax.tree_util.tree_flatten_with_path(opt_state)
    position = {path: i for i, (path, _) in enumerate(leaves)}
    values = [leaf for _, leaf in leaves]
    for index, plan in slots:
        i = position[names.paths[plan.name]]
        values[i] = load(plan, values[i], index)
    return jax.tree_util.tree_unflatten(treedef, values)


def _log_outcome(
    settings: WarmStartSettings,
    source: _Source,
    done: list[str],
    missing: list[_Plan],
    plans: list[_Plan],
    pool: dict[str, str],
) -> None:
    """Logs what was warm-started, what the source lacked and what was not selected."""
    logger.info("Warm-started %d variables from %s: %s.", len(done), source.where, ", ".join(done))
    if missing:
        logger.warning(
            "Not warm-started, not in %s (they keep their initial values): %s.",
            source.where,
            ", ".join(p.name if p.prev == p.name else f"{p.name} (as {p.prev})" for p in missing),
        )
    selected = {p.name for p in plans}
    left = [n for n in pool if n not in selected]
    if left:
        logger.info(
            "Not selected by %s (initial values): %s.",
            _describe_selection(settings),
            ", ".join(left),
        )


def warm_start(
    state,
    warm_start_from,
    *,
    key: jax.Array,
    init_opt_state: Callable[[dict], Any] | None = None,
):
    """Returns ``state`` (a ``TrainState`` of freshly initialised values) with the selected
    variables read from the source (internal: ``Estimator`` calls it when ``model_dir`` has
    no checkpoint). Logs what was warm-started from where, and what was not.

    Args:
      state: the initial ``TrainState`` (``opt_state`` None outside training).
      warm_start_from: a path or :class:`WarmStartSettings`.
      key: PRNG key for ``VocabInfo.backup_initializer``.
      init_opt_state: ``train_op.init``: re-initialises the optimizer state from the
        warm-started variables (before selected optimizer state is copied).

    Raises:
      ValueError: a source that is not a checkpoint or export; TF's errors for unused
        ``var_name_to_prev_var_name``/``var_name_to_vocab_info`` keys; a selection matching
        no variable or none of whose variables is in the source; a shape mismatch; a
        ``VocabInfo`` that does not fit the variable or its vocabulary files.
    """
    settings = as_warm_start_settings(warm_start_from)
    logger.info("Warm-starting with WarmStartSettings: %s", settings)
    names = _names(state)
    grouped = _select(settings.vars_to_warm_start, names.pool)
    _check_unused(settings, grouped)
    plans = _plan(settings, grouped, names.owners)
    if not plans:
        _nothing_selected(settings, names.pool)
        return state
    source = _Source(settings.ckpt_to_initialize_from)
    logger.info("Warm-starting from: %s", source.where)
    missing = _missing(settings, plans, source)
    load = _Loader(source, key)
    present = [p for p in plans if p.prev in source]
    trainable, non_trainable = dict(state.trainable), dict(state.non_trainable)
    _load_variables(present, names.pool, trainable, non_trainable, load)
    opt_state = state.opt_state
    if opt_state is not None:
        if init_opt_state is not None and any(names.pool[p.name] == "trainable" for p in present):
            opt_state = init_opt_state(trainable)
        opt_state = _load_opt_state(opt_state, present, names, load)
    _log_outcome(settings, source, load.done, missing, plans, names.pool)
    return state._replace(trainable=trainable, non_trainable=non_trainable, opt_state=opt_state)


class WarmStart:
    """An Estimator's warm start, as its engine applies it (internal): the settings and
    model directory bound, called on a fresh state (``estimator.engine.state.StateSource``).

    Args:
      warm_start_from: a path or :class:`WarmStartSettings`.
      model_dir: the Estimator's model directory (for the message when it is skipped).
    """

    def __init__(self, warm_start_from, model_dir: str) -> None:
        self.settings = as_warm_start_settings(warm_start_from)
        self.model_dir = model_dir

    def __call__(self, state, *, key: jax.Array, init_opt_state=None):
        """:func:`warm_start` of ``state`` with these settings."""
        return warm_start(state, self.settings, key=key, init_opt_state=init_opt_state)

    def skipped(self, checkpoint_path: str) -> None:
        """Logs that training resumes from ``checkpoint_path`` instead (:func:`log_skipped`)."""
        log_skipped(self.settings, self.model_dir, checkpoint_path)


def log_skipped(warm_start_from, model_dir: str, checkpoint: str) -> None:
    """Logs why warm start did not apply (internal; called by ``train()``)."""
    settings = as_warm_start_settings(warm_start_from)
    logger.info(
        "Not warm-starting from %s: model_dir %s already has checkpoint %s, which training "
        "resumes from. Warm start applies only while model_dir has no checkpoint; use a new "
        "model_dir to warm-start again.",
        settings.ckpt_to_initialize_from,
        model_dir,
        checkpoint,
    )
