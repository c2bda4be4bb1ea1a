"""Loading exports that were damaged or crafted:
every path stays inside the export, every file matches the manifest's sha256 before
anything is deserialized, and each failure is a ValueError naming the file."""

import json
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import estimator as est
from estimator.export.__main__ import main as cli_main

X = np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32)


def model_fn(features, labels, mode):
    logits = est.layers.dense(features["x"], 1, name="logits")[:, 0]
    if mode == est.ModeKeys.PREDICT:
        return est.EstimatorSpec(mode, predictions={"logits": logits})
    loss = optax.sigmoid_binary_cross_entropy(logits, labels).mean()
    return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.1))


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    estimator = est.Estimator(model_fn, str(tmp_path_factory.mktemp("model")))
    estimator.train(
        est.inputs.numpy_input_fn(
            {"x": X}, (X[:, 0] > 0).astype(np.float32), batch_size=8, shuffle=False
        ),
        steps=1,
    )
    receiver = est.export.build_raw_serving_input_receiver_fn(
        {"x": jax.ShapeDtypeStruct((None, 3), jnp.float32)}
    )
    return estimator.export_saved_model(str(tmp_path_factory.mktemp("export")), receiver).decode()


@pytest.fixture
def copy(original, tmp_path):
    """A fresh copy of the export to damage."""
    path = str(tmp_path / "export" / "1700000000")
    shutil.copytree(original, path)
    return path


def _edit_manifest(path, edit):
    with open(os.path.join(path, "manifest.json")) as f:
        manifest = json.load(f)
    edit(manifest)
    with open(os.path.join(path, "manifest.json"), "w") as f:
        json.dump(manifest, f)


FUNCTION = "functions/serving_default.jax"


def test_the_intact_copy_loads_and_every_file_is_listed(copy):
    model = est.export.load(copy)
    assert model.signatures["serving_default"](x=X)["logits"].shape == (8,)
    listed = set(model.manifest["files"])
    assert FUNCTION in listed and any(p.startswith("variables/") for p in listed)
    assert "manifest.json" not in listed
    assert all(len(digest) == 64 for digest in model.manifest["files"].values())


@pytest.mark.parametrize(
    "function",
    ["/etc/passwd", "../elsewhere.jax", "functions/../../x.jax", "./" + FUNCTION, "a\\b.jax"],
)
def test_manifest_paths_must_be_relative_and_normalized(copy, function):
    def edit(manifest):
        manifest["signatures"]["serving_default"]["function"] = function

    _edit_manifest(copy, edit)
    with pytest.raises(ValueError, match="normalized paths relative to the export directory"):
        est.export.load(copy, verify_files=False)


def test_a_symlink_out_of_the_export_is_refused(copy, tmp_path):
    outside = tmp_path / "outside.jax"
    shutil.copy(os.path.join(copy, FUNCTION), outside)
    os.remove(os.path.join(copy, FUNCTION))
    os.symlink(outside, os.path.join(copy, FUNCTION))  # same bytes, so the checksum matches
    with pytest.raises(ValueError, match="outside the export directory"):
        est.export.load(copy)
    with pytest.raises(ValueError, match="outside the export directory"):
        est.export.load(copy, verify_files=False)


def test_a_flipped_bit_is_caught_before_deserializing(copy):
    path = os.path.join(copy, FUNCTION)
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x10
    open(path, "wb").write(data)
    with pytest.raises(ValueError, match=r"serving_default\.jax is corrupt or was altered"):
        est.export.load(copy)


def test_a_truncated_function_without_verification_names_the_file(copy):
    path = os.path.join(copy, FUNCTION)
    data = open(path, "rb").read()
    open(path, "wb").write(data[:16])
    with pytest.raises(ValueError, match=r"serving_default\.jax is corrupt or was altered"):
        est.export.load(copy)
    # Skipping verification: the deserializer's own error, with the file named.
    with pytest.raises(ValueError, match=r"serving_default\.jax is not a valid jax\.export"):
        est.export.load(copy, verify_files=False)


