"""Fuzzing damaged checkpoints: random truncations, deletions,
zeroed ranges, garbage and byte flips across every file of a small checkpoint, each read in a
child process by one of the ways a checkpoint is read (train, evaluate, predict,
get_variable_value, latest_checkpoint, warm start, export). The outcome must be the values
of an intact checkpoint (the damaged one's, or the previous one's when the damage made the
newest incomplete) or a clear error naming the checkpoint: never a signal, never other
values. 20 cases in the fast tests; 200 more with the
``slow`` marker.

Each case runs in a process of its own, forked from the suite's server
(``tests/support/forkserver.py``, which has imported the package, this module and the model's
before JAX starts): a fresh process per case at a few hundredths of a second rather than the
seconds an interpreter takes to import JAX."""

from __future__ import annotations

import concurrent.futures
import os
import random
import shutil
import traceback

import forkserver
import pytest

ACTIONS = ("train", "evaluate", "predict", "get", "latest", "warm", "export")
KINDS = ("flip", "truncate", "delete", "delete_dir", "zero", "garbage")


def read(model_dir: str, action: str) -> dict:
    """Reads ``model_dir`` one way; returns what identifies the values read (exact)."""
    import numpy as np
    from test_checkpoint_integrity import RECEIVER, X, feed, make

    import estimator as est

    e = make(model_dir)
    if action == "train":
        e.train(feed(), steps=1)
        return _variables(e)
    if action == "evaluate":
        return {k: float(v) for k, v in e.evaluate(feed()).items()}
    if action == "predict":
        return {"p": [float(p["p"]) for p in e.predict(feed())]}
    if action == "get":
        return _variables(e)
    if action == "latest":
        return {"latest": os.path.basename(e.latest_checkpoint() or "")}
    if action == "warm":
        w = make(model_dir + "_warm", warm_start_from=model_dir)
        w.train(feed(), steps=1)
        return _variables(w)
    path = e.export_saved_model(model_dir + "_export", RECEIVER)
    loaded = est.export.load(path)
    return {
        "p": np.asarray(loaded.signatures["serving_default"](x=X)["p"]).tolist(),
        "global_step": loaded.global_step,
    }


def _variables(e) -> dict:
    return {
        "global_step": int(e.get_variable_value("global_step")),
        "kernel": e.get_variable_value("logits/kernel").ravel().tolist(),
        "bias": e.get_variable_value("logits/bias").ravel().tolist(),
    }


@pytest.fixture(scope="module")
def intact(tmp_path_factory):
    """A model_dir with checkpoints 0, 2, 4 and what each way of reading gives from it,
    and from it without its newest checkpoint (the previous one read)."""
    from test_checkpoint_integrity import feed, make

    base = tmp_path_factory.mktemp("fuzz")
    model_dir = base / "m"
    make(model_dir).train(feed(), steps=4)
    expected = {}
    for newest in (4, 2):
        source = base / f"ref{newest}"
        shutil.copytree(model_dir, source)
        if newest == 2:
            shutil.rmtree(source / "model.ckpt_4")
        for action in ACTIONS:
            scratch = base / f"scratch{newest}_{action}"
            shutil.copytree(source, scratch)
            expected.setdefault(action, []).append(read(str(scratch), action))
    return model_dir, expected


def _cases(seed: int, count: int, checkpoint: str) -> list[tuple[str, str, str, int]]:
    """``(action, kind, relative path, seed)``: every file (and directory) of the
    checkpoint is a target."""
    files = sorted(
        os.path.relpath(os.path.join(root, n), checkpoint)
        for root, _, names in os.walk(checkpoint)
        for n in names
    )
    dirs = sorted(
        os.path.relpath(os.path.join(root, n), checkpoint)
        for root, names, _ in os.walk(checkpoint)
        for n in names
    )
    rng = random.Random(seed)
    cases = []
    for i in range(count):  # 7 ways x 6 kinds: every pair within 42 cases
        kind = KINDS[i % len(KINDS)]
        target = rng.choice(dirs + ["."] if kind == "delete_dir" else files)
        cases.append((ACTIONS[i % len(ACTIONS)], kind, target, rng.getrandbits(32)))
    return cases


