"""Compile once (issue 10 requirement 1): compiles are counted with ``jax.monitoring``
(backend compiles), in fresh processes so the process-wide cache setting is theirs."""

import json
import subprocess
import sys
import textwrap

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
    config = est.RunConfig(compilation_cache_dir=sys.argv[1] or None, steps_per_execution=1)
    model = canned.LinearClassifier(columns, sys.argv[2], config=config)
    feed = lambda: est.inputs.numpy_input_fn(x, y, batch_size=32, num_epochs=1, shuffle=False)
    model.train(feed())  # 4 steps: batches of 32, 32, 32 and a shorter 4
    first = compiles()
    model.train(feed())  # the same shapes again: nothing compiles
    again = compiles() - first
    fresh = canned.LinearClassifier(columns, sys.argv[2], config=config)
    fresh.train(feed())  # restored from the checkpoint, new Estimator
    print(json.dumps({"first": first, "again": again, "fresh": compiles() - first - again,
                      "cache": jax.config.jax_compilation_cache_dir}))
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


def test_a_second_process_compiles_nothing(tmp_path):
    cache = str(tmp_path / "cache")
    first = _run(tmp_path, cache, "a")
    assert first["cache"] == cache
    assert first["first"] > 0  # a cold cache compiles
    assert first["again"] == 0  # the same Estimator, same shapes: nothing
    second = _run(tmp_path, cache, "b")
    # Everything the rerun needs is in the cache: no backend compile at all.
    assert second == {"first": 0, "again": 0, "fresh": 0, "cache": cache}


def test_the_cache_can_be_turned_off(tmp_path):
    result = _run(tmp_path, "", "c")  # compilation_cache_dir=None
    assert result["cache"] is None and result["first"] > 0 and result["again"] == 0


def test_default_directory_and_replace(monkeypatch, tmp_path):
    monkeypatch.setenv("JAX_ESTIMATOR_CACHE_DIR", str(tmp_path / "env"))
    assert est.RunConfig().compilation_cache_dir == str(tmp_path / "env")
    monkeypatch.delenv("JAX_ESTIMATOR_CACHE_DIR")
    assert est.RunConfig().compilation_cache_dir.endswith("/.cache/jax-estimator/xla")
    assert est.RunConfig().replace(compilation_cache_dir=None).compilation_cache_dir is None
