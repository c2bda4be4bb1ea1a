"""File input for ``tf.data``: ``TextLineDataset``, ``TFRecordDataset`` and ``decode_csv``.

``TFRecordDataset(filenames, compression_type)`` yields each record of each TFRecord file
as a bytes scalar, read by ``estimator.io`` (CRCs checked, ``""``/``"GZIP"``/``"ZLIB"``);
with ``num_parallel_reads`` the files are interleaved, one record from each in turn, as
TF's.

``TextLineDataset(filenames)`` yields each line of each file (without its line break) as
a bytes scalar, reading the files lazily in order, as TF's; ``.gz`` files (or
``compression_type="GZIP"``) are decompressed. Both read local paths and storage URLs
(``gs://``, ``s3://``, ...) through ``estimator.io.fs``; a pipeline over them that batches
runs on the input engine (``_streaming``). ``decode_csv`` parses one record or an array of
records into one array per column, typed by ``record_defaults`` as TF's (a float default
gives float32, an int int32, a string bytes; ``estimator.preprocessing.decode_csv``: an
array of records is parsed at once); on a serving placeholder it gives the columns an
export decodes at serving time.
"""

from __future__ import annotations

import jax
import numpy as np

from estimator.compat.v1.data._dataset import Dataset
from estimator.compat.v1.data._pipeline import Source
from estimator.compat.v1.data._streaming import Files
from estimator.export import csv_columns
from estimator.io import fs, tfrecord
from estimator.preprocessing import decode_csv as _decode_csv

__all__ = ["TFRecordDataset", "TextLineDataset", "decode_csv"]


def _names(filenames) -> list[str]:
    names = [filenames] if isinstance(filenames, (str, bytes)) else list(np.ravel(filenames))
    return [n.decode() if isinstance(n, bytes) else str(n) for n in names]


def TextLineDataset(  # noqa: N802 (TF's class name)
    filenames, compression_type=None, buffer_size=None, num_parallel_reads=None, name=None
) -> Dataset:
    """``tf.data.TextLineDataset``: the lines of ``filenames`` (a path or a list; local paths
    or storage URLs such as ``gs://``/``s3://``, ``estimator.io.fs``), as bytes.

    Raises:
      ValueError: an unsupported compression type (at once); a URL whose protocol is not
        available (naming the package to install).
    """
    compression = None
    if compression_type is not None:
        compression = tfrecord.TFRecordOptions.get_compression_type_string(compression_type)
    names = [fs.check(n, "TextLineDataset file") for n in _names(filenames)]
    return Dataset(Source("generator", Files("lines", names, compression)))


def TFRecordDataset(  # noqa: N802 (TF's class name)
    filenames, compression_type=None, buffer_size=None, num_parallel_reads=None, name=None
) -> Dataset:
    """``tf.data.TFRecordDataset``: the records of the TFRecord files ``filenames`` (a path,
    a list, or a dataset element holding them; local paths or storage URLs), as bytes
    scalars.

    Raises:
      ValueError: a bad compression type (at once).
      tf.errors.NotFoundError: a named file that does not exist (when read, TF's "<name>;
        No such file or directory"; a name with glob characters is expanded as a pattern,
        which TF does not do).
      tf.errors.DataLossError: a damaged record (when read; the native
        ``estimator.io.CorruptRecordError`` names the file and the byte offset).
    """
    compression = tfrecord.TFRecordOptions.get_compression_type_string(compression_type)
    names = _names(filenames)
    cycle = 1 if num_parallel_reads in (None, 0) else max(1, int(num_parallel_reads))
    if cycle < 0:
        cycle = len(names)
    return Dataset(Source("generator", Files("records", names, compression, cycle)))


def decode_csv(
    records,
    record_defaults,
    field_delim=",",
    use_quote_delim=True,
    name=None,
    na_value="",
    select_cols=None,
) -> list:
    """``tf.io.decode_csv``: one array per column, each of the records' shape
    (``estimator.preprocessing.decode_csv``).

    In a ``serving_input_receiver_fn``, on a ``tf.placeholder(tf.string, [None])``, it
    returns the columns as inputs the export decodes from CSV lines at serving time (TF's
    CSV serving receiver; ``estimator.export.csv_columns``).

    Args:
      records: a string (bytes or str) or an array of them; or a string placeholder.
      record_defaults: one list per column: ``[default]`` (its type gives the column's), or
        ``[]`` for a required column.
      field_delim, use_quote_delim, na_value, select_cols: TF's meaning.

    Returns:
      ``[array]`` per selected column: float32, int32 (unless ``jax_enable_x64`` with
      int64 defaults), bool or bytes (object) values; specs for a placeholder.

    Raises:
      ValueError: a record with the wrong number of fields, or a missing value in a
        required column (TF's messages).
    """
    del name
    options = dict(
        field_delim=field_delim,
        use_quote_delim=use_quote_delim,
        na_value=na_value,
        select_cols=select_cols,
    )
    if isinstance(records, jax.ShapeDtypeStruct):
        return csv_columns(records, record_defaults, **options)
    return _decode_csv(records, record_defaults, **options)
