"""Where an Estimator's checkpoints are: their names under ``model_dir`` (a local path or
a storage URL, ``estimator.io.fs``), which are complete, the newest, the one before, and
moving a damaged one aside. Reading and writing them is ``estimator.checkpoint``."""

from __future__ import annotations

import logging
import re

from estimator.io import fs, staging

logger = logging.getLogger("estimator")

__all__ = [
    "STEP_PREFIX",
    "checkpoint_step",
    "complete_steps",
    "latest_checkpoint",
    "previous_checkpoint",
    "quarantine",
    "resolve",
    "step_dir",
]

STEP_PREFIX = "model.ckpt"
STEP_DIR = re.compile(r"^model\.ckpt_(\d+)$")


def step_dir(model_dir: str, step: int) -> str:
    """The path of the checkpoint of ``step`` under ``model_dir``."""
    return fs.join(model_dir, f"{STEP_PREFIX}_{int(step)}")


def checkpoint_step(path: str) -> int:
    """The global step of a checkpoint path (``.../model.ckpt_120`` -> 120).

    Raises:
      ValueError: when ``path`` is not a checkpoint directory name.
    """
    match = STEP_DIR.match(fs.basename(path))
    if not match:
        raise ValueError(
            f"{path} is not a checkpoint: expected a directory named {STEP_PREFIX}_<step> "
            "written by an Estimator (see Estimator.latest_checkpoint())."
        )
    return int(match.group(1))


def _complete(path: str) -> bool:
    """Whether the checkpoint directory ``path`` is complete. Locally orbax finalises a
    step directory by renaming it, so one with this name is complete once it has
    ``meta/metadata`` (the last item needed to read it); on a URL (no rename) it is complete
    once it has the commit marker orbax (gs://) or the publisher writes last."""
    return fs.complete(path, marker=staging.COMMIT_MARKER, local_check="meta/metadata")


def complete_steps(model_dir) -> list[int]:
    """The global steps of the complete checkpoints under ``model_dir``, ascending
    (incomplete, interrupted saves are left out)."""
    model_dir = fs.as_str(model_dir)
    steps = []
    for name in fs.listdir(model_dir):
        match = STEP_DIR.match(name)
        if match and _complete(fs.join(model_dir, name)):
            steps.append(int(match.group(1)))
    return sorted(steps)


def latest_checkpoint(model_dir) -> str | None:
    """The newest complete checkpoint under ``model_dir`` (a local path or a URL), or None
    (``tf.train.latest_checkpoint``). Incomplete (interrupted) saves are ignored."""
    steps = complete_steps(model_dir)
    return step_dir(fs.as_str(model_dir), steps[-1]) if steps else None


def previous_checkpoint(path: str) -> str | None:
    """The newest complete checkpoint before ``path`` in its directory, or None."""
    match = STEP_DIR.match(fs.basename(path))
    if not match:
        return None
    parent = fs.dirname(path)
    steps = [s for s in complete_steps(parent) if s < int(match.group(1))]
    return step_dir(parent, steps[-1]) if steps else None


def quarantine(path: str) -> str:
    """Renames a damaged checkpoint ``damaged.model.ckpt_<step>`` (a later one of that
    step can then be saved, and nothing lists it as a checkpoint); returns the new path.
    On a URL the objects are copied and then deleted (object stores have no rename)."""
    parent, name = fs.dirname(path), fs.basename(path)
    target = fs.join(parent, "damaged." + name)
    suffix = 1
    while fs.exists(target):
        suffix += 1
        target = fs.join(parent, f"damaged{suffix}.{name}")
    fs.move(path, target)
    return target


def resolve(checkpoint_path, model_dir: str, what: str) -> str | None:
    """The checkpoint ``evaluate``/``predict``/export use: ``checkpoint_path`` (a
    checkpoint, or a directory of them: its latest), else the latest in ``model_dir``,
    else None (logged: fresh variables are used, as TF).

    Raises:
      ValueError: "Could not find trained model at ..." for a path without a checkpoint.
    """
    if checkpoint_path:
        checkpoint_path = fs.check(checkpoint_path, "checkpoint_path")
        is_dir = fs.isdir(checkpoint_path)
        if is_dir and not STEP_DIR.match(fs.basename(checkpoint_path)):
            latest = latest_checkpoint(checkpoint_path)
            if latest is None:
                raise ValueError(f"Could not find trained model at {checkpoint_path}.")
            return latest
        if not is_dir:
            raise ValueError(f"Could not find trained model at {checkpoint_path}.")
        return checkpoint_path
    latest = latest_checkpoint(model_dir)
    if not latest:
        logger.info(
            "Could not find trained model in model_dir: %s, running initialization to %s.",
            model_dir,
            what,
        )
    return latest
