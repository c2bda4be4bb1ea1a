"""Warm start: TF 2.15's WarmStartSettings/VocabInfo semantics, and
the TF pain "warm start applied or skipped surprisingly".

Most tests warm-start a hand-made ``TrainState`` from a checkpoint written by
``estimator.checkpoint.Checkpointer`` with known values (no training, no compile); the
last ones go through ``Estimator``.
"""

from __future__ import annotations

import functools
import logging
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from linear_model import make_estimator, scalar_input, scalar_model_fn

from estimator import checkpoint as ckpt
from estimator import warm_starting as ws
from estimator.checkpoint import tree_form
from estimator.engine.steps import TrainState

OPT = optax.adagrad(0.1)  # state: (ScaleByRssState(sum_of_squares), EmptyState()); acc 0.1
ACC = "0/sum_of_squares"  # path of adagrad's accumulator in that state

# The source model: known values; its accumulators are 10.1 (init 0.1 + 10) to tell them
# from a fresh 0.1.
SOURCE = {
    "dense/kernel": np.array([[1.0], [2.0]], np.float32),
    "dense/bias": np.array([3.0], np.float32),
    "emb": np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]], np.float32),  # vocab a, b, c
}
SOURCE_STATS = {"stats/count": np.array(5.0, np.float32)}


def state_of(trainable, non_trainable=None, *, accumulator_offset=0.0, step=0):
    trainable = {k: jnp.asarray(v) for k, v in trainable.items()}
    opt_state = jax.tree.map(lambda x: x + accumulator_offset, OPT.init(trainable))
    non_trainable = {k: jnp.asarray(v) for k, v in (non_trainable or {}).items()}
    return TrainState(trainable, non_trainable, opt_state, jnp.int32(step), jnp.int32(-1))


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A model_dir whose checkpoint (step 7) holds SOURCE, SOURCE_STATS and accumulators."""
    model_dir = str(tmp_path_factory.mktemp("source"))
    saver = ckpt.Checkpointer(model_dir)
    saver.save(7, state_of(SOURCE, SOURCE_STATS, accumulator_offset=10.0, step=7))
    saver.wait()
    saver.close()
    return model_dir


def fresh(emb_rows=3, kernel="dense/kernel"):
    """The new model's initial state: zeros, stats/count 0, accumulators 0.1."""
    return state_of(
        {
            kernel: np.zeros((2, 1), np.float32),
            "dense/bias": np.zeros((1,), np.float32),
            "emb": np.zeros((emb_rows, 2), np.float32),
        },
        {"stats/count": np.array(0.0, np.float32)},
    )


def run(state, settings):
    return ws.warm_start(state, settings, key=jax.random.key(0), init_opt_state=OPT.init)


def acc(state, name):
    """Adagrad's accumulator of variable ``name``."""
    return np.asarray(state.opt_state[0].sum_of_squares[name])


# ----- names -------------------------------------------------------------------------------
def test_checkpoint_names_include_optimizer_state_as_variable_slash_path(source):
    assert ws.variable_names(source) == [
        "dense/bias",
        f"dense/bias/{ACC}",
        "dense/kernel",
        f"dense/kernel/{ACC}",
        "emb",
        f"emb/{ACC}",
        "stats/count",
    ]
    # A chain's leaves outside per-variable dicts are named opt_state/<path>.
    adam = optax.adam(0.1).init({"w": jnp.zeros(2)})
    assert sorted(ws.slot_paths(adam, ["w"])) == ["opt_state/0/count", "w/0/mu", "w/0/nu"]
    # The saved form (every level a dict, as the engine carries the state) names the same
    # leaves the same, also with a variable named like one of Adam's fields.
    adam = optax.adam(0.1).init({"mu": jnp.zeros(2), "w": jnp.zeros(2)})
    names = ["mu/0/mu", "mu/0/nu", "opt_state/0/count", "w/0/mu", "w/0/nu"]
    assert sorted(ws.slot_paths(adam, ["mu", "w"])) == names
    assert sorted(ws.slot_paths(tree_form.saved_form(adam), ["mu", "w"])) == names


