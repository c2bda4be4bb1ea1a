"""TFRecord files without TensorFlow: reading and writing (``tf.io.TFRecordWriter``,
``tf.data.TFRecordDataset``'s reader).

A TFRecord file is a sequence of records, each framed as TF's ``record_writer.cc`` writes
it::

    uint64 length (little-endian)
    uint32 masked CRC32C of the length's 8 bytes
    byte   data[length]
    uint32 masked CRC32C of the data

(``masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8``, modulo 2**32). The whole
stream may be compressed: ``compression_type`` ``""`` (none), ``"GZIP"`` or ``"ZLIB"``.
CRCs are computed by the ``crc32c`` package (hardware CRC32C) and checked on every read.

Files written by TF's ``tf.io.TFRecordWriter`` read back here, and files written here
read back in TF, for all three compressions (``tests/io/test_io_tfrecord.py``). A damaged
file raises :class:`CorruptRecordError` naming the file, the byte offset and the fix;
nothing is skipped unless ``ignore_errors=True``, which skips the rest of a damaged file
(a frame cannot be found again after a bad length) and counts it in a :class:`ReadStats`.
:class:`TFRecordWriter` writes under a temporary name and renames the file into place on
``close()``: a failed or interrupted write leaves no partial file behind.
"""

from estimator.io.tfrecord.framing import COMPRESSION_TYPES as COMPRESSION_TYPES
from estimator.io.tfrecord.framing import CorruptRecordError as CorruptRecordError
from estimator.io.tfrecord.framing import TFRecordOptions as TFRecordOptions
from estimator.io.tfrecord.framing import masked_crc32c as masked_crc32c
from estimator.io.tfrecord.reader import ReadStats as ReadStats
from estimator.io.tfrecord.reader import list_files as list_files
from estimator.io.tfrecord.reader import read_record_chunks as read_record_chunks
from estimator.io.tfrecord.reader import read_records as read_records
from estimator.io.tfrecord.reader import tf_record_iterator as tf_record_iterator
from estimator.io.tfrecord.writer import TFRecordWriter as TFRecordWriter
from estimator.io.tfrecord.writer import write_records as write_records

__all__ = [
    "CorruptRecordError",
    "ReadStats",
    "TFRecordOptions",
    "TFRecordWriter",
    "list_files",
    "read_records",
    "tf_record_iterator",
    "write_records",
]
