"""Checkpoint integrity: every array is checked against the CRC32C recorded at
save on every read, the metadata against its directory, damage is a ``DataLossError`` (never
a different model, never a crash), and ``restore_fallback`` resumes from an intact one."""

import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap

import jax
import numpy as np
import optax
import pytest
from damage import flip, largest_data_file

import estimator as est
from estimator import checkpoint as ckpt
from estimator.checkpoint import checksums

X = np.random.default_rng(0).normal(size=(64, 300)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.float32)
RECEIVER = est.export.build_raw_serving_input_receiver_fn({"x": X[:1]})


def model_fn(features, labels, mode):
    # A 300 x 1 kernel (1,200 bytes): stored in a data file of its own, not inline in
    # orbax's index, as every array of a real model is.
    logits = est.layers.dense(features["x"], 1, name="logits")[:, 0]
    if mode == est.ModeKeys.PREDICT:
        return est.EstimatorSpec(mode, predictions={"p": logits})
    loss = optax.sigmoid_binary_cross_entropy(logits, labels).mean()
    return est.EstimatorSpec(
        mode, loss=loss, train_op=optax.adagrad(0.1), predictions={"p": logits}
    )


def feed(epochs=1):
    return est.inputs.numpy_input_fn({"x": X}, Y, batch_size=16, num_epochs=epochs, shuffle=False)


