"""Reading checkpoints: their metadata, one variable, or the whole train state, every read
checked against the checkpoint's step and checksums (damage raises :class:`DataLossError`).
The format and the guarantees are the package's (``estimator.checkpoint``)."""

from __future__ import annotations

import logging
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

from estimator.checkpoint import checksums, tree_form
from estimator.checkpoint.paths import STEP_DIR, previous_checkpoint
from estimator.checkpoint.writer import FORMAT, multiprocessing_options, variable_specs
from estimator.io import fs, staging

logger = logging.getLogger("estimator")


class DataLossError(ValueError):
    """A checkpoint whose files are damaged: unreadable, inconsistent, or whose arrays do
    not match their checksums (TF's ``tf.errors.DataLossError``; a ``ValueError``, as the
    errors for damaged checkpoints were before)."""


def _pytree_checkpointer() -> ocp.Checkpointer:
    options = multiprocessing_options()
    handler = ocp.PyTreeCheckpointHandler(multiprocessing_options=options)
    return ocp.Checkpointer(handler, multiprocessing_options=options)


def _way_back(path: str) -> str:
    previous = previous_checkpoint(path)
    then = (
        f"training then resumes from the previous checkpoint, {previous}"
        if previous
        else "there is no earlier checkpoint: training then starts afresh"
    )
    return (
        f"Delete or move {path} ({then}; RunConfig(restore_fallback=True) does so by "
        "itself), or restore it from a copy."
    )


def _corrupt(path: str, item: str, err: BaseException | str) -> DataLossError:
    """The error for a checkpoint whose ``item`` cannot be read (``err``: the exception) or
    is inconsistent (``err``: what is wrong). A missing item, or a checkpoint gone since it
    was found (another process's ``restore_fallback`` moved it aside), is said plainly:
    orbax's exceptions for them (``AttributeError`` of a ``None`` metadata) do not say it."""
    if isinstance(err, str):
        what = f"is inconsistent: {err}"
    elif fs.exists(fs.join(path, item)):
        what = f"cannot be read ({type(err).__name__}: {err})"
    elif not fs.exists(path):
        return DataLossError(
            f"The checkpoint {path} is gone: it was moved or deleted after it was found."
        )
    else:
        what = "is missing"
    return DataLossError(
        f"The checkpoint {path} is corrupt: {fs.join(path, item)} {what}. {_way_back(path)}"
    )


def _damaged_arrays(path: str, item: str, problems: list[str]) -> DataLossError:
    shown = "\n".join(f"  {p}" for p in problems[:10])
    more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
    return DataLossError(
        f"The checkpoint {path} is damaged: arrays in {fs.join(path, item)} do not "
        f"match the checksums recorded when it was written:\n{shown}{more}\n{_way_back(path)}"
    )


def read_meta(path: str) -> dict:
    """The JSON metadata of a checkpoint (global step and variable specs).

    Raises:
      ValueError: if the metadata file is damaged (names the file and the way back).
    """
    try:
        options = multiprocessing_options()
        with staging.readable(path, ("meta",)) as where:
            restored = ocp.Checkpointer(
                ocp.JsonCheckpointHandler(multiprocessing_options=options),
                multiprocessing_options=options,
            ).restore(fs.join(where, "meta"))
    except Exception as err:  # orbax and the file system raise many types for a damaged item
        raise _corrupt(path, os.path.join("meta", "metadata"), err) from None
    where = os.path.join("meta", "metadata")
    if (
        not isinstance(restored, dict)
        or not isinstance(restored.get("global_step"), int)
        or not isinstance(restored.get("variables"), dict)
    ):
        raise _corrupt(path, where, ValueError("expected an object with global_step and variables"))
    match = STEP_DIR.match(fs.basename(path))
    if match and int(match.group(1)) != restored["global_step"]:
        raise _corrupt(
            path,
            where,
            f"it says global_step {restored['global_step']}, but the checkpoint's directory "
            f"is step {match.group(1)}",
        )
    if ("checksums" in restored or "format" in restored) and not _valid_checksums(restored):
        raise _corrupt(path, where, "its checksums section is missing or malformed")
    return dict(restored)


def _valid_checksums(meta: dict) -> bool:
    section = meta.get("checksums")
    return (
        meta.get("format") == FORMAT
        and isinstance(section, dict)
        and section.get("algorithm") == checksums.ALGORITHM
        and section.get("piece_bytes") == checksums.PIECE_BYTES
        and isinstance(section.get("arrays"), dict)
    )


