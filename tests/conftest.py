"""Test-suite set-up: four virtual CPU devices, so sharded code paths run on one machine."""

import gc
import os
import sys
import types

# The suite's helper modules (tests/support) and the jobs it also imports (tests/jobs) are
# imported by name from every test folder.
_TESTS = os.path.dirname(os.path.abspath(__file__))
for _folder in ("support", "jobs"):
    sys.path.insert(0, os.path.join(_TESTS, _folder))

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
# Keras 3 fixes its backend when it is first imported (TensorFlow's, when TensorFlow imports
# it first); ``estimator.modules.keras`` needs JAX's. Set for every test process before
# anything imports Keras, so the Keras cases of tests/test_modules*.py run in process.
os.environ["KERAS_BACKEND"] = "jax"
# TensorBoard's event reader (EventAccumulator, used by tests that check event files) imports
# TensorFlow when it is installed, 7-9 s per test process; TensorBoard's own TF stub reads
# event files as well. An importable ``tensorboard.compat.notf`` is TensorBoard's switch to
# the stub (its ``no_tensorflow`` build target).
sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("tensorboard.compat.notf"))
# Bytecode caching, on for the suite and its processes even where PYTHONDONTWRITEBYTECODE is
# set (as in many container images): the suite starts ~60 Python interpreters (servers,
# notebook kernels, jobs), each compiling this package's source again without a cache
# (~0.5 s of CPU each), and each pytest process rewrites and compiles the test modules
# (~8 s). The cache is ``__pycache__`` folders, which git ignores.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
# Python's cyclic garbage collector, collecting less often in the test processes: tracing
# and lowering make millions of short-lived objects, and a full collection walks every live
# one (a test process ends with ~1M: JAX's caches of traces and compiled programs). With the
# default thresholds (700, 10, 10) a 244-test run of nine files spent ~10 s of its 90 s in
# collections (thousands of young ones, ~20 full ones); with these, ~3 s, and the run took
# 78 s, peak memory 1.8 GB against 1.6 GB; the whole suite took 307 s with these, 323 s
# without (filled compilation cache, 2-core EPYC, 2026-11-28). Cycles are still collected,
# later.
gc.set_threshold(50_000, 20, 100)


import pytest  # noqa: E402  (after XLA_FLAGS: jax must read them when it loads)


@pytest.fixture(scope="module")
def trained_estimator(tmp_path_factory):
    """The factory of trained Estimators, shared by a module's tests: ``trained_estimator(
    name, steps=3, input_fn=TRAIN, model_fn=model_fn, **make_estimator_arguments)`` trains
    ``name`` once (in its own model_dir) and hands the same Estimator to every later call of
    that name. Tests that train further make their own with ``linear_model.make_estimator``."""
    from linear_model import train_estimator

    trained = {}

    def factory(name: str = "trained", steps: int = 3, **kwargs):
        if name not in trained:
            model_dir = tmp_path_factory.mktemp(name) / "m"
            trained[name] = train_estimator(model_dir, steps, **kwargs)
        return trained[name]

    return factory
