"""The saved form of an optimizer state (``estimator.checkpoint.tree_form``): optax's structure to
nested dicts and back, its description in a checkpoint's metadata, and its errors."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from estimator.checkpoint import tree_form

PARAMS = {"dense/kernel": jnp.ones((3, 2)), "dense/bias": jnp.zeros(2)}


def test_optax_state_to_the_saved_form_and_back():
    # chain(clip, adam): (EmptyState(), (ScaleByAdamState(count, mu, nu), EmptyState())).
    # Containers without leaves are left out; indices and field names become keys.
    state = optax.chain(optax.clip(1.0), optax.adam(0.1)).init(PARAMS)
    saved = tree_form.saved_form(state)
    assert list(saved) == ["1"] and list(saved["1"]) == ["0"]
    assert sorted(saved["1"]["0"]) == ["count", "mu", "nu"]
    assert sorted(saved["1"]["0"]["mu"]) == ["dense/bias", "dense/kernel"]
    back = tree_form.structured(saved, jax.eval_shape(lambda: state), "the saved state")
    assert jax.tree.structure(back) == jax.tree.structure(state)
    jax.tree.map(np.testing.assert_array_equal, back, state)
    assert tree_form.saved_form(optax.sgd(0.1).init(PARAMS)) == {}


def test_the_description_rebuilds_the_abstract_saved_form():
    saved = tree_form.saved_form(optax.adam(0.1).init(PARAMS))
    description = tree_form.describe(saved)
    assert [["0", "mu", "dense/kernel"], [3, 2], "float32"] in description
    assert [["0", "count"], [], "int32"] in description
    rebuilt = tree_form.from_description(description)
    assert jax.tree.map(lambda x: (x.shape, x.dtype), rebuilt) == jax.tree.map(
        lambda x: (x.shape, x.dtype), saved
    )
    with pytest.raises(ValueError, match=r"^not a list of \[names, shape, dtype\]: "):
        tree_form.from_description([["0", "count"]])


def test_a_different_optimizer_state_is_named_leaf_by_leaf():
    saved = tree_form.saved_form(optax.adam(0.1).init(PARAMS))
    template = jax.eval_shape(optax.adagrad(0.1).init, PARAMS)
    with pytest.raises(ValueError) as info:
        tree_form.structured(saved, template, "The optimizer state training starts from")
    assert str(info.value).startswith(
        "The optimizer state training starts from does not match train_op's state (was the "
        "optimizer changed?): 0/sum_of_squares/dense/bias: only in train_op's state; "
    )
    assert "0/count: only saved" in str(info.value)
    # A leaf of another shape: both shapes and dtypes are named.
    wider = jax.eval_shape(optax.adam(0.1).init, {**PARAMS, "dense/bias": jnp.zeros(3)})
    with pytest.raises(
        ValueError,
        match=r"0/mu/dense/bias: \[3\] float32 in train_op's "
        r"state, \[2\] float32 saved",
    ):
        tree_form.structured(saved, wider, "The saved state")
