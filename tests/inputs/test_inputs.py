"""Tests for ``estimator/inputs.py``: numpy_input_fn, call_input_fn, iterate_batches,
Prefetcher.

Batches and messages marked "from TF 2.15.1" were produced by
``tf.compat.v1.estimator.inputs.numpy_input_fn`` of tensorflow 2.15.1 (queue runners in a
session) on the same arrays.
"""

import functools
import itertools

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import estimator as est
from estimator.engine.epochs import Passes
from estimator.engine.input_pipeline import (
    Prefetcher,
    batch_pipeline,
    call_input_fn,
    iterate_batches,
)
from estimator.fn_args import fn_args
from estimator.inputs import Batches, numpy_io

X = {"a": np.arange(5.0), "b": np.arange(10, 15)}
Y = np.arange(100, 105)


def _batches(input_fn, n=None, config=None):
    gen = input_fn(config)
    return list(gen if n is None else itertools.islice(gen, n))


# --- numpy_input_fn: arguments ------------------------------------------------------------


@pytest.mark.parametrize("shuffle", [None, 1, "yes"])
def test_shuffle_must_be_a_bool(shuffle):
    with pytest.raises(
        ValueError,
        match=r"^shuffle must be provided and explicitly set as boolean \(it is recommended to "
        rf"set it as True for training\); got {shuffle}$",
    ):
        est.inputs.numpy_input_fn(X, Y, shuffle=shuffle)


def test_shuffle_is_required():
    with pytest.raises(ValueError, match="got None$"):
        est.inputs.numpy_input_fn(X, Y)


@pytest.mark.parametrize("batch_size", [0, -1])
def test_batch_size_must_be_positive(batch_size):
    with pytest.raises(ValueError, match=rf"^batch_size must be > 0, given: {batch_size}$"):
        est.inputs.numpy_input_fn(X, Y, batch_size=batch_size, shuffle=False)


def test_defaults_as_tf():
    # TF's signature: batch_size=128, num_epochs=1: 5 examples -> one batch of 5, then end.
    batches = _batches(est.inputs.numpy_input_fn(X, Y, shuffle=False))
    assert len(batches) == 1
    np.testing.assert_array_equal(batches[0][1], Y)


# --- numpy_input_fn: batching -------------------------------------------------------------


def test_batches_span_epochs_and_last_is_partial():
    fn = est.inputs.numpy_input_fn(X, Y, batch_size=3, num_epochs=2, shuffle=False)
    batches = _batches(fn)
    # From TF 2.15.1: rows [0, 1, 2], [3, 4, 0], [1, 2, 3], [4], then OutOfRange.
    rows = [[0, 1, 2], [3, 4, 0], [1, 2, 3], [4]]
    assert len(batches) == 4
    for (features, labels), r in zip(batches, rows, strict=True):
        assert sorted(features) == ["a", "b"]
        np.testing.assert_array_equal(features["a"], np.arange(5.0)[r])
        np.testing.assert_array_equal(features["b"], np.arange(10, 15)[r])
        np.testing.assert_array_equal(labels, Y[r])


def test_num_epochs_none_gives_only_full_batches_forever():
    fn = est.inputs.numpy_input_fn(X, Y, batch_size=3, num_epochs=None, shuffle=False)
    batches = _batches(fn, n=100)
    # From TF 2.15.1: [0, 1, 2], [3, 4, 0], [1, 2, 3], [4, 0, 1], ... (dequeue_many).
    np.testing.assert_array_equal(batches[3][1], Y[[4, 0, 1]])
    assert all(len(labels) == 3 for _, labels in batches)
    # 100 batches of 3 = 300 examples = 60 epochs of 5: each example seen 60 times.
    counts = np.bincount(np.concatenate([labels for _, labels in batches]) - 100)
    np.testing.assert_array_equal(counts, [60] * 5)


def test_contiguous_batches_are_views_of_the_arrays():
    fn = est.inputs.numpy_input_fn(X, Y, batch_size=2, shuffle=False)
    features, labels = next(fn())
    assert np.shares_memory(features["a"], X["a"]) and np.shares_memory(labels, Y)


