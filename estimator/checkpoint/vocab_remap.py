"""Remapping a variable's rows (or columns) from an old vocabulary to a new one, for warm
start (``tf.compat.v1.train.VocabInfo``; TF's ``load_and_remap_matrix``), on host arrays.

Synopsis (old vocabulary ``a b c``, new ``c d a`` plus one OOV bucket)::

    info = VocabInfo("new.txt", new_vocab_size=3, num_oov_buckets=1, old_vocab="old.txt")
    old = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    new, note = remap("emb", "emb", old, np.zeros((4, 2)), info, jax.random.key(0),
                      keep_initial=False)
    # new == [[3, 3], [0, 0], [1, 1], [0, 0]]: c and a keep their rows, d and OOV are new.
"""

from __future__ import annotations

import collections
import os

import jax
import numpy as np

__all__ = ["VocabInfo", "remap", "read_vocabulary"]


class VocabInfo(
    collections.namedtuple(
        "VocabInfo",
        [
            "new_vocab",
            "new_vocab_size",
            "num_oov_buckets",
            "old_vocab",
            "old_vocab_size",
            "backup_initializer",
            "axis",
        ],
    )
):
    """How a variable's rows (or columns) map between an old and a new vocabulary
    (``tf.compat.v1.train.VocabInfo``).

    Entry ``i`` of the new vocabulary (line ``i`` of ``new_vocab``) takes the row of the same
    token in the old vocabulary; tokens new to the vocabulary and the ``num_oov_buckets``
    out-of-vocabulary rows after the vocabulary get ``backup_initializer`` values (zeros
    without one, as TF: right for linear weights). As TF, missing entries are drawn as one
    ``backup_initializer(key, [n_missing, 1])`` call placed in row-major order, and OOV rows
    as ``backup_initializer(key, [num_oov_buckets, n_columns])``.

    Args:
      new_vocab: path of the new vocabulary file (or a list of its tokens; one token per line, as
        ``categorical_column_with_vocabulary_file``).
      new_vocab_size: how many entries of ``new_vocab`` the model uses (its first lines).
      num_oov_buckets: out-of-vocabulary rows after the vocabulary in the model.
      old_vocab: path of the vocabulary the checkpoint was trained with.
      old_vocab_size: how many of its first entries the checkpoint used; -1: all. As in TF
        it applies to ``axis=0`` only (TF has no column counterpart).
      backup_initializer: ``(key, shape, dtype) -> array`` (``estimator.initializers``) for
        the new entries; None: zeros.
      axis: 0 when rows follow the vocabulary (embeddings, linear weights), 1 when
        columns do (an output layer's kernel ``[units, n_classes]`` with a class
        vocabulary).

    Raises:
      ValueError: "The only supported values for the axis argument are 0 and 1.  Provided
        axis: ..." (TF's message).
    """

    def __new__(
        cls,
        new_vocab,
        new_vocab_size,
        num_oov_buckets,
        old_vocab,
        old_vocab_size=-1,
        backup_initializer=None,
        axis=0,
    ):
        if axis != 0 and axis != 1:
            raise ValueError(
                "The only supported values for the axis argument are 0 and 1.  Provided axis: "
                f"{axis}"
            )
        return super().__new__(
            cls,
            new_vocab,
            new_vocab_size,
            num_oov_buckets,
            old_vocab,
            old_vocab_size,
            backup_initializer,
            axis,
        )


def read_vocabulary(path, size: int, what: str, name: str) -> list[str]:
    """The first ``size`` tokens (all when ``size`` < 0) of a vocabulary file, one per line
    (trailing ``\\n``/``\\r\\n`` removed, UTF-8; as ``categorical_column_with_vocabulary_file``
    reads it), or of a list of tokens.

    Args:
      path: the file's path, or a list/tuple of tokens.
      size: how many entries to use; -1 or None: all.
      what, name: for error messages (``"new_vocab"``, the variable's name).

    Raises:
      ValueError: a missing file, fewer entries than ``size``, or a repeated token.
    """
    if isinstance(path, (list, tuple)):
        tokens = [str(t) for t in path]
    else:
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise ValueError(f"VocabInfo for {name}: {what} file {path} does not exist.")
        with open(path, "rb") as f:
            tokens = [line.rstrip(b"\n").rstrip(b"\r").decode("utf-8") for line in f]
    if size is not None and size >= 0:
        if size > len(tokens):
            raise ValueError(
                f"VocabInfo for {name}: {what} has {len(tokens)} entries, fewer than the "
                f"{size} asked for."
            )
        tokens = tokens[:size]
    if len(set(tokens)) != len(tokens):
        dup = next(t for i, t in enumerate(tokens) if t in tokens[:i])
        raise ValueError(f"VocabInfo for {name}: {what} lists {dup!r} more than once.")
    return tokens


