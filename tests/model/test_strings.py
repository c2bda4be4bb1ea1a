"""Tests for ``estimator/strings.py``: string outputs as ids + a static vocabulary."""

import jax
import jax.numpy as jnp
import numpy as np

import estimator as est
from estimator.model.strings import IndexToString, to_host

VOCAB = ["neg", "pos", "maybe"]


def test_index_to_string_fields():
    t = est.index_to_string([[0], [2]], VOCAB)
    assert isinstance(t, IndexToString)
    assert isinstance(t.ids, jax.Array)
    assert t.vocabulary == ("neg", "pos", "maybe")
    assert t.default_value == "UNK"  # TF's index_to_string_table default
    assert t.shape == (2, 1)


def test_to_numpy_gives_bytes_objects_and_unk_out_of_range():
    t = est.index_to_string(jnp.array([[0, 1], [2, 3], [-1, 1]]), VOCAB)
    out = t.to_numpy()
    assert out.dtype == object and out.shape == (3, 2)
    # ids 3 and -1 are outside [0, 3): the default value, as TF's lookup table.
    assert out.tolist() == [[b"neg", b"pos"], [b"maybe", b"UNK"], [b"UNK", b"pos"]]
    assert all(isinstance(v, bytes) for v in out.ravel())


def test_custom_default_value():
    t = IndexToString(np.array([5]), ["a"], default_value="other")
    assert t.to_numpy().tolist() == [b"other"]


def test_non_ascii_vocabulary_is_utf8_encoded():
    t = est.index_to_string(jnp.array([0]), ["café"])
    assert t.to_numpy().tolist() == ["café".encode()]


def test_passes_through_jit_with_static_vocabulary():
    traces = []

    @jax.jit
    def classify(logits):
        traces.append(1)
        return {"classes": est.index_to_string(jnp.argmax(logits, -1), VOCAB)}

    out = classify(jnp.array([[0.1, 0.9, 0.0], [2.0, 0.0, 1.0]]))
    classes = out["classes"]
    assert isinstance(classes, IndexToString)
    assert classes.vocabulary == tuple(VOCAB)
    np.testing.assert_array_equal(np.asarray(classes.ids), [1, 0])
    assert classes.to_numpy().tolist() == [b"pos", b"neg"]
    classify(jnp.zeros((2, 3)))
    assert len(traces) == 1  # same shapes and vocabulary: no re-trace


def test_vocabulary_is_pytree_metadata():
    t = est.index_to_string(jnp.array([1, 2]), VOCAB)
    leaves, treedef = jax.tree_util.tree_flatten(t)
    assert len(leaves) == 1 and leaves[0] is t.ids
    rebuilt = jax.tree_util.tree_unflatten(treedef, [jnp.array([0, 0])])
    assert rebuilt.vocabulary == tuple(VOCAB) and rebuilt.default_value == "UNK"
    assert rebuilt.to_numpy().tolist() == [b"neg", b"neg"]


def test_getitem_slices_ids_and_keeps_vocabulary():
    t = est.index_to_string(jnp.array([[0, 1], [2, 0]]), VOCAB)
    row = t[1]
    assert isinstance(row, IndexToString) and row.shape == (2,)
    assert row.to_numpy().tolist() == [b"maybe", b"neg"]


def test_to_host_converts_nested_index_to_string_and_device_gets_arrays():
    tree = {
        "classes": est.index_to_string(jnp.array([2, 7]), VOCAB),
        "probs": jnp.array([0.25, 0.75]),
        "nested": [est.index_to_string(jnp.array([1]), VOCAB)],
    }
    host = to_host(tree)
    assert host["classes"].tolist() == [b"maybe", b"UNK"]
    assert isinstance(host["probs"], np.ndarray)
    np.testing.assert_array_equal(host["probs"], [0.25, 0.75])
    assert host["nested"][0].tolist() == [b"pos"]


def test_repr_mentions_vocabulary():
    assert "vocabulary=('neg', 'pos', 'maybe')" in repr(est.index_to_string([0], VOCAB))
