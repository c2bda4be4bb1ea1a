"""Serialized ``tf.Example``s -> a signature's input columns (Classify, Regress and
MultiInference), parsed by ``estimator.io.parse_example`` (``tf.io.parse_example``'s rules
and messages).

An export made with a parsing receiver records its feature spec, and the examples are parsed
with it: a ``FixedLenFeature`` missing from an example takes its default (or is refused with
TF's message when it has none), a ``VarLenFeature`` keeps each example's list (the signature
pads them as it pads REST's lists). A signature without a feature spec (a raw receiver)
takes each input from the feature of the same name: a ``FixedLenFeature`` of the input's
shape without the batch dimension (a ``VarLenFeature`` where that shape is not known), of
the tf.Example value type its dtype is read from (``float_list`` for floats,
``int64_list`` for integers, ``bytes_list`` for strings).
"""

import numpy as np

from estimator import io


def _raw_spec(signature) -> dict:
    spec = {}
    for name, entry in signature.inputs.items():
        kind = entry["dtype"]
        dtype = object if kind == "string" else np.float32 if "float" in kind else np.int64
        shape = entry["shape"][1:]
        known = all(isinstance(d, int) for d in shape)
        spec[name] = io.FixedLenFeature(shape, dtype) if known else io.VarLenFeature(dtype)
    return spec


def _rows(value: io.SparseValue) -> list:
    """A 2-D ``SparseValue`` -> one list of values per example."""
    rows = [[] for _ in range(int(value.dense_shape[0]))]
    for (row, _), item in zip(value.indices.tolist(), value.values.tolist(), strict=True):
        rows[row].append(item)
    return rows


def columns(signature, serialized: list[bytes]) -> dict:
    """The columns ``signature(**columns)`` takes for a batch of serialized ``tf.Example``s.

    Args:
      signature: an ``estimator.export.Signature``.
      serialized: one serialized ``tensorflow.Example`` per row.

    Returns:
      ``{input name: [batch, ...] array, or one list of values per example}``.

    Raises:
      ValueError: ``parse_example``'s (a feature of the wrong type or length, a required
        feature missing; TF's messages with the example's index and the key).
    """
    spec = getattr(signature, "_parse_spec", None) or _raw_spec(signature)
    parsed = io.parse_example(serialized, spec)
    return {
        name: _rows(value) if isinstance(value, io.SparseValue) else value
        for name, value in parsed.items()
    }