# ----- which variables -----------------------------------------------------------------------
def test_default_regex_warm_starts_trainable_variables_only(source, caplog):
    caplog.set_level(logging.INFO, logger="estimator")
    out = run(fresh(), source)  # a path: WarmStartSettings(path), vars_to_warm_start=".*"
    for name, value in SOURCE.items():
        np.testing.assert_array_equal(out.trainable[name], value)
    assert float(out.non_trainable["stats/count"]) == 0.0  # non-trainable: not selected
    np.testing.assert_allclose(acc(out, "emb"), np.full((3, 2), 0.1))  # fresh accumulators
    assert int(out.global_step) == 0
    text = caplog.text
    assert f"Warm-starting from: {os.path.join(source, 'model.ckpt_7')}" in text
    assert "Warm-started 3 variables from" in text
    assert re.search(r"Not selected by vars_to_warm_start='\.\*'.*: stats/count, ", text)


def test_regex_matches_from_the_start_of_the_name_with_tfs_suffix(source):
    out = run(fresh(), ws.WarmStartSettings(source, vars_to_warm_start="dense"))
    np.testing.assert_array_equal(out.trainable["dense/kernel"], SOURCE["dense/kernel"])
    np.testing.assert_array_equal(out.trainable["dense/bias"], SOURCE["dense/bias"])
    np.testing.assert_array_equal(out.trainable["emb"], np.zeros((3, 2)))
    # TF's documented example: ["v1", "v2[^/]"] takes v1 and its slots, v2 without its
    # slots (names are matched as "v2:0", so "[^/]" matches the ":").
    out = run(fresh(), ws.WarmStartSettings(source, ["dense/kernel", "emb[^/]"]))
    np.testing.assert_array_equal(out.trainable["emb"], SOURCE["emb"])
    np.testing.assert_allclose(acc(out, "dense/kernel"), np.full((2, 1), 10.1))
    np.testing.assert_allclose(acc(out, "emb"), np.full((3, 2), 0.1))
    np.testing.assert_array_equal(out.trainable["dense/bias"], [0.0])


def test_list_matches_all_variables_including_optimizer_state_but_not_global_step(source):
    out = run(fresh(), ws.WarmStartSettings(source, [".*"]))
    for name, value in SOURCE.items():
        np.testing.assert_array_equal(out.trainable[name], value)
        np.testing.assert_allclose(acc(out, name), np.full(value.shape, 10.1))
    assert float(out.non_trainable["stats/count"]) == 5.0
    assert int(out.global_step) == 0  # TF's [".*"] would copy global_step (7)


def test_renames_apply_to_the_variable_and_its_optimizer_state(source):
    settings = ws.WarmStartSettings(
        source, [".*"], var_name_to_prev_var_name={"new/kernel": "dense/kernel"}
    )
    out = run(fresh(kernel="new/kernel"), settings)
    np.testing.assert_array_equal(out.trainable["new/kernel"], SOURCE["dense/kernel"])
    np.testing.assert_allclose(acc(out, "new/kernel"), np.full((2, 1), 10.1))


def test_unused_map_keys_raise_tfs_errors(source):
    with pytest.raises(
        ValueError,
        match=re.escape(
            "You provided the following variables in var_name_to_prev_var_name that were not "
            "used: {'dense/kernl'}.  Perhaps you misspelled them?  Here is the list of viable "
            "variable names: dict_keys(['dense/kernel', 'dense/bias', 'emb'])"
        ),
    ):
        run(fresh(), ws.WarmStartSettings(source, var_name_to_prev_var_name={"dense/kernl": "x"}))
    info = ws.VocabInfo("new.txt", 3, 0, "old.txt")
    # A regex string considers trainable variables only: stats/count is not viable.
    with pytest.raises(
        ValueError,
        match=re.escape(
            "You provided the following variables in var_name_to_vocab_info that were not "
            "used: {'stats/count'}."
        ),
    ):
        run(fresh(), ws.WarmStartSettings(source, var_name_to_vocab_info={"stats/count": info}))


# ----- vocabularies --------------------------------------------------------------------------
@pytest.fixture()
def vocabs(tmp_path):
    old = tmp_path / "old.txt"
    old.write_text("a\nb\nc\n")
    new = tmp_path / "new.txt"
    new.write_text("c\nd\na\n")
    return str(new), str(old)


def arange_initializer(key, shape, dtype=jnp.float32):
    """100, 101, ... in row-major order: shows which entries got backup values, in what
    order and with which shapes."""
    del key
    return jnp.arange(100, 100 + int(np.prod(shape)), dtype=dtype).reshape(shape)


