"""Serving receivers that take CSV lines: the columns an export decodes on the host.

TF 1 programs serve CSV with a receiver such as::

    def serving_input_receiver_fn():
        rows = tf.placeholder(tf.string, [None])
        columns = tf.decode_csv(rows, record_defaults=DEFAULTS)
        features = dict(zip(COLUMNS, columns))
        features.pop("label")
        return tf.estimator.export.ServingInputReceiver(features, {"csv_row": rows})

Here :func:`csv_columns` (what ``estimator.compat``'s ``tf.decode_csv`` returns for a
placeholder) gives one :class:`CSVColumn` spec per column: a ``jax.ShapeDtypeStruct`` of
the column's shape and dtype that remembers the placeholder it is decoded from and how.
The export records the decoding as a host step of the signature (``"decode"`` in the
manifest: the input, ``record_defaults``, delimiter, quoting, ``na_value``,
``select_cols``); the writer, the loader (and so the model server) and the TF SavedModel
conversion (``tf.io.decode_csv``) apply it to the request's strings before the features
reach the Estimator's host phase and the device.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np

from estimator.preprocessing._csv import (
    column_dtype,
    decode_csv,
    defaults_from_config,
    defaults_to_config,
)

__all__ = ["CSVColumn", "csv_columns", "decode_steps", "apply_decodes", "dummy_records"]


class CSVColumn(jax.ShapeDtypeStruct):
    """One column of CSV lines decoded at serving time (a receiver feature spec).

    Attributes:
      source: the string spec (placeholder) the lines come in.
      options: the decoding, as JSON: ``record_defaults`` and TF's options.
      index: the column's position among the decoded (selected) columns.
    """

    def __init__(self, source: jax.ShapeDtypeStruct, options: dict, index: int) -> None:
        dtype = column_dtype(defaults_from_config(options["record_defaults"])[index])
        super().__init__(tuple(source.shape), dtype)
        self.source = source
        self.options = options
        self.index = index


def csv_columns(
    records: jax.ShapeDtypeStruct,
    record_defaults: Sequence[Sequence],
    *,
    field_delim: str = ",",
    use_quote_delim: bool = True,
    na_value: str = "",
    select_cols: Sequence[int] | None = None,
) -> list[CSVColumn]:
    """The columns of CSV lines arriving in ``records`` (TF's ``decode_csv`` on a
    placeholder), as receiver feature specs.

    Args:
      records: a string spec, e.g. ``jax.ShapeDtypeStruct((None,), object)``.
      record_defaults, field_delim, use_quote_delim, na_value, select_cols: as
        ``estimator.preprocessing.decode_csv``.

    Returns:
      One :class:`CSVColumn` per column, of ``records``' shape.

    Raises:
      ValueError: ``records`` that do not hold strings.
    """
    if np.dtype(records.dtype).kind not in "OUS":
        raise ValueError(
            f"decode_csv decodes strings; the serving input is {records.dtype}. Declare it "
            "as tf.placeholder(tf.string, [None])."
        )
    options = {
        "record_defaults": defaults_to_config(record_defaults),
        "field_delim": field_delim,
        "use_quote_delim": bool(use_quote_delim),
        "na_value": na_value,
        "select_cols": None if select_cols is None else [int(c) for c in select_cols],
    }
    return [CSVColumn(records, options, i) for i in range(len(record_defaults))]


def decode_steps(features: Mapping[str, Any], specs: Mapping[str, Any]) -> tuple[list, dict]:
    """The decoding steps a receiver's features need, and where each CSV feature is found.

    Args:
      features: the receiver's ``{key: spec}``.
      specs: the receiver tensors ``{name: spec}``.

    Returns:
      ``(steps, sources)``: JSON steps ``{"input", "outputs", **options}`` (``outputs``
      maps a column index to the name its values get) and ``{feature key: that name}``.

    Raises:
      ValueError: a CSV column whose lines are not one of the receiver tensors.
    """
    steps: dict[tuple, dict] = {}
    sources: dict[str, str] = {}
    for key, spec in features.items():
        if not isinstance(spec, CSVColumn):
            continue
        names = [name for name, s in specs.items() if s is spec.source]
        if not names:
            raise ValueError(
                f"Feature {key!r} is decoded from CSV lines that are not among the receiver "
                f"tensors ({sorted(specs)}); pass the placeholder given to decode_csv in "
                "receiver_tensors."
            )
        step_key = (names[0], repr(sorted(spec.options.items())))
        step = steps.setdefault(step_key, {"input": names[0], "outputs": {}, **spec.options})
        sources[key] = step["outputs"].setdefault(str(spec.index), f"{names[0]}:{spec.index}")
    return list(steps.values()), sources


def apply_decodes(inputs: Mapping[str, Any], steps: Sequence[Mapping]) -> dict:
    """``inputs`` with the decoded columns of each step added under their names.

    Raises:
      ValueError: lines that do not parse (``decode_csv``'s messages).
    """
    out = dict(inputs)
    for step in steps:
        columns = decode_csv(
            np.asarray(inputs[step["input"]], dtype=object),
            defaults_from_config(step["record_defaults"]),
            field_delim=step["field_delim"],
            use_quote_delim=step["use_quote_delim"],
            na_value=step["na_value"],
            select_cols=step["select_cols"],
        )
        for index, name in step["outputs"].items():
            out[name] = columns[int(index)]
    return out


def dummy_records(step: Mapping, shape: tuple) -> np.ndarray:
    """Lines of ``shape`` that decode (every required field ``0``): placeholder values for
    tracing an export."""
    defaults = step["record_defaults"]
    width = len(defaults) if step["select_cols"] is None else max(step["select_cols"]) + 1
    fields = [""] * width
    for position, default in enumerate(defaults):
        column = position if step["select_cols"] is None else step["select_cols"][position]
        fields[column] = "" if default else "0"
    return np.full(shape, step["field_delim"].join(fields), dtype=object)
