"""``estimator.engine.compile_policy``: a program's compile options from how often it runs
and from the largest array it computes; and which options the canned models' train
programs get."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

import canned
import estimator as est
from estimator.engine import compile_policy, compiler
from estimator.engine.compile_policy import FEW, MANY, ONCE, SMALL_ARRAY_MAX

OLDER_EMITTERS = {"xla_cpu_use_fusion_emitters": False}


def test_a_program_of_small_arrays_compiles_with_the_older_emitters_however_often_it_runs():
    assert compile_policy.compile_options(MANY) is None  # largest not known: XLA's defaults
    assert compile_policy.compile_options(MANY, SMALL_ARRAY_MAX + 1) is None
    assert compile_policy.compile_options(MANY, SMALL_ARRAY_MAX) == OLDER_EMITTERS
    assert compile_policy.compile_options(FEW, SMALL_ARRAY_MAX + 1) == OLDER_EMITTERS
    assert compile_policy.compile_options(ONCE, 1) == {
        **OLDER_EMITTERS,
        "xla_backend_optimization_level": 0,
    }


def test_the_largest_array_counts_what_loops_and_conditionals_compute_not_the_inputs():
    def program(x, flag):
        def body(i, carry):
            wide = jnp.ones((30, 50)) * i  # 1,500 values, inside the loop only
            return carry + wide.sum()

        total = jax.lax.fori_loop(0, 3, body, x.sum())
        branch = jax.lax.cond(flag, lambda: jnp.zeros(700), lambda: jnp.ones(700))
        return total + branch.sum()

    jaxpr = jax.make_jaxpr(program)(np.ones(9000, np.float32), True)  # a 9,000-value input
    assert compile_policy.largest_array(jaxpr) == 1500
    jaxpr = jax.make_jaxpr(lambda x: jnp.outer(x, x))(np.ones(80, np.float32))
    assert compile_policy.largest_array(jaxpr) == 6400


def _train_options(monkeypatch, make_estimator, features, labels) -> list:
    """``[(largest array, compile options)]`` of each step program of one ``train()``
    (programs run once are not asked for a size; without ``fast_compile`` none is)."""
    given = []

    def record(runs, largest=None):
        options = compile_policy.compile_options(runs, largest)
        if runs != ONCE:
            given.append((largest, options))
        return options

    monkeypatch.setattr(compiler, "compile_options", record)
    model = make_estimator()
    model.train(est.inputs.numpy_input_fn(features, labels, batch_size=64, shuffle=False))
    return given


def test_a_canned_linear_models_train_program_compiles_with_the_older_emitters(
    monkeypatch, tmp_path
):
    """A LinearClassifier (``fast_compile``: canned) has small tables and batches: its train
    step (the program run many times) compiles with the older emitters; a DNNClassifier's,
    whose layer holds 64 x 100 values per batch (6,400, over SMALL_ARRAY_MAX), with XLA's
    defaults."""
    rng = np.random.default_rng(0)
    features = {"x": rng.integers(0, 50, 256).astype(np.int64)}
    labels = rng.integers(0, 2, 256).astype(np.int64)
    column = canned.feature_column.categorical_column_with_identity("x", 50)
    linear = _train_options(
        monkeypatch,
        lambda: canned.LinearClassifier([column], model_dir=str(tmp_path / "linear")),
        features,
        labels,
    )
    assert [options for _, options in linear] == [OLDER_EMITTERS]
    assert linear[0][0] <= SMALL_ARRAY_MAX
    deep = _train_options(
        monkeypatch,
        lambda: canned.DNNClassifier(
            [100],
            [canned.feature_column.embedding_column(column, 8)],
            model_dir=str(tmp_path / "dnn"),
        ),
        features,
        labels,
    )
    assert [options for _, options in deep] == [None] and deep[0][0] >= 64 * 100


def test_a_model_fn_trains_with_jits_own_options_unless_it_asks_for_fast_compile(
    monkeypatch, tmp_path
):
    """A small ``model_fn`` (a linear regression on 4 inputs) compiles its train step with
    XLA's defaults, as ``jax.jit`` does, so it computes what the user's own jitted loop
    would; with ``fast_compile=True`` with the older emitters."""

    def model_fn(features, labels, mode):
        w = est.get_variable("w", [4], initializer=est.initializers.zeros_initializer())
        loss = jnp.mean((features["x"] @ w - labels) ** 2)
        return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.1))

    features = {"x": np.random.default_rng(0).normal(size=(256, 4)).astype(np.float32)}
    labels = np.ones(256, np.float32)
    for fast, expected in [(False, None), (True, OLDER_EMITTERS)]:
        given = _train_options(
            monkeypatch,
            lambda fast=fast: est.Estimator(model_fn, str(tmp_path / str(fast)), fast_compile=fast),
            features,
            labels,
        )
        assert [options for _, options in given] == [expected]