def test_array_x_is_the_features():
    x = np.arange(4.0).reshape(4, 1)
    batches = _batches(est.inputs.numpy_input_fn(x, batch_size=3, shuffle=False))
    # From TF 2.15.1: [[0.], [1.], [2.]] then [[3.]]; no labels.
    assert len(batches) == 2
    assert isinstance(batches[0], np.ndarray)
    np.testing.assert_array_equal(batches[0], [[0.0], [1.0], [2.0]])
    np.testing.assert_array_equal(batches[1], [[3.0]])


def test_array_x_with_labels():
    ((features, labels),) = _batches(
        est.inputs.numpy_input_fn(np.ones((2, 3)), np.array([1, 0]), shuffle=False)
    )
    assert features.shape == (2, 3)
    np.testing.assert_array_equal(labels, [1, 0])


def test_dict_y():
    fn = est.inputs.numpy_input_fn(
        {"a": np.arange(2)},
        {"l1": np.arange(2), "l0": np.arange(2) * 2},
        batch_size=8,
        shuffle=False,
    )
    ((features, labels),) = _batches(fn)
    # From TF 2.15.1: ({'a': [0, 1]}, {'l0': [0, 2], 'l1': [0, 1]}).
    assert list(labels) == ["l0", "l1"]
    np.testing.assert_array_equal(labels["l0"], [0, 2])
    np.testing.assert_array_equal(features["a"], [0, 1])


def test_feature_named_like_the_internal_target_key():
    # TF picks a target key not used by x ("__target_key___n").
    fn = est.inputs.numpy_input_fn(
        {"__target_key__": np.arange(2)}, np.arange(2) + 7, batch_size=8, shuffle=False
    )
    ((features, labels),) = _batches(fn)
    # From TF 2.15.1: ({'__target_key__': [0, 1]}, [7, 8]).
    assert list(features) == ["__target_key__"]
    np.testing.assert_array_equal(features["__target_key__"], [0, 1])
    np.testing.assert_array_equal(labels, [7, 8])


def test_list_values_in_dict_are_converted():
    ((features, labels),) = _batches(
        est.inputs.numpy_input_fn({"a": [1, 2]}, [3, 4], shuffle=False)
    )
    assert isinstance(features["a"], np.ndarray) and isinstance(labels, np.ndarray)


# --- numpy_input_fn: errors (raised when input_fn is called, as TF) ------------------------


def test_duplicate_keys():
    fn = est.inputs.numpy_input_fn(X, {"a": Y, "c": Y}, shuffle=False)
    with pytest.raises(ValueError, match=r"^1 duplicate keys are found in both x and y: \{'a'\}$"):
        fn()


@pytest.mark.parametrize(
    "x, y, shapes",
    [
        # From TF 2.15.1, each message's last two lines.
        (X, np.arange(4), r"Shapes in x: \{'a': \(5,\), 'b': \(5,\)\}\nShapes in y: \(4,\)\n"),
        (
            X,
            {"l": np.arange(4)},
            r"Shapes in x: \{'a': \(5,\), 'b': \(5,\)\}\nShapes in y: \{'l': \(4,\)\}\n",
        ),
        (
            {"a": np.arange(3), "b": np.arange(4)},
            None,
            r"Shapes in x: \{'a': \(3,\), 'b': \(4,\)\}\nShapes in y: None\n",
        ),
    ],
)
def test_length_mismatch_message(x, y, shapes):
    fn = est.inputs.numpy_input_fn(x, y, shuffle=False)
    with pytest.raises(
        ValueError,
        match=r"^Length of tensors in x and y is mismatched\. All elements in x and y must have "
        r"the same length\.\n" + shapes + "$",
    ):
        fn()


@pytest.mark.parametrize(
    "x, y, error, message",
    [
        ({}, Y, ValueError, r"^x cannot be an empty dict$"),
        (np.array([]), Y, ValueError, r"^x cannot be an empty array$"),
        ([1, 2], Y, TypeError, r"^x must be a dict or array; got list$"),
        (X, {}, ValueError, r"^y cannot be empty dict, use None instead\.$"),
    ],
)
def test_empty_or_wrong_x_y(x, y, error, message):
    fn = est.inputs.numpy_input_fn(x, y, shuffle=False)
    with pytest.raises(error, match=message):
        fn()


# --- numpy_input_fn: shuffling ------------------------------------------------------------


class _Config:
    def __init__(self, random_seed):
        self.random_seed = random_seed


def _epoch_orders(fn, n_epochs, n, config):
    labels = np.concatenate([lab for _, lab in _batches(fn, config=config)])
    return labels.reshape(n_epochs, n)