def remap(
    name: str,
    prev: str,
    old: np.ndarray,
    initial: np.ndarray,
    info: VocabInfo,
    key,
    *,
    keep_initial: bool,
) -> tuple[np.ndarray, str]:
    """The new value of a variable whose vocabulary changed (TF's
    ``_warm_start_var_with_vocab`` / ``load_and_remap_matrix``).

    Along ``info.axis``, entry ``i`` of the new vocabulary takes the entry of the same token
    in the old vocabulary. New tokens and the ``num_oov_buckets`` OOV entries get
    ``info.backup_initializer`` values (zeros without one); with ``keep_initial`` they keep
    their values in ``initial`` instead (optimizer state: its fresh initial value).

    Args:
      name: the variable's name in the model; prev: its name in the source (messages).
      old: the source value: ``[old_vocab_size, ...]`` (axis 0) or ``[rows, old_size]``.
      initial: the variable's initial value in the model: ``[new_vocab_size +
        num_oov_buckets, ...]`` (axis 0) or ``[rows, new_vocab_size + num_oov_buckets]``.
      info: the :class:`VocabInfo`.
      key: PRNG key for ``backup_initializer``.
      keep_initial: keyword-only; see above.

    Returns:
      ``(value, note)``: the new value (dtype and shape of ``initial``) and a line for the
      log saying how many entries came from the old vocabulary.

    Raises:
      ValueError: TF's "Invalid args" for an incomplete ``VocabInfo``; shapes that do not
        fit the vocabulary sizes (the message gives both); vocabulary file errors.
    """
    if not (info.new_vocab and info.new_vocab_size and info.old_vocab):
        raise ValueError(
            "Invalid args: Must provide all of [current_vocab_path, current_vocab_size, "
            f"prev_ckpt, prev_vocab_path}}. (VocabInfo for {name}: {info})"
        )
    axis = info.axis
    shape = initial.shape
    if len(shape) <= axis or (axis == 1 and len(shape) != 2):
        raise ValueError(
            f"VocabInfo for {name} has axis={axis}, but the variable has shape "
            f"{list(shape)}: axis 0 needs at least one dimension, axis 1 exactly two (as TF)."
        )
    new_vocab = read_vocabulary(info.new_vocab, info.new_vocab_size, "new_vocab", name)
    old_size = info.old_vocab_size if axis == 0 else -1  # TF: no old size for columns
    old_vocab = read_vocabulary(info.old_vocab, old_size, "old_vocab", name)
    expected = info.new_vocab_size + info.num_oov_buckets
    if shape[axis] != expected:
        raise ValueError(
            f"VocabInfo for {name}: the variable has {shape[axis]} entries along axis {axis} "
            f"(shape {list(shape)}), but new_vocab_size + num_oov_buckets = "
            f"{info.new_vocab_size} + {info.num_oov_buckets} = {expected}."
        )
    others = shape[:axis] + shape[axis + 1 :]
    if old.ndim != initial.ndim or old.shape[:axis] + old.shape[axis + 1 :] != others:
        raise ValueError(
            f"Cannot warm-start {name} from {prev}: shape {list(old.shape)} in the source, "
            f"{list(shape)} in the model; with a VocabInfo only axis {axis} may differ."
        )
    if len(old_vocab) > old.shape[axis]:
        raise ValueError(
            f"VocabInfo for {name}: old_vocab has {len(old_vocab)} entries but {prev} has only "
            f"{old.shape[axis]} along axis {axis}. Set old_vocab_size to the vocabulary size "
            "the old model was trained with."
        )
    index = {token: i for i, token in enumerate(old_vocab)}
    found = np.array([index.get(t, -1) for t in new_vocab], dtype=np.int64)
    out = np.array(initial, copy=True) if keep_initial else np.zeros(shape, initial.dtype)
    hits = np.nonzero(found >= 0)[0]
    np.moveaxis(out, axis, 0)[hits] = np.moveaxis(old, axis, 0)[found[hits]].astype(out.dtype)
    if info.backup_initializer is not None and not keep_initial:
        missing = np.zeros(shape, bool)
        np.moveaxis(missing, axis, 0)[np.nonzero(found < 0)[0]] = True
        key_missing, key_oov = jax.random.split(key)
        n_missing = int(missing.sum())
        if n_missing:
            values = info.backup_initializer(key_missing, (n_missing, 1), out.dtype)
            out[missing] = np.asarray(values).reshape(-1)
        if info.num_oov_buckets:
            n_other = int(np.prod(others))
            oov_shape = (
                (info.num_oov_buckets, n_other) if axis == 0 else (n_other, info.num_oov_buckets)
            )
            values = np.asarray(info.backup_initializer(key_oov, oov_shape, out.dtype))
            if axis == 0:
                out[info.new_vocab_size :] = values.reshape((info.num_oov_buckets,) + others)
            else:
                out[:, info.new_vocab_size :] = values.reshape(others + (info.num_oov_buckets,))
    note = (
        f"vocabulary remapped along axis {axis}: {len(hits)} of {info.new_vocab_size} "
        f"entries from the old vocabulary, {info.new_vocab_size - len(hits)} new, "
        f"{info.num_oov_buckets} OOV"
    )
    return out, note