def _records(path: str, meta: dict) -> dict | None:
    """The checksum records of a checkpoint; None (logged) for one written before them."""
    if "checksums" not in meta and "format" not in meta:
        logger.warning(
            "The checkpoint %s was written before checkpoints carried checksums: its arrays "
            "are read unchecked.",
            path,
        )
        return None
    return meta["checksums"]["arrays"]


def _verify(path: str, item: str, tree, meta: dict) -> None:
    """Raises :class:`DataLossError` unless every array of ``tree`` matches its checksum."""
    records = _records(path, meta)
    if records is None:
        return
    problems = checksums.verify(tree, records, prefix=item)
    if problems:
        raise _damaged_arrays(path, item, problems)


def list_variables(path: str) -> list[tuple[str, list[int]]]:
    """``[(name, shape)]`` of every variable in a checkpoint, sorted, with ``global_step``
    (``tf.train.list_variables``); read from metadata, without the model code."""
    meta = read_meta(path)
    out = [(name, list(spec["shape"])) for name, spec in meta["variables"].items()]
    out.append(("global_step", []))
    return sorted(out)


def abstract_variables(meta: dict) -> tuple[dict, dict]:
    """``(trainable, non_trainable)``: ``{name: jax.ShapeDtypeStruct}`` of the variables a
    checkpoint's metadata (:func:`read_meta`) lists, what :func:`restore` reads them into."""
    groups: tuple[dict, dict] = ({}, {})
    for name, spec in meta["variables"].items():
        groups[0 if spec["trainable"] else 1][name] = jax.ShapeDtypeStruct(
            tuple(spec["shape"]), jnp.dtype(spec["dtype"])
        )
    return groups


def load_variable(path: str, name: str) -> np.ndarray:
    """The value of one variable in a checkpoint (``tf.train.load_variable``), checked
    against its checksum.

    Raises:
      ValueError: if the checkpoint has no such variable (lists the names it has).
      DataLossError: if the checkpoint is damaged.
    """
    meta = read_meta(path)
    if name == "global_step":
        return np.asarray(meta["global_step"], np.int64)
    if name not in meta["variables"]:
        raise ValueError(
            f"Variable {name} not found in checkpoint {path}. It has: "
            f"{', '.join(sorted(meta['variables']))}, global_step."
        )
    group = "trainable" if meta["variables"][name]["trainable"] else "non_trainable"
    spec = meta["variables"][name]
    target = {group: {name: jax.ShapeDtypeStruct(tuple(spec["shape"]), np.dtype(spec["dtype"]))}}
    restored = _read_host(path, "variables", target)
    _verify(path, "variables", restored, meta)
    return np.asarray(restored[group][name])


def _read_host(path: str, item: str, target=None):
    """An item of a checkpoint as NumPy arrays (``target``: the part to read; None: all).

    Raises:
      DataLossError: if the item cannot be read.
    """
    try:
        with staging.readable(path, (item,)) as where:
            directory = fs.join(where, item)
            if target is None:  # all of it, with the structure orbax recorded
                recorded = ocp.StandardCheckpointer().metadata(directory).item_metadata.tree
                target = jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype), recorded)
            restore_args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), target)
            return ocp.PyTreeCheckpointer().restore(
                directory,
                args=ocp.args.PyTreeRestore(
                    item=target, restore_args=restore_args, partial_restore=True
                ),
            )
    except Exception as err:  # orbax and TensorStore raise many types for a damaged item
        raise _corrupt(path, item, err) from None


def verify_checkpoint(path: str) -> None:
    """Reads a whole checkpoint to the host and checks it (``restore_fallback``).

    Raises:
      DataLossError: if any of it is damaged.
    """
    read_checkpoint(path)


def read_checkpoint(path: str) -> tuple[dict, Any]:
    """Every variable and the optimizer state of a checkpoint, as NumPy arrays, checked
    against their checksums (what warm start reads).

    Returns:
      ``({"trainable": {...}, "non_trainable": {...}}, opt_state or None)``; the optimizer
      state as orbax reads it without a target (NamedTuples as dicts, tuples as lists,
      which name their leaves as the saved state did).

    Raises:
      DataLossError: if the checkpoint is damaged.
    """
    meta = read_meta(path)
    variables = _read_host(path, "variables")
    variables = {
        "trainable": dict(variables.get("trainable", {})),
        "non_trainable": dict(variables.get("non_trainable", {})),
    }
    _verify(path, "variables", variables, meta)
    opt_state = None
    if fs.isdir(fs.join(path, "opt_state")):
        opt_state = _read_host(path, "opt_state")
        _verify(path, "opt_state", opt_state, meta)
    return variables, opt_state