def make(model_dir, warm_start_from=None, **config):
    config.setdefault("tf_random_seed", 1)
    config.setdefault("save_checkpoints_steps", 2)
    return est.Estimator(
        model_fn, str(model_dir), est.RunConfig(**config), warm_start_from=warm_start_from
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A model_dir with checkpoints 0, 2 and 4, and the intact values of step 4."""
    model_dir = tmp_path_factory.mktemp("trained") / "m"
    e = make(model_dir)
    e.train(feed(), steps=4)
    kernel = e.get_variable_value("logits/kernel")
    return model_dir, kernel


@pytest.fixture
def copy(trained, tmp_path):
    model_dir, _ = trained
    target = tmp_path / "m"
    shutil.copytree(model_dir, target)
    return target


def test_checksums_record_and_verify_every_array():
    tree = {"a": np.arange(12, dtype=np.float32).reshape(3, 4), "b": [np.int32(7)]}
    records = checksums.compute(tree, prefix="variables")
    assert sorted(records) == ["variables/a", "variables/b/0"]
    assert records["variables/a"]["shape"] == [3, 4]
    assert records["variables/a"]["regions"][0]["index"] is None
    assert checksums.verify(tree, records, prefix="variables") == []
    damaged = {"a": tree["a"].copy(), "b": tree["b"]}
    damaged["a"][1, 2] = np.nextafter(damaged["a"][1, 2], np.float32(100))  # one bit
    (problem,) = checksums.verify(damaged, records, prefix="variables")
    assert problem.startswith("variables/a: CRC32C mismatch in bytes 0..48 of 48 (recorded ")
    # A jax array sharded over this process's 4 devices is checksummed whole.
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:4]), ("data",))
    spec = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
    sharded = {"a": jax.device_put(np.arange(16.0, dtype=np.float32).reshape(4, 4), spec)}
    assert checksums.compute(sharded, "v") == checksums.compute(
        {"a": np.arange(16.0, dtype=np.float32).reshape(4, 4)}, "v"
    )


def test_the_checksum_is_tfs_crc32c():
    # CRC32C (Castagnoli) check value of "123456789" (RFC 3720, the iSCSI polynomial).
    records = checksums.compute({"s": np.frombuffer(b"123456789", np.uint8)}, "t")
    assert records["t/s"]["regions"][0]["crc32c"] == [0xE3069283]


@pytest.mark.parametrize("item", ["variables", "opt_state"])
def test_a_flipped_bit_in_an_array_file_is_refused_on_every_path(copy, trained, item):
    checkpoint = os.path.join(str(copy), "model.ckpt_4")
    flip(largest_data_file(checkpoint, item))
    previous = os.path.join(str(copy), "model.ckpt_2")
    e = make(copy)
    reads = {
        "train": lambda: e.train(feed(), steps=1),
        "warm start": lambda: make(str(copy) + "_warm", warm_start_from=str(copy)).train(
            feed(), steps=1
        ),
    }
    if item == "variables":
        reads.update(
            {
                "evaluate": lambda: e.evaluate(feed()),
                "predict": lambda: list(e.predict(feed())),
                "get_variable_value": lambda: e.get_variable_value("logits/kernel"),
                "export": lambda: e.export_saved_model(str(copy) + "_export", RECEIVER),
            }
        )
    for what, read in reads.items():
        with pytest.raises(ckpt.DataLossError) as info:
            read()
        message = str(info.value)
        assert message.startswith(
            f"The checkpoint {checkpoint} is damaged: arrays in {checkpoint}/{item} do not "
            "match the checksums recorded when it was written:"
        ), what
        assert "CRC32C mismatch in bytes" in message and "logits/kernel" in message, what
        assert f"previous checkpoint, {previous}" in message, what
    exports = str(copy) + "_export"
    assert not os.path.exists(exports) or os.listdir(exports) == []  # nothing exported
    if item == "opt_state":  # what does not read the optimizer state gets intact values
        np.testing.assert_array_equal(e.get_variable_value("logits/kernel"), trained[1])


def test_the_step_in_the_metadata_must_match_the_directory(copy):
    path = os.path.join(str(copy), "model.ckpt_4", "meta", "metadata")
    meta = json.load(open(path))
    meta["global_step"] = 999
    json.dump(meta, open(path, "w"))
    for read in (lambda e: e.evaluate(feed()), lambda e: e.train(feed(), steps=1)):
        with pytest.raises(
            ckpt.DataLossError,
            match=r"meta/metadata is inconsistent: it says global_step 999, but the "
            r"checkpoint's directory is step 4\.",
        ):
            read(make(copy))


def test_checksums_cannot_be_dropped_from_the_metadata(copy):
    path = os.path.join(str(copy), "model.ckpt_4", "meta", "metadata")
    meta = json.load(open(path))
    del meta["checksums"]
    json.dump(meta, open(path, "w"))
    with pytest.raises(ckpt.DataLossError, match="its checksums section is missing or malformed"):
        make(copy).get_variable_value("logits/kernel")


def test_a_checkpoint_written_before_checksums_reads_with_a_warning(copy, trained, caplog):
    path = os.path.join(str(copy), "model.ckpt_4", "meta", "metadata")
    meta = json.load(open(path))
    del meta["checksums"], meta["format"]
    json.dump(meta, open(path, "w"))
    with caplog.at_level(logging.WARNING, logger="estimator"):
        value = make(copy).get_variable_value("logits/kernel")
    np.testing.assert_array_equal(value, trained[1])
    assert "was written before checkpoints carried checksums" in caplog.text


def test_restore_fallback_resumes_from_the_newest_intact_checkpoint(copy, tmp_path, caplog):
    checkpoint = os.path.join(str(copy), "model.ckpt_4")
    flip(largest_data_file(checkpoint, "variables"))
    with pytest.raises(ckpt.DataLossError):  # the default: an error, as TF
        make(copy).train(feed(), steps=2)
    with caplog.at_level(logging.WARNING, logger="estimator"):
        e = make(copy, restore_fallback=True)
        e.train(feed(), steps=2)
    assert "restore_fallback: skipping the damaged checkpoint " + checkpoint in caplog.text
    assert f"resuming from {os.path.join(str(copy), 'model.ckpt_2')}" in caplog.text
    assert "CRC32C mismatch" in caplog.text
    assert os.path.isdir(os.path.join(str(copy), "damaged.model.ckpt_4"))
    # 2 + 2 steps: a new, intact model.ckpt_4, equal to training on from the intact step 2.
    assert e.latest_checkpoint() == checkpoint
    reference = make(tmp_path / "reference")
    shutil.copytree(os.path.join(str(copy), "model.ckpt_2"), tmp_path / "reference/model.ckpt_2")
    reference.train(feed(), steps=2)
    np.testing.assert_array_equal(
        e.get_variable_value("logits/kernel"), reference.get_variable_value("logits/kernel")
    )


CHILD = textwrap.dedent(
    """
    import sys
    sys.path[:0] = sys.argv[3].split(":")
    from test_checkpoint_integrity import feed, make
    e = make(sys.argv[1])
    if sys.argv[2] == "evaluate":
        e.evaluate(feed())
    else:
        list(e.predict(feed()))
    """
)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("damage", "read"),
    [("no variables", "evaluate"), ("garbage metadata", "evaluate"), ("no variables", "predict")],
)
def test_evaluate_on_a_damaged_checkpoint_raises_instead_of_killing_the_process(
    copy, tmp_path, damage, read
):
    # evaluate() compiles its programs in background threads while it reads the
    # checkpoint; the error ended the process with those compiles running, which aborted
    # (SIGABRT) or segfaulted in XLA. The process must exit with the error instead.
    checkpoint = os.path.join(str(copy), "model.ckpt_4")
    if damage == "no variables":
        shutil.rmtree(os.path.join(checkpoint, "variables"))
    else:
        open(os.path.join(checkpoint, "meta", "metadata"), "wb").write(os.urandom(200))
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    here = os.path.dirname(os.path.abspath(__file__))
    path = ":".join([here, os.path.join(here, "..", "support")])  # this module and its helpers
    result = subprocess.run(
        [sys.executable, str(script), str(copy), read, path],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, (result.returncode, result.stderr[-2000:])
    assert f"DataLossError: The checkpoint {checkpoint} is corrupt: " in result.stderr