def test_vocab_remaps_rows_by_token_with_zero_backup(source, vocabs):
    new, old = vocabs
    info = ws.VocabInfo(new, new_vocab_size=3, num_oov_buckets=1, old_vocab=old)
    out = run(fresh(emb_rows=4), ws.WarmStartSettings(source, var_name_to_vocab_info={"emb": info}))
    # new vocab c, d, a + 1 OOV row: c <- old row 2 = [3, 3]; d is new -> 0; a <- old row 0.
    np.testing.assert_array_equal(out.trainable["emb"], [[3, 3], [0, 0], [1, 1], [0, 0]])
    np.testing.assert_array_equal(out.trainable["dense/kernel"], SOURCE["dense/kernel"])


def test_vocab_backup_initializer_old_vocab_size_and_axis_1(tmp_path, vocabs):
    new, old = vocabs
    model_dir = str(tmp_path / "m")
    saver = ckpt.Checkpointer(model_dir)
    kernel = np.array([[1, 2, 3], [4, 5, 6]], np.float32)  # columns a, b, c
    saver.save(1, state_of({"emb": SOURCE["emb"], "out/kernel": kernel}))
    saver.wait()
    saver.close()
    target = state_of({"emb": np.zeros((4, 2), np.float32), "out/kernel": np.zeros((2, 4))})
    settings = ws.WarmStartSettings(
        model_dir,
        var_name_to_vocab_info={
            # Only a, b of the old vocabulary were used: c is new too.
            "emb": ws.VocabInfo(
                new, 3, 1, old, old_vocab_size=2, backup_initializer=arange_initializer
            ),
            "out/kernel": ws.VocabInfo(new, 3, 1, old, 2, arange_initializer, axis=1),
        },
    )
    out = run(target, settings)
    # Rows c, d miss: one initializer([4, 1]) call -> 100..103 in row-major order; the OOV
    # row is initializer([1, 2]) -> [100, 101]; a <- old row 0. (TF 2.15.1 gives the same.)
    np.testing.assert_array_equal(
        out.trainable["emb"], [[100, 101], [102, 103], [1, 1], [100, 101]]
    )
    # axis=1: columns c, d, a + OOV. As TF, old_vocab_size is ignored on columns, so c
    # <- old column 2 = [3, 6]; d misses: initializer([2, 1]) -> 100, 101 down the column;
    # a <- [1, 4]; OOV column initializer([2, 1]) -> [100, 101].
    np.testing.assert_array_equal(out.trainable["out/kernel"], [[3, 100, 1, 100], [6, 101, 4, 101]])


def test_vocab_only_with_none_and_optimizer_state_follows_the_vocabulary(source, vocabs):
    new, old = vocabs
    info = ws.VocabInfo(new, 3, 1, old)
    out = run(
        fresh(emb_rows=4),
        ws.WarmStartSettings(source, vars_to_warm_start=None, var_name_to_vocab_info={"emb": info}),
    )
    np.testing.assert_array_equal(out.trainable["emb"], [[3, 3], [0, 0], [1, 1], [0, 0]])
    np.testing.assert_array_equal(out.trainable["dense/kernel"], np.zeros((2, 1)))  # not chosen
    out = run(fresh(emb_rows=4), ws.WarmStartSettings(source, [".*"], {"emb": info}))
    # The accumulator rows follow the tokens; the new row d and the OOV row keep 0.1.
    np.testing.assert_allclose(
        acc(out, "emb"), [[10.1, 10.1], [0.1, 0.1], [10.1, 10.1], [0.1, 0.1]], rtol=1e-6
    )


def test_vocab_errors(source, vocabs, tmp_path):
    new, old = vocabs
    with pytest.raises(ValueError, match=r"The only supported values for the axis argument"):
        ws.VocabInfo(new, 3, 0, old, axis=2)
    bad = ws.WarmStartSettings(source, var_name_to_vocab_info={"emb": ws.VocabInfo(new, 3, 0, old)})
    with pytest.raises(
        ValueError, match=r"the variable has 4 entries along axis 0 .* = 3 \+ 0 = 3"
    ):
        run(fresh(emb_rows=4), bad)
    missing = ws.VocabInfo(str(tmp_path / "nope.txt"), 3, 1, old)
    with pytest.raises(ValueError, match=r"new_vocab file .*nope.txt does not exist"):
        run(
            fresh(emb_rows=4), ws.WarmStartSettings(source, var_name_to_vocab_info={"emb": missing})
        )
    short = ws.VocabInfo(new, 5, 1, old)
    with pytest.raises(ValueError, match=r"new_vocab has 3 entries, fewer than the 5 asked for"):
        run(fresh(emb_rows=6), ws.WarmStartSettings(source, var_name_to_vocab_info={"emb": short}))