def describe_mismatch(path: str, model: dict, saved: dict) -> str | None:
    """A readable list of the differences between the model's and a checkpoint's
    variables, or None when every model variable is in the checkpoint with its shape and
    dtype. Variables only in the checkpoint are allowed (TF's ``Saver`` restores the
    graph's variables and ignores others) and listed when there is another problem."""
    missing = sorted(set(model) - set(saved))
    extra = sorted(set(saved) - set(model))
    lines = [f"  in the model, not in the checkpoint: {n} {model[n]['shape']}" for n in missing]
    for name in sorted(set(model) & set(saved)):
        m, s = model[name], saved[name]
        for key in ("shape", "dtype", "trainable"):
            if m[key] != s[key]:
                lines.append(f"  {key} differs for {name}: model {m[key]}, checkpoint {s[key]}")
    if not lines:
        return None
    lines += [f"  in the checkpoint, not in the model: {n} {saved[n]['shape']}" for n in extra]
    return (
        f"The checkpoint {path} does not match the model's variables:\n"
        + "\n".join(lines)
        + "\nThe model_fn changed since this checkpoint was written. Train in a new model_dir, "
        "or start the new model from this one with warm_start_from."
    )


def _sharding(spec):
    """Where a restored array goes: ``spec``'s sharding, else this process's first device
    (never the sharding it was saved with, which may name devices this process lacks)."""
    default = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    return getattr(spec, "sharding", None) or default


def _restore_args(abstract):
    def one(spec):
        return ocp.ArrayRestoreArgs(
            sharding=_sharding(spec), global_shape=spec.shape, dtype=spec.dtype
        )

    return jax.tree.map(one, abstract)


def restore(path: str, abstract_state, *, with_opt_state: bool) -> tuple[dict, dict, Any]:
    """Reads ``(trainable, non_trainable, opt_state)`` from a checkpoint.

    Args:
      path: a checkpoint directory.
      abstract_state: a ``TrainState`` of ``jax.ShapeDtypeStruct`` (with shardings when the
        state is distributed): the structure to restore into, its ``opt_state`` in the saved
        form (``estimator.checkpoint.tree_form``).
      with_opt_state: also read the optimizer state (training), returned in the saved
        form whatever structure it was written in; otherwise it is None.

    Raises:
      ValueError: when the checkpoint's variables differ from the model's, or its optimizer
        state from ``train_op``'s, listing the differences.
      DataLossError: when the checkpoint is damaged: a file cannot be read, or an array
        does not match its checksum.
    """
    meta = read_meta(path)
    model_specs = variable_specs(abstract_state.trainable, abstract_state.non_trainable)
    problem = describe_mismatch(path, model_specs, meta["variables"])
    if problem:
        raise ValueError(problem)
    # Empty groups are left out: orbax cannot match an empty dict in a partial restore.
    target = {
        group: dict(values)
        for group, values in (
            ("trainable", abstract_state.trainable),
            ("non_trainable", abstract_state.non_trainable),
        )
        if values
    }
    items = ("variables", "opt_state") if with_opt_state else ("variables",)
    with staging.readable(path, items) as where:
        return _restore(path, where, abstract_state, target, meta, with_opt_state)


def _restore(path, where, abstract_state, target, meta, with_opt_state):
    """:func:`restore` reading from ``where`` (``path`` itself or a local copy of it)."""
    restored = _restore_variables(path, where, target, meta)
    trainable, non_trainable = restored.get("trainable", {}), restored.get("non_trainable", {})
    if not with_opt_state:
        return trainable, non_trainable, None
    opt_state = _restore_opt_state(path, where, abstract_state.opt_state, meta)
    return trainable, non_trainable, opt_state


def _restore_variables(path, where, target, meta) -> dict:
    """The ``target`` groups of variables, checked against their checksums."""
    if not target:
        return {}
    try:
        restored = _pytree_checkpointer().restore(
            fs.join(where, "variables"),
            args=ocp.args.PyTreeRestore(
                item=target, restore_args=_restore_args(target), partial_restore=True
            ),
        )
    except Exception as err:  # orbax and TensorStore raise many types for damage
        raise _corrupt(path, "variables", err) from None
    _verify(path, "variables", restored, meta)
    return restored


