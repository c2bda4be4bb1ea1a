"""Histograms in TF's buckets (``estimator.events.histograms``), checked against
tensorboardX's ``make_histogram`` (NumPy's ``np.histogram`` over the same edges), an
independent implementation of the same layout."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from tensorboardX.summary import make_histogram

from estimator.events import histograms


def reference(values) -> dict:
    """tensorboardX's proto for ``values`` over the float32 edges the device compares with."""
    proto = make_histogram(np.asarray(values, np.float64), histograms.EDGES.astype(np.float32))
    return {
        "min": proto.min,
        "max": proto.max,
        "num": proto.num,
        "sum": proto.sum,
        "sum_squares": proto.sum_squares,
        "bucket_limits": list(proto.bucket_limit),
        "bucket_counts": list(proto.bucket),
    }


def fields(values, mask=None) -> dict:
    counts = jax.device_get(jax.jit(histograms.counts)(values, mask))
    return histograms.proto_fields(counts)


def assert_same(ours: dict, theirs: dict) -> None:
    assert ours["bucket_counts"] == theirs["bucket_counts"]
    np.testing.assert_allclose(ours["bucket_limits"], theirs["bucket_limits"], rtol=1e-6)
    assert ours["num"] == theirs["num"]
    assert (ours["min"], ours["max"]) == pytest.approx((theirs["min"], theirs["max"]), rel=1e-6)
    # float32 sums against tensorboardX's float64: within float32's rounding of the terms.
    assert ours["sum_squares"] == pytest.approx(theirs["sum_squares"], rel=1e-5)
    scale = np.sqrt(theirs["sum_squares"] * theirs["num"])  # >= the sum of |values|
    assert ours["sum"] == pytest.approx(theirs["sum"], abs=1e-6 * scale)


def test_counts_match_tensorboardx_on_every_kind_of_value():
    rng = np.random.default_rng(0)
    values = np.concatenate(
        [
            rng.normal(size=20_000),  # both signs around 0
            np.maximum(rng.normal(size=5_000), 0),  # ReLU activations: many exact zeros
            rng.normal(size=500) * 1e-11,  # the smallest buckets
            -rng.exponential(size=500) * 1e5,
            histograms.EDGES[np.abs(histograms.EDGES) < 1e6][::7],  # exactly on edges
        ]
    ).astype(np.float32)
    assert_same(fields(values), reference(values))
    # A value equal to the last edge falls in the last bucket, as np.histogram counts it.
    # (Its square overflows float32: the docstring's caveat.)
    on_last = np.array([1.0, histograms.EDGES[-1]], np.float32)
    ours, theirs = fields(on_last), reference(on_last)
    assert ours["bucket_counts"] == theirs["bucket_counts"]
    assert ours["bucket_counts"][-1] == 1 and ours["sum_squares"] == np.inf
    np.testing.assert_allclose(ours["bucket_limits"], theirs["bucket_limits"], rtol=1e-6)


def test_a_row_mask_leaves_out_the_padding_rows():
    rng = np.random.default_rng(1)
    values = rng.normal(size=(8, 5, 3)).astype(np.float32)
    mask = np.array([1, 1, 0, 1, 0, 0, 1, 1], np.float32)
    assert_same(fields(values, mask), reference(values[mask > 0]))
    assert fields(values, mask)["num"] == 5 * 5 * 3  # 5 rows of 15 values


def test_host_values_are_binned_the_same_way():
    values = np.random.default_rng(2).normal(size=(16, 4)).astype(np.float32)
    mask = np.ones(16, np.float32)
    host = histograms.host_counts(values, mask)
    assert all(isinstance(v, np.ndarray) for v in host.values())
    # The same buckets; the float32 sums within rounding (another summation order).
    assert_same(histograms.proto_fields(host), fields(values, mask))


def test_a_histogram_of_no_value_is_not_written():
    values = np.ones((3, 2), np.float32)
    assert histograms.proto_fields(histograms.host_counts(values, np.zeros(3))) is None
    # Values beyond TF's last edge (1e20) count in no bucket, as in np.histogram.
    assert histograms.proto_fields(histograms.host_counts(np.full(4, 1e21, np.float32))) is None


def test_host_histograms_of_different_shapes_share_one_compiled_program():
    rng = np.random.default_rng(3)
    samples = [rng.normal(size=shape).astype(np.float32) for shape in SHAPES]
    histograms.host_counts(samples[0])  # compiled here, if no test before did
    compiles = []

    def record(event, seconds, **_):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(seconds)

    jax.monitoring.register_event_duration_secs_listener(record)
    try:
        binned = [histograms.host_counts(values) for values in samples]
    finally:
        jax.monitoring.unregister_event_duration_listener(record)
    # Every shape up to HOST_PADDED_MIN values is padded to it: no compile for the others.
    assert compiles == []
    for values, counted in zip(samples, binned, strict=True):
        assert_same(histograms.proto_fields(counted), fields(values))


SHAPES = [(256, 100), (256, 75), (256, 25, 2), (7,)]