# ----- mistakes are loud ------------------------------------------------------------------
def test_shape_mismatch_is_a_clear_error(source):
    with pytest.raises(
        ValueError,
        match=r"Cannot warm-start emb from emb in .*model.ckpt_7: shape \[3, 2\] there, "
        r"\[4, 2\] in the model\. If its vocabulary changed, give var_name_to_vocab_info",
    ):
        run(fresh(emb_rows=4), source)


def test_a_selection_that_warm_starts_nothing_raises(source):
    with pytest.raises(ValueError, match=r"vars_to_warm_start='dnn/\.\*' .* matches none"):
        run(fresh(), ws.WarmStartSettings(source, "dnn/.*"))
    with pytest.raises(ValueError, match=r"none of the 1 variables selected .* is in"):
        run(fresh(kernel="other/kernel"), ws.WarmStartSettings(source, "other"))


def test_variables_missing_from_the_source_keep_initial_values_with_a_warning(source, caplog):
    out = run(fresh(kernel="extra/kernel"), source)
    np.testing.assert_array_equal(out.trainable["extra/kernel"], np.zeros((2, 1)))
    np.testing.assert_array_equal(out.trainable["emb"], SOURCE["emb"])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        "Not warm-started, not in" in m and m.endswith("keep their initial values): extra/kernel.")
        for m in warnings
    )


def test_settings_and_sources(source, tmp_path):
    with pytest.raises(ValueError, match="`ckpt_to_initialize_from` MUST be set"):
        ws.WarmStartSettings("")
    with pytest.raises(ValueError, match=r"vars_to_warm_start must be a `list` or `str`"):
        ws.WarmStartSettings(source, vars_to_warm_start=3)
    with pytest.raises(ValueError, match=r"warm_start_from must be a string or a WarmStart"):
        ws.as_warm_start_settings(3)
    settings = ws.as_warm_start_settings(source.encode())
    assert settings == ws.WarmStartSettings(source, ".*", {}, {})
    # A checkpoint path, and TF's spelling of it, name the same checkpoint.
    for path in ("model.ckpt_7", "model.ckpt-7"):
        out = run(fresh(), os.path.join(source, path))
        np.testing.assert_array_equal(out.trainable["emb"], SOURCE["emb"])
    with pytest.raises(ValueError, match=r"neither a checkpoint .* nor an export"):
        run(fresh(), str(tmp_path))


# ----- through the Estimator ---------------------------------------------------------------
# The scalar model of linear_model.py (w += 0.2 (2 - w) a step).
make = functools.partial(make_estimator, model_fn=scalar_model_fn)
feed = scalar_input


def test_estimator_warm_starts_once_and_never_on_resume(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="estimator")
    old = make(tmp_path / "old").train(feed(), steps=2)
    # w: 0 -> 0.4 -> 0.72 (sgd 0.1 on (w - 2)^2: w += 0.2 (2 - w)).
    np.testing.assert_allclose(old.get_variable_value("w"), [0.72], rtol=1e-6)
    new = make(tmp_path / "new", warm_start_from=str(tmp_path / "old"))
    # evaluate before any training uses the warm-started values too (as TF): (2 - 0.72)^2.
    assert new.evaluate(feed(), steps=1)["loss"] == pytest.approx(1.6384, rel=1e-6)
    caplog.clear()
    new.train(feed(), steps=1)  # 0.72 -> 0.72 + 0.2 * 1.28 = 0.976
    np.testing.assert_allclose(new.get_variable_value("w"), [0.976], rtol=1e-6)
    assert "Warm-started 1 variables from" in caplog.text
    caplog.clear()
    new.train(feed(), steps=1)  # resumes: 0.976 -> 1.1808; warm start again would give 0.976
    np.testing.assert_allclose(new.get_variable_value("w"), [1.1808], rtol=1e-6)
    assert "Warm-started" not in caplog.text
    assert "Not warm-starting from" in caplog.text and "already has checkpoint" in caplog.text
    caplog.clear()
    restarted = make(tmp_path / "new", warm_start_from=str(tmp_path / "old"))  # a new process
    restarted.train(feed(), steps=1)  # 1.1808 -> 1.1808 + 0.2 * 0.8192 = 1.34464
    np.testing.assert_allclose(restarted.get_variable_value("w"), [1.34464], rtol=1e-6)
    assert "Warm-started" not in caplog.text
    assert restarted.get_variable_value("global_step") == 3  # 1 + 1 + 1 steps in "new"