def test_shuffle_permutes_each_epoch():
    n = 20
    x, y = {"a": np.arange(n)}, np.arange(n)
    fn = est.inputs.numpy_input_fn(x, y, batch_size=7, num_epochs=3, shuffle=True)
    orders = _epoch_orders(fn, 3, n, _Config(0))
    for order in orders:
        np.testing.assert_array_equal(np.sort(order), np.arange(n))  # each example once
    assert not np.array_equal(orders[0], np.arange(n))  # shuffled (1 / 20! to be identity)
    assert not np.array_equal(orders[0], orders[1])  # a new order every epoch
    # Features and labels stay paired.
    for features, labels in _batches(fn, config=_Config(0)):
        np.testing.assert_array_equal(features["a"], labels)


def test_shuffle_is_deterministic_given_a_seeded_config():
    def make():
        return est.inputs.numpy_input_fn(
            {"a": np.arange(20)}, np.arange(20), batch_size=5, num_epochs=2, shuffle=True
        )

    a = _epoch_orders(make(), 2, 20, _Config(42))
    b = _epoch_orders(make(), 2, 20, _Config(42))
    c = _epoch_orders(make(), 2, 20, _Config(43))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_shuffle_without_seed_differs_between_runs():
    fn = est.inputs.numpy_input_fn({"a": np.arange(20)}, np.arange(20), shuffle=True)
    a = _epoch_orders(fn, 1, 20, None)
    b = _epoch_orders(fn, 1, 20, None)
    assert not np.array_equal(a, b)


def test_repeated_calls_with_same_seed_draw_new_orders():
    # One input_fn called twice (e.g. train() twice) continues its sequence of orders.
    fn = est.inputs.numpy_input_fn({"a": np.arange(20)}, np.arange(20), shuffle=True)
    a = _epoch_orders(fn, 1, 20, _Config(1))
    b = _epoch_orders(fn, 1, 20, _Config(1))
    assert not np.array_equal(a, b)


def test_shuffled_batches_are_each_epochs_permutation_cut_in_order():
    # Independent derivation: numpy_input_fn draws one permutation per epoch from
    # default_rng([seed, call]) and cuts their concatenation into batches of 7 (a batch
    # spans two epochs where one ends; the last holds the 3 * 50 % 7 = 3 left over).
    # Gathering many batches' rows at once must not change a batch.
    n, size, epochs = 50, 7, 3
    x = {"a": np.arange(n, dtype=np.float32), "m": np.arange(2 * n).reshape(n, 2)}
    y = np.arange(n) + 1000
    rng = np.random.default_rng([5, 0])
    order = np.concatenate([rng.permutation(n) for _ in range(epochs)])
    fn = est.inputs.numpy_input_fn(x, y, batch_size=size, num_epochs=epochs, shuffle=True)
    for mapped in (False, True):
        batches = fn(_Config(5)) if not mapped else fn(_Config(5)).map_rows(lambda r: r)
        got = list(batches)
        assert [len(lab) for _, lab in got] == [7] * 21 + [3]
        for i, (features, labels) in enumerate(got):
            rows = order[i * size : (i + 1) * size]
            np.testing.assert_array_equal(labels, rows + 1000)
            np.testing.assert_array_equal(features["a"], rows)
            np.testing.assert_array_equal(features["m"], x["m"][rows])
        fn = est.inputs.numpy_input_fn(x, y, batch_size=size, num_epochs=epochs, shuffle=True)


def test_blocks_are_the_batches_rows_one_after_the_other_with_their_epoch_ends():
    # 50 examples in batches of 7 for 3 epochs: 22 batches, the last of 3 rows; a batch
    # ends an epoch when it holds an epoch's last example: positions 49, 99 and 149 are in
    # batches 7, 14 and 21 (0-based).
    x = {"a": np.arange(50, dtype=np.float32)}
    y = np.arange(50) + 1000
    for shuffle in (False, True):

        def fn(shuffle=shuffle):  # a new input_fn: its first call's order
            return est.inputs.numpy_input_fn(x, y, batch_size=7, num_epochs=3, shuffle=shuffle)(
                _Config(5)
            )

        batches = fn()
        expected = [(b, batches.ends_epoch) for b in batches]
        blocks = list(fn().blocks())
        if shuffle:
            # The first batch alone; then as many whole batches as the rows drawn so far
            # hold: 43 // 7 = 6 (1 row left), (1 + 50) // 7 = 7 (2 left), (2 + 50) // 7 =
            # 7 (3 left); the last 3 rows alone.
            assert [count for _, count, _ in blocks] == [1, 6, 7, 7, 1]
        else:  # in order: batch by batch
            assert [count for _, count, _ in blocks] == [1] * 22
        cut = [
            (batch, end)
            for rows, count, ends in blocks
            for batch, end in zip(numpy_io.batch_views(rows, count), ends, strict=True)
        ]
        assert [end for _, end in cut] == [end for _, end in expected]
        assert [i for i, (_, end) in enumerate(cut) if end] == [7, 14, 21]
        for (got, _), (want, _) in zip(cut, expected, strict=True):
            np.testing.assert_array_equal(got[0]["a"], want[0]["a"])
            np.testing.assert_array_equal(got[1], want[1])


def test_a_shuffled_input_gathers_a_fused_calls_batches_at_once():
    # 400 rows in batches of 4: 100 batches, the first alone. A config fusing 8 steps a
    # call: 99 = 12 blocks of 8 + 3; one running a step a call: 99 = 3 of 32 + 3.
    fn = est.inputs.numpy_input_fn({"a": np.arange(400.0)}, batch_size=4, shuffle=True)
    for fused, counts in ((8, [1] + [8] * 12 + [3]), (1, [1, 32, 32, 32, 3])):
        config = _Config(0)
        config.steps_per_execution = fused
        assert [count for _, count, _ in fn(config).blocks()] == counts


def test_a_shuffled_input_gathers_many_batches_at_once_within_its_memory_bound(monkeypatch):
    from estimator.inputs import numpy_io

    gathered = []  # rows of each gather of one array

    def rows_at(array, index):
        gathered.append(len(index))
        return array.take(index, axis=0)

    monkeypatch.setattr(numpy_io, "_rows_at", rows_at)
    # Small rows (4 bytes, batch 4): the first batch alone (it is ready at once), then
    # blocks of GATHER_BATCHES = 32 batches: 100 batches = 1 + 32 + 32 + 32 + 3.
    fn = est.inputs.numpy_input_fn(
        {"a": np.arange(400, dtype=np.float32)}, batch_size=4, num_epochs=1, shuffle=True
    )
    assert len(list(fn(_Config(0)))) == 100
    assert gathered == [4, 128, 128, 128, 12]
    # Large rows (1 MiB, batch 2): a block holds at most GATHER_BYTES = 4 MiB of rows, so
    # 2 batches, not 32 (64 MiB): 6 batches = 1 + 2 + 2 + 1.
    gathered.clear()
    big = np.zeros((12, 256, 1024), np.float32)
    fn = est.inputs.numpy_input_fn({"big": big}, batch_size=2, num_epochs=1, shuffle=True)
    assert len(list(fn(_Config(0)))) == 6
    assert (numpy_io.GATHER_BATCHES, numpy_io.GATHER_BYTES) == (32, 4 << 20)
    assert gathered == [2, 4, 4, 2]
    # Rows a host phase makes larger (4 bytes in, 256 KiB out, batch 4: 1 MiB a batch) are
    # counted as handed out: blocks of 4 batches. 10 batches = 1 (its 4 raw rows mapped on
    # their own) + 4 + 4 + 1, gathered from the mapped rows.
    gathered.clear()
    fn = est.inputs.numpy_input_fn(
        {"a": np.arange(40, dtype=np.float32)}, batch_size=4, num_epochs=1, shuffle=True
    )
    wide = fn(_Config(0)).map_rows(lambda r: {"a": np.repeat(r["a"][:, None], 1 << 16, axis=1)})
    batches = list(wide)
    assert [b["a"].shape for b in batches] == [(4, 1 << 16)] * 10
    assert gathered == [4, 16, 16, 4]


# --- call_input_fn / fn_args --------------------------------------------------------------


def test_call_input_fn_passes_arguments_by_name():
    seen = {}

    def no_args():
        return "none"

    def with_mode(mode):
        seen["mode"] = mode

    def with_all(config, params, mode):
        seen.update(config=config, params=params, all_mode=mode)

    def kw_only(*, params):
        seen["kw"] = params

    assert call_input_fn(no_args, "train", {"p": 1}, "cfg") == "none"
    call_input_fn(with_mode, "eval", {}, None)
    call_input_fn(with_all, "infer", {"p": 1}, "cfg")
    call_input_fn(kw_only, "train", {"k": 2}, None)
    assert seen == {
        "mode": "eval",
        "config": "cfg",
        "params": {"p": 1},
        "all_mode": "infer",
        "kw": {"k": 2},
    }


def test_numpy_input_fn_receives_config():
    fn = est.inputs.numpy_input_fn({"a": np.arange(20)}, np.arange(20), shuffle=True)
    assert fn_args(fn) == ("config",)
    out = list(call_input_fn(fn, "train", {}, _Config(5)))
    again = list(
        call_input_fn(
            est.inputs.numpy_input_fn({"a": np.arange(20)}, np.arange(20), shuffle=True),
            "train",
            {},
            _Config(5),
        )
    )
    np.testing.assert_array_equal(out[0][1], again[0][1])


def test_fn_args_of_partials_methods_and_callables():
    def f(mode, params, config):
        pass

    class Obj:
        def __call__(self, params):
            pass

        def method(self, mode):
            pass

    def varkw(**kwargs):
        pass

    assert fn_args(f) == ("mode", "params", "config")
    assert fn_args(functools.partial(f, "train")) == ("params", "config")
    assert fn_args(functools.partial(f, params={})) == ("mode", "config")
    assert fn_args(Obj()) == ("params",)
    assert fn_args(Obj().method) == ("mode",)
    assert fn_args(varkw) == ()  # as TF: **kwargs receives nothing


# --- iterate_batches ----------------------------------------------------------------------


def test_single_features_labels_tuple():
    f, lab = {"x": np.ones(2)}, np.zeros(2)
    ((features, labels),) = list(iterate_batches((f, lab), repeat_single=False))
    assert features == f and labels is lab
    repeated = list(itertools.islice(iterate_batches((f, lab), repeat_single=True), 3))
    assert len(repeated) == 3
    assert all(b[0]["x"] is f["x"] and b[1] is lab for b in repeated)  # no copies


def test_single_features_only():
    f = {"x": np.ones(2)}
    ((features, labels),) = list(iterate_batches(f, repeat_single=False))
    assert features == f and features["x"] is f["x"] and labels is None
    arr = jnp.ones((2, 3))
    ((features, labels),) = list(iterate_batches(arr, repeat_single=False))
    assert features is arr and labels is None


def test_single_batch_python_lists_become_arrays():
    batch = ({"x": [1.0, 2.0], "m": [[1, 2], [3, 4]]}, [0, 1])
    ((features, labels),) = list(iterate_batches(batch, repeat_single=False))
    # Each Python list is one array, as TF converts it to one tensor.
    assert isinstance(features["x"], np.ndarray) and features["x"].shape == (2,)
    assert features["m"].shape == (2, 2)
    assert isinstance(labels, np.ndarray)
    np.testing.assert_array_equal(labels, [0, 1])


def test_list_of_two_is_features_and_labels_as_tf():
    # TF's parse_input_fn_result treats a list like a tuple: (features, labels).
    ((features, labels),) = list(iterate_batches([np.ones(2), np.zeros(2)], repeat_single=False))
    np.testing.assert_array_equal(features, [1, 1])
    np.testing.assert_array_equal(labels, [0, 0])


@pytest.mark.parametrize("result", [(1, 2, 3), [np.ones(1)] * 3, (np.ones(1),)])
def test_tuple_of_wrong_length(result):
    with pytest.raises(
        ValueError,
        match=r"^input_fn should return \(features, labels\) as a len 2 tuple; got a "
        rf"{type(result).__name__} of length {len(result)}\.$",
    ):
        list(iterate_batches(result, repeat_single=False))


def test_generator_of_batches():
    def gen():
        for i in range(3):
            yield {"x": np.full(2, i)}, np.full(2, -i)

    batches = list(iterate_batches(gen(), repeat_single=True))  # not repeated: an iterable
    assert len(batches) == 3
    np.testing.assert_array_equal(batches[2][0]["x"], [2, 2])
    np.testing.assert_array_equal(batches[2][1], [-2, -2])


def test_generator_of_features_only_and_bad_element():
    batches = list(iterate_batches(iter([{"x": 1}, {"x": 2}]), repeat_single=False))
    assert batches == [({"x": 1}, None), ({"x": 2}, None)]
    bad = iterate_batches(iter([({"x": 1}, 1, 2)]), repeat_single=False)
    with pytest.raises(ValueError, match="len 2 tuple; got a tuple of length 3"):
        next(bad)


def test_object_with_as_numpy_iterator():
    class FakeDataset:
        def as_numpy_iterator(self):
            return iter([({"x": np.ones(1)}, np.zeros(1)), ({"x": np.ones(1)}, np.ones(1))])

    batches = list(iterate_batches(FakeDataset(), repeat_single=False))
    assert len(batches) == 2
    np.testing.assert_array_equal(batches[1][1], [1.0])


@pytest.mark.parametrize("result", [None, 5, 1.5, object()])
def test_non_iterable_is_a_type_error(result):
    with pytest.raises(
        TypeError,
        match=r"^input_fn must return features, \(features, labels\), an iterable of those \(one "
        rf"per batch\) or a dataset with as_numpy_iterator\(\); got {type(result).__name__}: ",
    ):
        iterate_batches(result, repeat_single=False)


# --- Prefetcher ---------------------------------------------------------------------------


def _prefetcher(n, depth=1):
    prepared = []

    def prepare(batch):
        prepared.append(batch)
        return ("ready", batch)

    return Prefetcher(iter(range(n)), prepare, depth=depth), prepared


def test_prefetcher_pop_prepares_lazily_and_in_order():
    p, prepared = _prefetcher(3)
    assert prepared == []  # nothing read at construction
    assert p.pop() == ("ready", 0)
    assert prepared == [0]
    assert [p.pop(), p.pop()] == [("ready", 1), ("ready", 2)]
    with pytest.raises(StopIteration):
        p.pop()
    with pytest.raises(StopIteration):
        p.peek()


def test_prefetcher_fill_reads_ahead_up_to_depth():
    p, prepared = _prefetcher(5, depth=2)
    p.fill()
    assert prepared == [0, 1]
    p.fill()  # already full
    assert prepared == [0, 1]
    assert p.pop() == ("ready", 0)
    assert prepared == [0, 1]  # pop used a ready batch, read nothing new
    p.fill()
    assert prepared == [0, 1, 2]


def test_prefetcher_peek_does_not_consume():
    p, prepared = _prefetcher(2)
    assert p.peek() == ("ready", 0)
    assert p.peek() == ("ready", 0)
    assert prepared == [0]
    assert p.pop() == ("ready", 0)
    assert p.peek() == ("ready", 1)


def test_prefetcher_exhaustion_with_fill():
    p, prepared = _prefetcher(1, depth=3)
    p.fill()
    assert prepared == [0]
    p.fill()  # exhausted: no further reads, no error
    assert p.pop() == ("ready", 0)
    with pytest.raises(StopIteration):
        p.pop()


class CountingTransform:
    """A host phase that counts the rows it sees: ids = 2·x (row by row, or not)."""

    def __init__(self, row_wise):
        self.row_wise, self.rows, self.calls = row_wise, 0, 0

    def apply(self, features, labels=None):
        self.calls += 1
        self.rows += len(features["x"])
        return {"ids": (2 * features["x"]).astype(np.int32)}, labels


def test_a_row_wise_host_phase_runs_once_over_all_rows_not_per_batch_and_epoch():
    x = {"x": np.arange(10)}
    y = np.arange(10, dtype=np.float32)
    seen = {}
    for row_wise in (True, False):
        fn = est.inputs.numpy_input_fn(x, y, batch_size=4, num_epochs=3, shuffle=True)
        transform = CountingTransform(row_wise)
        config = est.RunConfig(tf_random_seed=3)
        prefetcher = batch_pipeline(fn(config), "train", transform, lambda b: b)
        batches = []
        while True:
            try:
                batches.append(prefetcher.pop())
            except StopIteration:
                break
        seen[row_wise] = (batches, transform.calls, transform.rows)
    (once, calls, rows), (each, per_batch_calls, per_batch_rows) = seen[True], seen[False]
    # The first batch's 4 rows alone (that batch is ready at once), then the 10 rows once.
    assert (calls, rows) == (2, 4 + 10)
    assert (per_batch_calls, per_batch_rows) == (8, 30)  # 30 rows in 8 batches: 4,...,4, 2
    assert len(once) == len(each) == 8
    for a, b in zip(once, each, strict=True):  # the same batches either way
        np.testing.assert_array_equal(a[0]["ids"], b[0]["ids"])
        np.testing.assert_array_equal(a[1], b[1])
        np.testing.assert_array_equal(a[0]["ids"], 2 * a[1])  # rows stay together


def test_map_rows_works_in_chunks_and_only_before_reading(monkeypatch):
    monkeypatch.setattr(Batches, "CHUNK", 3)
    fn = est.inputs.numpy_input_fn({"x": np.arange(10)}, batch_size=4, num_epochs=1, shuffle=False)
    sizes = []
    mapped = fn().map_rows(lambda rows: sizes.append(len(rows["x"])) or {"x": rows["x"] + 1})
    assert sizes == []  # nothing mapped yet
    assert next(mapped)["x"].tolist() == [1, 2, 3, 4]
    assert sizes == [4]  # the first batch's rows alone
    mapped.warm()  # e.g. while the first batch's program compiles: all rows, in chunks
    assert sizes == [4, 3, 3, 3, 1]
    assert [b["x"].tolist() for b in mapped] == [[5, 6, 7, 8], [9, 10]]
    assert sizes == [4, 3, 3, 3, 1]  # once
    unwarmed = fn().map_rows(lambda rows: {"x": rows["x"] + 1})
    assert [b["x"].tolist() for b in unwarmed] == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10]]
    batches = fn()
    next(batches)
    with pytest.raises(RuntimeError, match="map_rows\\(\\) after reading batches"):
        batches.map_rows(lambda rows: rows)


# --- only the batch dimension may vary between batches ----------------------------------


def _pop_all(prefetcher):
    out = []
    while True:
        try:
            out.append(prefetcher.pop())
        except StopIteration:
            return out


def _shapes_model_fn(traced_widths):
    def model_fn(features, labels, mode):
        traced_widths.append(features["x"].shape[1])
        logits = est.layers.dense(features["x"], 1)[:, 0]
        if mode == est.ModeKeys.PREDICT:
            return est.EstimatorSpec(mode, predictions={"logits": logits})
        loss = jnp.mean((logits - labels) ** 2)
        return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.1))

    return model_fn


def _batches_of(widths, label_shapes=None):
    def input_fn():
        for i, width in enumerate(widths):
            label_shape = label_shapes[i] if label_shapes else (4,)
            yield {"x": np.ones((4, width), np.float32)}, np.zeros(label_shape, np.float32)

    return input_fn


_CALLS = {
    "train": (lambda e, fn: e.train(fn, steps=10), r"train\(\) call"),
    "eval": (lambda e, fn: e.evaluate(fn), "evaluation"),
    "infer": (lambda e, fn: list(e.predict(fn)), r"predict\(\) call"),
}


@pytest.mark.parametrize("mode", list(_CALLS))
def test_a_feature_whose_width_changes_is_an_error_naming_it_and_the_step_before_a_retrace(
    tmp_path, mode
):
    traced = []
    e = est.Estimator(_shapes_model_fn(traced), str(tmp_path))
    call, name = _CALLS[mode]
    with pytest.raises(
        ValueError,
        match=rf"^Feature 'x' changed shape at step 3 of this {name}: the first batch had "
        r"\[4, 3\], this batch has \[4, 2\]\. Only the batch dimension \(the first\) may vary "
        r"between batches: .* Give feature 'x' the shape \[batch_size, 3\] in every batch",
    ):
        call(e, _batches_of([3, 3, 2]))
    assert traced and 2 not in traced  # model_fn never ran on the width-2 batch


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_labels_whose_rank_changes_are_an_error_not_a_silent_retrace(tmp_path, mode):
    traced = []
    e = est.Estimator(_shapes_model_fn(traced), str(tmp_path))
    call, name = _CALLS[mode]
    with pytest.raises(
        ValueError,
        match=rf"^Labels changed shape at step 2 of this {name}: the first batch had \[4\], this "
        r"batch has \[4, 1\]\. Only the batch dimension .* Give labels the shape \[batch_size\]",
    ):
        call(e, _batches_of([3, 3, 3], [(4,), (4, 1), (4, 1)]))


