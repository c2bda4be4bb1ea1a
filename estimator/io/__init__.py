"""Files and data without TensorFlow: TFRecord files, ``tf.Example`` protos and their
parsing (``tf.io``).

This is a bottom layer: it knows nothing of the Estimator's engine. What lives here:

* ``protos``: ``Example``, ``SequenceExample`` and the ``Feature`` messages, from TF's real
  ``.proto`` schema in a private descriptor pool;
* ``tfrecord``: TFRecord files (``TFRecordWriter``, ``read_records`` with patterns,
  interleaving, sharding and CRC checks; ``"GZIP"``/``"ZLIB"``), and ``write_examples``
  (columns or a DataFrame to ``tf.Example`` files);
* ``fs``: the one seam for local paths and storage URLs (``gs://``, ``s3://``, any fsspec
  protocol whose package is installed): every file the package reads and writes, from
  ``model_dir`` to data files, with the two ways a write is kept whole (an atomic local
  replace; an upload with its completion marker last) and ``local_path``, which refuses
  URLs for the few writers that write local files only; ``locks``: the exclusive locks
  ``fs.exclusive_lock`` chooses between (an OS file lock, a lease on object storage);
  ``staging``: checkpoints and exports for storage orbax cannot write itself (written
  locally, published with a completion marker last);
* the parsing specs (``FixedLenFeature``, ``VarLenFeature``, ``SparseFeature``,
  ``RaggedFeature``, ``FixedLenSequenceFeature``) and ``parse_example``,
  ``parse_single_example``, ``parse_sequence_example``,
  ``parse_single_sequence_example``, giving NumPy arrays, :class:`SparseValue` and
  :class:`RaggedValue`.

Synopsis::

    import numpy as np
    from estimator import io

    example = io.protos.Example()
    example.features.feature["age"].float_list.value.append(39.0)
    parsed = io.parse_example(
        [example.SerializeToString()],
        {"age": io.FixedLenFeature([1], np.float32),
         "tags": io.VarLenFeature(str)})
    # parsed["age"] == [[39.]] (float32); parsed["tags"] is an empty SparseValue [1, 0]
"""

from estimator.io import fs as fs
from estimator.io import protos as protos
from estimator.io import tfrecord as tfrecord
from estimator.io._parse import parse_example as parse_example
from estimator.io._parse import parse_single_example as parse_single_example
from estimator.io._sequence import parse_sequence_example as parse_sequence_example
from estimator.io._sequence import (
    parse_single_sequence_example as parse_single_sequence_example,
)
from estimator.io._specs import FixedLenFeature as FixedLenFeature
from estimator.io._specs import FixedLenSequenceFeature as FixedLenSequenceFeature
from estimator.io._specs import RaggedFeature as RaggedFeature
from estimator.io._specs import SparseFeature as SparseFeature
from estimator.io._specs import VarLenFeature as VarLenFeature
from estimator.io._values import RaggedValue as RaggedValue
from estimator.io._values import SparseValue as SparseValue
from estimator.io.examples import serialize_examples as serialize_examples
from estimator.io.examples import write_examples as write_examples
from estimator.io.fs import local_path as local_path
from estimator.io.tfrecord import CorruptRecordError as CorruptRecordError
from estimator.io.tfrecord import TFRecordOptions as TFRecordOptions
from estimator.io.tfrecord import TFRecordWriter as TFRecordWriter
from estimator.io.tfrecord import list_files as list_files
from estimator.io.tfrecord import read_records as read_records

__all__ = [
    "CorruptRecordError",
    "fs",
    "TFRecordOptions",
    "TFRecordWriter",
    "list_files",
    "local_path",
    "read_records",
    "serialize_examples",
    "tfrecord",
    "write_examples",
    "FixedLenFeature",
    "FixedLenSequenceFeature",
    "RaggedFeature",
    "RaggedValue",
    "SparseFeature",
    "SparseValue",
    "VarLenFeature",
    "parse_example",
    "parse_sequence_example",
    "parse_single_example",
    "parse_single_sequence_example",
    "protos",
]