def _damage(checkpoint: str, kind: str, relative: str, seed: int) -> None:
    rng = random.Random(seed)
    path = os.path.normpath(os.path.join(checkpoint, relative))
    if kind == "delete_dir":
        shutil.rmtree(path)
        return
    if kind == "delete":
        os.remove(path)
        return
    data = bytearray(open(path, "rb").read())
    if kind == "truncate":
        data = data[: rng.randrange(len(data))] if data else data
    elif data and kind == "flip":
        for _ in range(rng.choice([1, 1, 4, 16])):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif data and kind == "zero":
        start = rng.randrange(len(data))
        end = min(len(data), start + rng.randint(1, 64))
        data[start:end] = bytes(end - start)
    elif kind == "garbage":
        data = bytearray(rng.randbytes(max(1, len(data))))
    open(path, "wb").write(bytes(data))


def _child(model_dir: str, action: str, results) -> None:
    """A case's process: reads ``model_dir`` and sends the values, or the error's last
    traceback line, then exits."""
    try:
        results.put(("values", read(model_dir, action)))
    except Exception as err:  # noqa: BLE001 - reported to the test, which judges it
        results.put(("error", traceback.format_exception_only(err)[-1].strip()))
        raise SystemExit(1) from None


def _run(context, case, model_dir: str, scratch: str, expected: dict) -> str | None:
    """Runs one case in a child process; returns what was wrong, or None."""
    action, kind, relative, seed = case
    shutil.copytree(model_dir, scratch)
    _damage(os.path.join(scratch, "model.ckpt_4"), kind, relative, seed)
    results = context.Queue()
    child = context.Process(target=_child, args=(scratch, action, results))
    child.start()
    child.join(timeout=300)
    if child.exitcode is None:
        child.kill()
        return f"{case}: hung"
    if child.exitcode < 0:
        return f"{case}: killed by signal {-child.exitcode}"
    what, value = results.get(timeout=10)
    if what == "values":  # judged by what it read; a status from the teardown of
        # orbax's threads at exit (seen once in 200 cases) is not the read's result
        if value not in expected[action]:
            return f"{case}: values of no intact checkpoint: {str(value)[:300]}"
        return None
    checkpoint = os.path.join(scratch, "model.ckpt_4")
    if not value.startswith(
        "estimator.checkpoint.reader.DataLossError: The checkpoint " + checkpoint
    ):
        return f"{case}: exit {child.exitcode} without a clear error: {value[:400]}"
    return None


def _fuzz(intact, tmp_path, seed: int, count: int) -> None:
    model_dir, expected = intact
    cases = _cases(seed, count, os.path.join(str(model_dir), "model.ckpt_4"))
    context = forkserver.context()

    def run(item):
        number, case = item
        return _run(context, case, str(model_dir), str(tmp_path / f"c{number}"), expected)

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        problems = list(pool.map(run, enumerate(cases)))
    assert [p for p in problems if p] == []


def test_fuzzed_checkpoints_give_intact_values_or_a_clear_error(intact, tmp_path):
    _fuzz(intact, tmp_path, seed=0, count=20)


@pytest.mark.slow
def test_fuzzed_checkpoints_200_more_cases(intact, tmp_path):
    _fuzz(intact, tmp_path, seed=1, count=200)


def test_the_cases_reach_every_file_and_every_way_of_reading(intact):
    model_dir, _ = intact
    checkpoint = os.path.join(str(model_dir), "model.ckpt_4")
    cases = _cases(1, 200, checkpoint) + _cases(0, 20, checkpoint)
    files = {
        os.path.relpath(os.path.join(root, n), checkpoint)
        for root, _, names in os.walk(checkpoint)
        for n in names
    }
    assert {c[0] for c in cases} == set(ACTIONS) and {c[1] for c in cases} == set(KINDS)
    hit = {c[2] for c in cases if c[1] != "delete_dir"}
    assert len(hit & files) >= 0.9 * len(files), sorted(files - hit)
