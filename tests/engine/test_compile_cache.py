"""Compile once: compiles are counted with ``jax.monitoring``
(backend compiles), in fresh processes so the process-wide cache setting is theirs."""

import json
import subprocess
import sys
import textwrap

import pytest

import estimator as est

CHILD = textwrap.dedent(
    """
    import json, sys
    import jax, jax.monitoring
    import numpy as np
    import canned, estimator as est
    from canned import feature_column as fc

    # A backend compile is reported for cache hits too: compiles = reported - hits.
    counts = {"reported": 0, "hits": 0}
    jax.monitoring.register_event_duration_secs_listener(
        lambda name, secs, **kw: counts.update(reported=counts["reported"] + 1)
        if name == "/jax/core/compile/backend_compile_duration" else None
    )
    jax.monitoring.register_event_listener(
        lambda name, **kw: counts.update(hits=counts["hits"] + 1)
        if name == "/jax/compilation_cache/cache_hits" else None
    )
    compiles = lambda: counts["reported"] - counts["hits"]
    rng = np.random.default_rng(0)
    x = {"x": rng.normal(size=(100, 2)).astype(np.float32),
         "c": rng.choice(["a", "b", "c"], size=(100, 1)).astype(object)}
    y = (x["x"][:, 0] > 0).astype(np.int64)
    columns = [fc.numeric_column("x", shape=(2,)),
               fc.categorical_column_with_vocabulary_list("c", ["a", "b", "c"])]
    config = est.RunConfig(compilation_cache_dir=sys.argv[1] or None)
    model = canned.LinearClassifier(columns, sys.argv[2], config=config)
    feed = lambda: est.inputs.numpy_input_fn(x, y, batch_size=32, num_epochs=1, shuffle=False)
    out, done = {}, 0

    def phase(name):
        global done
        out[name] = compiles() - done
        done = compiles()

    model.train(feed())  # 4 steps: batches of 32, 32, 32 and a shorter 4
    phase("train")
    out["programs"] = dict(model.runtime.compile_counts())
    model.train(feed())  # the same shapes again: nothing compiles
    phase("train_again")
    model.evaluate(feed())
    phase("evaluate")
    model.evaluate(feed())
    phase("evaluate_again")
    list(model.predict(feed()))
    phase("predict")
    list(model.predict(feed()))
    phase("predict_again")
    out["programs_after"] = dict(model.runtime.compile_counts())
    fresh = canned.LinearClassifier(columns, sys.argv[2], config=config)
    fresh.train(feed())  # restored from the checkpoint, new Estimator
    fresh.evaluate(feed())
    phase("fresh")
    out["cache"] = jax.config.jax_compilation_cache_dir
    print(json.dumps(out))
    """
)


def _run(tmp_path, cache, name):
    out = subprocess.run(
        [sys.executable, "-c", CHILD, cache, str(tmp_path / name)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


# One program per batch signature and mode: the batches of 32 and the last one of 4, except
# where the canned linear model masks a padded last batch (train, eval; see
# estimator.model.padding): there the batch of 4 runs in the program of 32.
PROGRAMS = {"train": 1, "eval": 1, "infer": 2}


@pytest.mark.slow
def test_each_call_compiles_one_program_per_batch_shape_then_nothing(tmp_path):
    cache = str(tmp_path / "cache")
    first = _run(tmp_path, cache, "a")
    assert first["cache"] == cache
    assert first["programs"] == {"train": 1}  # steps fused or single: the same program
    assert first["programs_after"] == PROGRAMS
    # Backend compiles (jax.monitoring), auxiliary programs included (the initial state, the
    # metrics' final computation): a cold cache compiles...
    assert first["train"] >= 2 and first["evaluate"] >= 2 and first["predict"] >= 2
    assert first["train"] + first["evaluate"] + first["predict"] <= 2 * 3 + 4
    # ...a second call with the same shapes compiles nothing...
    assert first["train_again"] == first["evaluate_again"] == first["predict_again"] == 0
    # ...and a new Estimator restored from the checkpoint takes its programs from the cache.
    assert first["fresh"] == 0
    second = _run(tmp_path, cache, "b")
    # Everything a rerun needs is in the cache: no backend compile at all.
    assert {k: v for k, v in second.items() if not k.startswith("programs")} == {
        **dict.fromkeys(
            ["train", "train_again", "evaluate", "evaluate_again", "predict", "predict_again"],
            0,
        ),
        "fresh": 0,
        "cache": cache,
    }


@pytest.mark.slow
def test_the_cache_can_be_turned_off(tmp_path):
    result = _run(tmp_path, "", "c")  # compilation_cache_dir=None
    assert result["cache"] is None and result["train"] >= 2 and result["train_again"] == 0
    assert result["fresh"] > 0  # nothing kept between Estimators without the cache


def test_default_directory_and_replace(monkeypatch, tmp_path):
    monkeypatch.setenv("JAX_ESTIMATOR_CACHE_DIR", str(tmp_path / "env"))
    assert est.RunConfig().compilation_cache_dir == str(tmp_path / "env")
    monkeypatch.delenv("JAX_ESTIMATOR_CACHE_DIR")
    assert est.RunConfig().compilation_cache_dir.endswith("/.cache/jax-estimator/xla")
    assert est.RunConfig().replace(compilation_cache_dir=None).compilation_cache_dir is None