def _restore_opt_state(path, where, abstract, meta):
    """The optimizer state in the saved form, after checking that ``train_op``'s state
    (``abstract``) is the one the checkpoint recorded; ``{}`` for an empty state."""
    opt_path = fs.join(where, "opt_state")
    has_item = fs.isdir(opt_path)  # one look (a remote stat on a storage URL)
    saved = has_item or "opt_state" in meta  # an empty state has no item
    records = _records(path, meta)
    if saved and records is not None:
        differences = _opt_state_differences(abstract, records)
        if differences:
            raise _optimizer_changed(path, differences)
    if not jax.tree.leaves(abstract) and not has_item:
        return {}
    if not has_item:
        raise ValueError(
            f"The checkpoint {path} has no optimizer state; it cannot resume training. "
            "Warm-start a new model_dir from it instead (warm_start_from=...)."
        )
    return _restore_opt_state_item(path, opt_path, abstract, meta)


def _restore_opt_state_item(path, opt_path, abstract, meta):
    """The ``opt_state`` item at ``opt_path`` in the saved form, read in the structure orbax
    recorded and checked against its checksums."""
    try:
        # The handler's own call: it raises for a damaged file (the checkpointer's logs it).
        recorded = ocp.StandardCheckpointHandler().metadata(epath.Path(opt_path)).tree
    except Exception as err:  # orbax and TensorStore raise many types for damage
        raise _corrupt(path, "opt_state", err) from None
    target = _as_recorded(path, recorded, abstract)
    opt_state = {}
    if jax.tree.leaves(target):
        try:
            opt_state = ocp.StandardCheckpointer().restore(opt_path, target)
        except Exception as err:  # orbax and TensorStore raise many types for damage
            raise _corrupt(path, "opt_state", err) from None
        _verify(path, "opt_state", opt_state, meta)
    return tree_form.saved_form(opt_state)


def _as_recorded(path: str, recorded, abstract):
    """The restore target of an optimizer state: the structure orbax recorded (NamedTuples
    as dicts, tuples as lists, or the saved form's dicts), each leaf with the shape, dtype
    and sharding of ``abstract``'s (a saved form) leaf of its name.

    Raises:
      ValueError: the two have leaves of other names (the optimizer changed).
    """
    wanted = dict(checksums.leaves(abstract, "opt_state"))
    found = dict(checksums.leaves(recorded, "opt_state"))
    if set(wanted) != set(found):
        lines = [f"{k}: only in train_op's state" for k in sorted(set(wanted) - set(found))]
        lines += [f"{k}: only in the checkpoint" for k in sorted(set(found) - set(wanted))]
        raise _optimizer_changed(path, lines)

    def leaf(names, _):
        spec = wanted["/".join(("opt_state", *tree_form.parts(names)))]
        return jax.ShapeDtypeStruct(spec.shape, spec.dtype, sharding=_sharding(spec))

    return jax.tree_util.tree_map_with_path(leaf, recorded)


def _opt_state_differences(abstract, records: dict) -> list[str]:
    """How ``train_op``'s state differs from the one a checkpoint recorded, a line per
    leaf (none when they agree)."""
    model = {
        key: ([int(d) for d in x.shape], np.dtype(x.dtype).name)
        for key, x in checksums.leaves(abstract, "opt_state")
    }
    saved = {
        key: (r["shape"], r["dtype"]) for key, r in records.items() if key.startswith("opt_state")
    }
    lines = [
        f"{k}: {model[k]} in train_op's state, {saved.get(k)} in the checkpoint"
        for k in sorted(model)
        if model[k] != saved.get(k)
    ]
    lines += [f"{k}: only in the checkpoint" for k in sorted(set(saved) - set(model))]
    return lines


def _optimizer_changed(path: str, differences: list[str]) -> ValueError:
    """The error for an optimizer state that differs from the checkpoint's: the first five
    ``differences`` (one per leaf), and what to do."""
    detail = "; ".join(differences[:5]) + ("; ..." if len(differences) > 5 else "")
    return ValueError(
        f"The optimizer state in {path} does not match train_op's state (was the "
        f"optimizer changed?): {detail}. Train in a new model_dir, or warm-start from "
        "this checkpoint (which reads variables only)."
    )