def test_added_and_missing_files_are_refused(copy):
    with open(os.path.join(copy, "functions", "extra.jax"), "wb") as f:
        f.write(b"x")
    with pytest.raises(ValueError, match=r"extra\.jax is in the export directory but not in"):
        est.export.load(copy)
    os.remove(os.path.join(copy, "functions", "extra.jax"))
    os.remove(os.path.join(copy, FUNCTION))
    with pytest.raises(ValueError, match=f"lists {FUNCTION}, but the export has no such file"):
        est.export.load(copy)


def test_damaged_variables_name_the_directory(copy):
    for directory, _, names in os.walk(os.path.join(copy, "variables")):
        for name in names:
            open(os.path.join(directory, name), "wb").write(b"\xff\x00garbage")
    with pytest.raises(ValueError, match="is corrupt or was altered"):
        est.export.load(copy)
    with pytest.raises(ValueError, match=r"variables cannot be read"):
        est.export.load(copy, verify_files=False)


@pytest.mark.parametrize(
    "content, message",
    [
        (b"\xff\xfe\x00garbage", "is corrupt: not valid UTF-8 JSON"),
        (b'{"format": "jax_estimator.export", "version"', "is corrupt: not valid UTF-8 JSON"),
        (b"[1, 2]", "is not a jax-estimator export manifest"),
        (b'{"format": "jax_estimator.export", "version": 99}', "has version 99"),
    ],
)
def test_a_corrupt_manifest_is_named(copy, content, message):
    open(os.path.join(copy, "manifest.json"), "wb").write(content)
    with pytest.raises(ValueError, match=message) as info:
        est.export.load(copy)
    assert "manifest.json" in str(info.value)


def test_a_malformed_manifest_entry_is_named(copy):
    _edit_manifest(copy, lambda m: m["signatures"]["serving_default"].pop("inputs"))
    with pytest.raises(ValueError, match=r"signature 'serving_default' is malformed"):
        est.export.load(copy)


@pytest.mark.parametrize(
    ("output", "problem"),
    [
        ("logits", "the function returns it as float32, not integer ids"),
        ("ghost", "the function does not return it"),
    ],
)
def test_an_output_vocabulary_that_does_not_fit_the_function_is_named_at_load(
    copy, output, problem
):
    def edit(manifest):
        outputs = manifest["signatures"]["serving_default"]["outputs"]
        outputs.setdefault(output, {"dtype": "string", "shape": [None]})["vocabulary"] = ["a"]

    _edit_manifest(copy, edit)
    with pytest.raises(
        ValueError,
        match=rf"Signature 'serving_default': the manifest maps output '{output}' through a "
        rf"vocabulary, but {problem}\. The export's manifest does not fit its functions",
    ):
        est.export.load(copy, verify_files=False)


def test_a_manifest_without_checksums_needs_verify_files_false(copy):
    def edit(manifest):
        del manifest["files"]
        manifest["version"] = 1  # as exports written before checksums

    _edit_manifest(copy, edit)
    with pytest.raises(ValueError, match="lists no file checksums.*verify_files=False"):
        est.export.load(copy)
    assert est.export.load(copy, verify_files=False).global_step == 1


def test_cli_run_reports_bad_input_without_a_traceback(copy, tmp_path, capsys):
    cases = {
        "not json": "is not valid JSON: Expecting value at line 1 column 1 (char 0)",
        json.dumps({"instances": [1, 2]}): "'instances' must be a list of objects",
        json.dumps({"inputs": {"x": "abc"}}): "Input 'x' must be float32",
        json.dumps({"inputs": {"y": [1]}}): "Wrong inputs: missing ['x'], unexpected ['y']",
    }
    for i, (content, message) in enumerate(cases.items()):
        request = tmp_path / f"request{i}.json"
        request.write_text(content)
        assert cli_main(["run", copy, "--inputs", str(request)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "Traceback" not in err
        assert message in err, err
    assert cli_main(["run", copy, "--inputs", str(tmp_path / "absent.json")]) == 2
    assert "No such file or directory" in capsys.readouterr().err
    open(os.path.join(copy, FUNCTION), "ab").write(b"tail")
    assert cli_main(["show", copy]) == 2
    assert "serving_default.jax is corrupt or was altered" in capsys.readouterr().err
