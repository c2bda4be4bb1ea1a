"""TFRecord framing shared by the reader and the writer (internal): TF's masked CRC32C,
compression types, ``TFRecordOptions`` and the error for a damaged file."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import crc32c

COMPRESSION_TYPES = ("", "GZIP", "ZLIB")
_MASK_DELTA = 0xA282EAD8
_HEADER = struct.Struct("<QI")
_CRC = struct.Struct("<I")
_LENGTH = struct.Struct("<Q")
_CHUNK = 1 << 20


def masked_crc32c(data: bytes) -> int:
    """TF's masked CRC32C of ``data`` (``tensorflow/core/lib/hash/crc32c.h``)."""
    return _mask(crc32c.crc32c(data))


class CorruptRecordError(ValueError):
    """A TFRecord file that cannot be read: a truncated or corrupt record, or a compression
    that does not match. ``path`` and ``offset`` (in the uncompressed stream) say where."""

    def __init__(self, message: str, path: str, offset: int) -> None:
        super().__init__(message)
        self.path = path
        self.offset = offset


def _compression(compression_type: Any) -> str:
    if isinstance(compression_type, TFRecordOptions):
        return compression_type.compression_type
    value = "" if compression_type is None else str(compression_type).upper()
    if value not in COMPRESSION_TYPES:
        raise ValueError(
            f"compression_type must be '', 'GZIP' or 'ZLIB' (TF's names); got {compression_type!r}."
        )
    return value


@dataclass(frozen=True)
class TFRecordOptions:
    """Options of a TFRecord file (``tf.io.TFRecordOptions``).

    Args:
      compression_type: ``""``/None, ``"GZIP"`` or ``"ZLIB"``.
      compression_level: 0-9 (zlib's; default 6 as TF's).
      flush_mode, input_buffer_size, output_buffer_size, window_bits: accepted for TF
        compatibility (zlib's defaults are used).
      compression_method, mem_level, compression_strategy: the same.
    """

    compression_type: str | None = None
    flush_mode: Any = None
    input_buffer_size: Any = None
    output_buffer_size: Any = None
    window_bits: Any = None
    compression_level: int | None = None
    compression_method: Any = None
    mem_level: Any = None
    compression_strategy: Any = None

    def __post_init__(self):
        object.__setattr__(self, "compression_type", _compression(self.compression_type))
        level = self.compression_level
        if level is not None and not (0 <= int(level) <= 9):
            raise ValueError(f"compression_level must be in [0, 9]; got {level}.")

    @classmethod
    def get_compression_type_string(cls, options) -> str:
        """``""``, ``"GZIP"`` or ``"ZLIB"`` for options or a compression type name."""
        return _compression(options)


def _mask(crc):
    """TF's mask of a CRC32C: an int, or a uint64 array of them elementwise."""
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF
