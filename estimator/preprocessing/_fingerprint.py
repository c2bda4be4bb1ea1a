"""TensorFlow's string fingerprints, vectorized over NumPy arrays (internal).

Two hashes decide every hashed id of TF's feature columns, and both are stable across
processes, platforms and releases (no per-process seed, unlike Python's ``hash``):

* ``Fingerprint64(s)``: FarmHash's ``Fingerprint64`` of the UTF-8 bytes of ``s``
  (``tensorflow/tsl/platform/fingerprint.h``). ``tf.strings.to_hash_bucket_fast`` and
  ``categorical_column_with_hash_bucket`` use ``Fingerprint64(s) % num_buckets``. The
  ``pyfarmhash`` package's ``farmhash.fingerprint64`` is the same function
  (checked against TF 2.15.1, see ``tests/model/test_preprocessing.py``).
* ``FingerprintCat64(a, b)``: TF's combination of two 64-bit fingerprints (same header),
  used by ``sparse_cross_hashed`` to hash feature crosses.
"""

from __future__ import annotations

from collections.abc import Iterable

import farmhash
import numpy as np

_K_MUL = np.uint64(0xC6A4A7935BD1E995)
_SHIFT = np.uint64(47)


def fingerprint64(values: Iterable[str | bytes]) -> np.ndarray:
    """FarmHash ``Fingerprint64`` of each string (TF's ``Fingerprint64``).

    Args:
      values: strings (hashed as UTF-8) or bytes.

    Returns:
      ``uint64`` array, one fingerprint per value.
    """
    values = values if isinstance(values, list) else list(values)
    return np.fromiter(map(farmhash.fingerprint64, values), dtype=np.uint64, count=len(values))


def _shift_mix(x: np.ndarray) -> np.ndarray:
    return x ^ (x >> _SHIFT)


def fingerprint_cat64(fp1: np.ndarray, fp2: np.ndarray) -> np.ndarray:
    """TF's ``FingerprintCat64(fp1, fp2)``, elementwise on ``uint64`` arrays (broadcasting).

    ``r = fp1 ^ kMul; r ^= ShiftMix(fp2 * kMul) * kMul; r *= kMul; r = ShiftMix(r) * kMul;
    return ShiftMix(r)`` with ``kMul = 0xc6a4a7935bd1e995``, ``ShiftMix(v) = v ^ (v >> 47)``
    and arithmetic modulo 2**64. Not commutative.
    """
    fp1 = np.asarray(fp1, dtype=np.uint64)
    fp2 = np.asarray(fp2, dtype=np.uint64)
    with np.errstate(over="ignore"):
        result = fp1 ^ _K_MUL
        result = result ^ (_shift_mix(fp2 * _K_MUL) * _K_MUL)
        result = result * _K_MUL
        result = _shift_mix(result) * _K_MUL
        return _shift_mix(result)