def test_only_the_first_dimension_of_each_array_may_vary():
    # A shorter last batch, and sparse / ragged values whose value counts (their arrays'
    # first dimension) differ per batch, pass; dict key order does not matter.
    def sparse(nnz):
        return est.io.SparseValue(
            np.zeros((nnz, 2), np.int64), np.ones(nnz, np.float32), np.array([4, 3])
        )

    def ragged(n):
        return est.io.RaggedValue(np.ones(n, np.float32), (np.array([0, 1, 1, n]),))

    batches = [
        ({"x": np.ones((4, 3)), "s": sparse(5), "r": ragged(6)}, np.ones(4)),
        ({"r": ragged(2), "s": sparse(1), "x": np.ones((4, 3))}, np.ones(4)),
        ({"x": np.ones((1, 3)), "s": sparse(0), "r": ragged(3)}, np.ones(1)),
    ]
    prefetcher = batch_pipeline(iter(batches), "eval", None, lambda b: b)
    assert len(_pop_all(prefetcher)) == 3
    bad = batches[:1] + [
        (
            {
                "x": np.ones((4, 3)),
                "s": sparse(2)._replace(indices=np.zeros((2, 3), np.int64)),
                "r": ragged(1),
            },
            np.ones(4),
        )
    ]
    prefetcher = batch_pipeline(iter(bad), "eval", None, lambda b: b)
    with pytest.raises(
        ValueError,
        match=r"^Feature 's'\.indices changed shape at step 2 of this evaluation: the first batch "
        r"had \[5, 2\], this batch has \[2, 3\]\.",
    ):
        _pop_all(prefetcher)


@pytest.mark.parametrize(
    "second, message",
    [
        (
            ({"a": np.ones(4)}, np.ones(4)),
            r"^Features changed at step 2 of this train\(\) call: the first batch had keys "
            r"\['a', 'b'\], this batch has keys \['a'\]\. Every batch of a call must have the "
            r"same features \(keys and structure\)",
        ),
        (
            ({"a": np.ones(4), "b": np.ones(4)}, None),
            r"^Labels changed at step 2 of this train\(\) call: the first batch had an array of "
            r"shape \[4\], this batch has none\.",
        ),
        (
            ({"a": np.ones(4), "b": np.ones(())}, np.ones(4)),
            r"^Feature 'b' changed shape at step 2 .* the first batch had \[4\], this batch has "
            r"\[\]\.",
        ),
        (
            (np.ones((4, 2)), np.ones(4)),
            r"^Features changed at step 2 .* had keys \['a', 'b'\], this batch has an array of "
            r"shape \[4, 2\]\.",
        ),
    ],
)
def test_keys_structure_and_rank_must_stay_the_first_batchs(second, message):
    first = ({"a": np.ones(4), "b": np.ones(4)}, np.ones(4))
    prefetcher = batch_pipeline(iter([first, second]), "train", None, lambda b: b)
    prefetcher.pop()
    with pytest.raises(ValueError, match=message):
        prefetcher.pop()


def test_a_transforms_features_may_vary_in_width_but_labels_may_not():
    # Feature columns pad multi-valued and sequence features to each batch's longest (their
    # ops check the raw inputs' shapes): only the labels are checked after a transform.
    class Widening:
        row_wise = False

        def apply(self, features, labels=None):
            return {"ids": np.zeros((4, features["n"][0]), np.int32)}, labels

    batches = [({"n": np.full(4, k)}, np.ones(4)) for k in (1, 3, 2)]
    assert len(_pop_all(batch_pipeline(iter(batches), "train", Widening(), lambda b: b))) == 3
    batches.append(({"n": np.full(4, 1)}, np.ones((4, 2))))
    prefetcher = batch_pipeline(iter(batches), "train", Widening(), lambda b: b)
    with pytest.raises(ValueError, match=r"^Labels changed shape at step 4 of this train"):
        _pop_all(prefetcher)


def test_the_next_pass_of_an_input_is_checked_against_the_first_pass():
    passes = iter([[np.ones((4, 3))] * 2, [np.ones((4, 2))]])
    first = batch_pipeline(iter(next(passes)), "train", None, lambda b: b)
    prefetcher = Passes(
        first, lambda: batch_pipeline(iter(next(passes)), "train", None, lambda b: b), lambda: True
    )
    prefetcher.pop()
    prefetcher.pop()
    with pytest.raises(ValueError, match=r"^Features changed shape at step 3 of this train"):
        prefetcher.pop()
