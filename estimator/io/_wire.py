"""Reading the columns of a batch of serialized ``tf.Example``s (internal).

For now every record goes through protobuf (``_columns.collect_protobuf``).
"""

from __future__ import annotations

from estimator.io._columns import Column, collect_protobuf


def collect(records: list[bytes], keys: list[str]) -> dict[str, Column]:
    """The columns of ``keys`` over ``records`` (see ``_columns``)."""
    return collect_protobuf(records, keys)
