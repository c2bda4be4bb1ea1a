"""Serialized ``tf.Example``s -> a signature's input columns (Classify, Regress and
MultiInference), parsed by ``estimator.io.parse_example`` (``tf.io.parse_example``'s rules
and messages).

An export made with a parsing receiver records its feature spec, and the examples are parsed
with it: a ``FixedLenFeature`` missing from an example takes its default (or is refused with
TF's message when it has none), a ``VarLenFeature`` keeps each example's list (the signature
pads them as it pads REST's lists), or, when every example has one value, one value per
example (as REST's rows give it: the signature reads ``[batch]`` as ``[batch, 1]``, which
the padded lists would be, without padding them). A signature without a feature spec (a
raw receiver) takes each input from the feature of the same name: a ``FixedLenFeature`` of
the input's shape without the batch dimension (a ``VarLenFeature`` where that shape is not
known), of the tf.Example value type its dtype is read from (``float_list`` for floats,
``int64_list`` for integers, ``bytes_list`` for strings).

Speed: ``parse_example``'s batch reader has a fixed cost per call, whatever the batch, that
is more than the model's own for a one-row request (``benchmarks/serving_load.py``'s
Classify load shows it). The examples arrive already
decoded (the request message holds them), so :func:`columns` reads them directly when
every feature is of the spec's kind and size (``FixedLenFeature``/``VarLenFeature``
specs), which gives what ``parse_example`` gives; anything else (a wrong type or length, a
missing required feature, other specs) goes through ``parse_example``, for its results and
TF's error messages.
"""

import functools

import numpy as np

from estimator import io

_KIND = {"O": "bytes_list", "f": "float_list", "i": "int64_list"}


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


@functools.lru_cache(maxsize=64)
def _plan(spec_items: tuple) -> tuple | None:
    """Per feature: ``(name, fixed, list field, values per example, shape, dtype, default)``;
    ``None`` if a spec is neither ``FixedLenFeature`` nor ``VarLenFeature``."""
    plan = []
    for name, feature in spec_items:
        fixed = isinstance(feature, io.FixedLenFeature)
        if not fixed and not isinstance(feature, io.VarLenFeature):
            return None
        kind = _KIND.get(np.dtype(feature.dtype).kind)
        dtype = object if kind == "bytes_list" else np.dtype(feature.dtype)
        shape = tuple(feature.shape) if fixed else None
        size = int(np.prod(shape, dtype=np.int64)) if fixed else None
        default = None
        if fixed and feature.default_value is not None:
            default = np.broadcast_to(np.asarray(feature.default_value, dtype), shape).ravel()
            default = default.tolist()
        plan.append((name, fixed, kind, size, shape, dtype, default))
    return tuple(plan)


def _direct(spec: dict, examples: list, one_each: bool = False) -> dict | None:
    """The columns read from decoded ``tf.Example`` messages, or ``None`` when some feature
    needs ``parse_example`` (a wrong kind or size, a missing required feature). ``one_each``:
    a ``VarLenFeature`` with one value in every example is one value per example (for a
    signature with a feature spec, which reads ``[batch]`` as ``[batch, 1]``)."""
    plan = _plan(tuple(spec.items()))
    if plan is None:
        return None
    maps = [example.features.feature for example in examples]
    out: dict = {}
    for name, fixed, kind, size, shape, dtype, default in plan:
        values = _values(maps, name, kind, size if fixed else None, default)
        if values is None:
            return None
        if fixed:
            out[name] = _array(values, dtype).reshape((len(maps), *shape))
        elif one_each and all(len(v) == 1 for v in values):
            # One value per example, as REST's rows give it (the signature reads [batch]
            # as [batch, 1], what padding the lists would give, without the padding).
            out[name] = [v[0] for v in values]
        else:
            out[name] = [list(v) for v in values]
    return out


def _values(maps: list, name: str, kind: str, size: int | None, default) -> list | None:
    """One feature's values: flat for a ``FixedLenFeature`` of ``size`` values per example
    (``default`` where absent), else one list per example (empty where absent); ``None`` if an
    example holds another kind or size, or lacks a required feature."""
    values: list = []
    for entries in maps:
        entry = entries.get(name)
        if entry is None:
            if size is None:
                values.append(())
            elif default is None:
                return None
            else:
                values.extend(default)
            continue
        if entry.WhichOneof("kind") != kind:
            return None
        listed = getattr(entry, kind).value
        if size is None:
            values.append(listed)
        elif len(listed) != size:
            return None
        else:
            values.extend(listed)
    return values


def _array(values: list, dtype) -> np.ndarray:
    if dtype is not object:
        return np.asarray(values, dtype)
    flat = np.empty(len(values), dtype)
    flat[:] = values
    return flat


def decoded_elements(signature, records) -> int:
    """An upper bound of the elements serialized ``tf.Example``s take once parsed with the
    signature's feature spec and padded: per example, the longest record's bytes (every
    value takes at least one byte of its record, and ``VarLenFeature`` lists are padded to
    the longest) plus the values of every ``FixedLenFeature`` (present or defaulted).

    Args:
      signature: an ``estimator.export.Signature`` that accepts examples.
      records: the serialized examples (a list or an array of ``bytes``; other items count
        as empty, and the signature refuses them).
    """
    records = records.ravel().tolist() if isinstance(records, np.ndarray) else records
    if not isinstance(records, (list, tuple)):
        return 0  # one record, or something the signature refuses
    spec = getattr(signature, "_parse_spec", None) or {}
    fixed = sum(
        int(np.prod(f.shape, dtype=np.int64))
        for f in spec.values()
        if isinstance(f, io.FixedLenFeature)
    )
    longest = max((len(r) for r in records if isinstance(r, (bytes, str))), default=0)
    return len(records) * (longest + fixed)


def columns(signature, examples: list, serialized: list[bytes] | None = None) -> dict:
    """The columns ``signature(**columns)`` takes for a batch of ``tf.Example``s.

    Args:
      signature: an ``estimator.export.Signature``.
      examples: decoded ``tensorflow.Example`` messages, one per row.
      serialized: the same examples serialized, if at hand (else serialized here when
        ``parse_example`` is needed).

    Returns:
      ``{input name: [batch, ...] array, one list of values per example, or (a
      VarLenFeature with one value in every example) one value per example}``.

    Raises:
      ValueError: ``parse_example``'s (a feature of the wrong type or length, a required
        feature missing; TF's messages with the example's index and the key).
    """
    parsing = getattr(signature, "_parse_spec", None)
    spec = parsing or _raw_spec(signature)
    direct = _direct(spec, examples, one_each=parsing is not None)
    if direct is not None:
        return direct
    if serialized is None:
        serialized = [e.SerializeToString() for e in examples]
    return parsed(spec, serialized)


def parsed(spec: dict, serialized: list[bytes]) -> dict:
    """The columns ``parse_example`` gives (``VarLenFeature``s as lists per example)."""
    values = io.parse_example(serialized, spec)
    return {
        name: _rows(value) if isinstance(value, io.SparseValue) else value
        for name, value in values.items()
    }
