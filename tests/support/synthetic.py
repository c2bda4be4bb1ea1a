"""Deterministic pseudo-random numbers for test data that TF's scripts regenerate exactly:
a 31-bit LCG gives the same values in every NumPy (the TF venv's NumPy 1.26 too)."""

import numpy as np


def lcg(seed: int, n: int) -> np.ndarray:
    """``n`` floats in ``[0, 1)``: ``s = (1103515245·s + 12345) mod 2**31``, ``s / 2**31``."""
    out, s = [], seed
    for _ in range(n):
        s = (1103515245 * s + 12345) % 2**31
        out.append(s / 2**31)
    return np.array(out)
