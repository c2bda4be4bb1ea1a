"""TF SavedModel export: ``export_saved_model(...,
format="tf_saved_model")`` and ``python -m estimator.export to_tf_saved_model``.

The models are trained and exported here (no TensorFlow in the pytest process); one
subprocess with TensorFlow writes the SavedModels (``tests/jobs/tf_saved_model_job.py``),
another with TensorFlow and *not* this package serves them on serialized ``tf.Example``
protos of adult.test rows (``tests/jobs/tf_serving_check.py``), and the answers are compared
with ``estimator.export.load`` on the same rows. The signature layout is compared with
``saved_model_cli show --all`` of TF Estimator 2.15's own exports.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest
from tf_saved_model_job import (
    census_module,
    every_op_features,
    make,
    raw_model_fn,
    raw_receiver,
    receiver,
)

import estimator as est
from estimator import preprocessing as pp
from estimator.export.__main__ import main as cli

# Every test reads the SavedModels a TensorFlow subprocess writes (the module fixture).
pytestmark = pytest.mark.slow
HERE = os.path.dirname(os.path.abspath(__file__))
# ../shared beside the checkout, as CI lays it out ($ADULT_DATA_DIR elsewhere).
DATA = os.environ.get("ADULT_DATA_DIR") or os.path.join(
    HERE, "..", "..", "..", "shared", "data", "adult"
)
N_ROWS = 64
RAW_INPUTS = {"a": [0.1, 0.5, 0.9], "b": [0.3, 0.3, 0.8]}  # the raw-receiver model's inputs

# saved_model_cli show --all of TF Estimator 2.15.1's exports (tests/jobs/tf215_census_export.py;
# output tensor names left out, they name TF's graph nodes). Per signature: method name,
# {input key: (dtype, shape, tensor name)}, {output key: (dtype, shape)}.
_EXAMPLES = ("DT_STRING", "(-1)", "input_example_tensor:0")
_CLASSIFY = (
    "tensorflow/serving/classify",
    {"inputs": _EXAMPLES},
    {"classes": ("DT_STRING", "(-1, 2)"), "scores": ("DT_FLOAT", "(-1, 2)")},
)
_REGRESS = (
    "tensorflow/serving/regress",
    {"inputs": _EXAMPLES},
    {"outputs": ("DT_FLOAT", "(-1, 1)")},
)
TF215_CLASSIFIER = {
    "classification": _CLASSIFY,
    "predict": (
        "tensorflow/serving/predict",
        {"examples": _EXAMPLES},
        {
            "all_class_ids": ("DT_INT32", "(-1, 2)"),
            "all_classes": ("DT_STRING", "(-1, 2)"),
            "class_ids": ("DT_INT64", "(-1, 1)"),
            "classes": ("DT_STRING", "(-1, 1)"),
            "logistic": ("DT_FLOAT", "(-1, 1)"),
            "logits": ("DT_FLOAT", "(-1, 1)"),
            "probabilities": ("DT_FLOAT", "(-1, 2)"),
        },
    ),
    "regression": _REGRESS,
    "serving_default": _CLASSIFY,
}
TF215_REGRESSOR = {
    "predict": (
        "tensorflow/serving/predict",
        {"examples": _EXAMPLES},
        {"predictions": ("DT_FLOAT", "(-1, 1)")},
    ),
    "regression": _REGRESS,
    "serving_default": _REGRESS,
}


def layout(show: str) -> tuple[list, dict]:
    """``saved_model_cli show --all`` text -> (tag sets, {signature: (method, inputs,
    outputs)}) as above."""
    tags = re.findall(r"MetaGraphDef with tag-set: '(.*)' contains", show)
    signatures: dict = {}
    for block in re.split(r"\nsignature_def\['", show)[1:]:
        name = block[: block.index("'")]
        method = re.search(r"Method name is: (\S+)", block).group(1)
        tensors = re.findall(
            r"(inputs|outputs)\['(.+?)'\] tensor_info:\s+dtype: (\S+)\s+shape: (.+?)\s+"
            r"name: (\S+)",
            block,
        )
        inputs = {k: (d, s, n) for kind, k, d, s, n in tensors if kind == "inputs"}
        outputs = {k: (d, s) for kind, k, d, s, _ in tensors if kind == "outputs"}
        signatures[name] = (method, inputs, outputs)
    return tags, signatures


def _value(v):
    if isinstance(v, str):
        return v
    if isinstance(v, np.integer):
        return int(v)
    return float(v)


def _rows(features: dict, n: int) -> list[dict]:
    keys = sorted(features)
    return [{k: _value(features[k][i]) for k in keys} for i in range(n)]


@dataclass
class Exports:
    root: str
    rows: dict  # label -> rows (dicts; None = feature absent)
    exports: dict  # label -> our export dir
    saved_models: dict  # label -> SavedModel dir
    served: dict  # the checker's JSON


def _check_subprocess(args, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)
    assert result.returncode == 0, result.stderr[-5000:]
    return result.stdout


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> Exports:
    root = str(tmp_path_factory.mktemp("tf_saved_model"))
    census = census_module()
    train_x, train_y = census.load(os.path.join(DATA, "adult.data"))
    test_x, _ = census.load(os.path.join(DATA, "adult.test"))
    rows, exported = {}, {}
    for kind in ("census", "every_op"):
        model = make(kind, root)
        if kind == "census":
            features, labels = train_x, train_y
            keys = ["age", "education", "marital_status", "relationship", "workclass"]
            test = {k: test_x[k] for k in keys + ["occupation"]}
        else:
            features, labels = every_op_features(train_x), train_x["age"] / 10.0
            test = every_op_features(test_x)
        model.train(
            est.inputs.numpy_input_fn(features, labels, batch_size=256, shuffle=True),
            steps=20,
        )
        exported[kind] = model.export_saved_model(
            os.path.join(root, f"{kind}_export"), receiver(kind, root)
        ).decode()
        rows[kind] = _rows(test, N_ROWS)
    # Absent features (tf.Example without them; None for the loader): FixedLenFeature
    # default (capital_gain), VarLenFeatures with no values (no ids, no crosses with them).
    absent = [
        ["capital_gain"],
        ["race", "hours"],
        ["workclass"],
        ["gender", "gender_weight"],
        ["native_country"],
        ["education_years", "education_level"],
    ]
    for row, keys in zip(rows["every_op"], absent, strict=False):
        row.update(dict.fromkeys(keys))
    rows["census"][0]["occupation"] = None
    rows["census"][1]["education"] = "Not-a-level"  # out of vocabulary: no id
    rows["every_op"][6]["race"] = "Other"  # an OOV bucket
    rows["every_op"][7]["native_country"] = "Atlantis"  # default_value 0
    rows["every_op"][8]["education_years"] = 16  # vocabulary OOV bucket
    rows["every_op"][8]["education_level"] = 16  # identity: out of range, default 11
    raw = est.Estimator(raw_model_fn, model_dir=os.path.join(root, "raw"))
    x = {"a": np.linspace(0, 1, 32, dtype=np.float32), "b": np.linspace(1, 0, 32, dtype=np.float32)}
    raw.train(est.inputs.numpy_input_fn(x, (x["a"] > 0.6).astype(np.int32), shuffle=True), steps=4)
    exported["raw"] = raw.export_saved_model(os.path.join(root, "raw_export"), raw_receiver())
    exported["raw"] = exported["raw"].decode()
    saved = {
        "census": os.path.join(root, "census_saved_model", "1"),
        "raw": os.path.join(root, "raw_saved_model"),
    }
    job = os.path.join(HERE, "..", "jobs", "tf_saved_model_job.py")
    args = {
        "root": root,
        "census_export": exported["census"],
        "census_saved_model": saved["census"],
        "every_op_base": os.path.join(root, "every_op_saved_model"),
        "raw_export": exported["raw"],
        "raw_saved_model": saved["raw"],
    }
    out = _check_subprocess([sys.executable, job, json.dumps(args)])
    saved["every_op"] = json.loads(out.strip().splitlines()[-1])["every_op_saved_model"]
    tensors = {"raw": RAW_INPUTS}
    request = {"models": saved, "rows": rows, "tensors": tensors, "show": list(saved)}
    checker = os.path.join(HERE, "..", "jobs", "tf_serving_check.py")
    served = json.loads(_check_subprocess([sys.executable, checker], input=json.dumps(request)))
    return Exports(root, rows, exported, saved, served)


def test_signature_layout_is_tf_estimator_215s(exports):
    tags, classifier = layout(exports.served["show"]["census"])
    assert tags == ["serve"]
    assert classifier == TF215_CLASSIFIER
    tags, regressor = layout(exports.served["show"]["every_op"])
    assert tags == ["serve"]
    assert regressor == TF215_REGRESSOR


def test_saved_model_directory(exports):
    census = exports.saved_models["census"]
    assert sorted(os.listdir(census)) == ["saved_model.pb", "variables"]
    every_op = exports.saved_models["every_op"]
    # <base>/<unix seconds>, as export_saved_model names exports; the vocabulary file is
    # an asset; no temporary directory is left behind.
    assert re.fullmatch(r"\d+", os.path.basename(every_op))
    assert os.listdir(os.path.dirname(every_op)) == [os.path.basename(every_op)]
    assert os.listdir(os.path.join(every_op, "assets")) == ["countries.txt"]


def test_a_raw_receiver_keeps_its_inputs(exports):
    """TF drops a classification signature whose receiver is not one string; the SavedModel
    keeps it as a predict signature over the raw inputs (so serving_default exists)."""
    _, signatures = layout(exports.served["show"]["raw"])
    floats = {"a": ("DT_FLOAT", "(-1)", "a:0"), "b": ("DT_FLOAT", "(-1)", "b:0")}
    assert signatures == {
        "predict": (
            "tensorflow/serving/predict",
            floats,
            {"class_ids": ("DT_INT64", "(-1)"), "probabilities": ("DT_FLOAT", "(-1, 3)")},
        ),
        "serving_default": (
            "tensorflow/serving/predict",
            floats,
            {"scores": ("DT_FLOAT", "(-1, 3)")},
        ),
    }


@pytest.mark.parametrize("label", ["census", "every_op", "raw"])
def test_tensorflow_answers_what_the_loader_answers(exports, label):
    """Every signature of the SavedModel, fed serialized tf.Examples (the raw model: its
    arrays) in a process without this package, gives the loader's outputs for the same
    rows (<= 1e-5; strings and ids equal)."""
    loaded = est.export.load(exports.exports[label])
    if label == "raw":
        columns = RAW_INPUTS
    else:
        rows = exports.rows[label]
        columns = {k: [row.get(k) for row in rows] for k in rows[0]}
    served = exports.served["outputs"][label]
    assert sorted(served) == sorted(loaded.signatures)
    for name, signature in loaded.signatures.items():
        want = signature(**{k: v for k, v in columns.items() if k in signature.inputs})
        got = served[name]
        assert sorted(got) == sorted(want), name
        for key, value in want.items():
            if value.dtype == object:
                assert got[key] == [[s.decode() for s in row] for row in value], (name, key)
            elif value.dtype.kind in "iu":
                np.testing.assert_array_equal(got[key], value, err_msg=f"{name}/{key}")
            else:
                np.testing.assert_allclose(got[key], value, rtol=0, atol=1e-5, err_msg=name)


def test_absent_and_out_of_vocabulary_values_took_effect(exports):
    """The edited rows really differ from their unedited neighbours (so the comparison
    above covers defaults, OOV buckets and missing features)."""
    served = exports.served["outputs"]["every_op"]["predict"]["predictions"]
    assert len({round(p[0], 6) for p in served[:9]}) > 6


# ----- errors, before TensorFlow is imported ---------------------------------------------


@pp.register_op
@dataclass(frozen=True)
class Lowercase(pp.Op):
    """A custom host op: lower-cased vocabulary lookup (no TF form)."""

    key: str

    def _compute(self, features, cache):
        raise NotImplementedError

    def input_spec(self):
        return {self.key: pp.VarLenFeature(str)}


def _copy_with_op(exports, tmp_path, op: dict) -> str:
    source = exports.exports["census"]
    target = str(tmp_path / "altered")
    shutil.copytree(source, target)
    path = os.path.join(target, "manifest.json")
    with open(path) as f:
        manifest = json.load(f)
    manifest["input_transform"]["outputs"][0]["op"] = op
    with open(path, "w") as f:
        json.dump(manifest, f)
    return target


def test_a_host_op_without_tf_form_is_refused_at_export_time(exports, tmp_path):
    custom = {"class_name": "Lowercase", "config": {"key": "education"}}
    source = _copy_with_op(exports, tmp_path, custom)
    with pytest.raises(ValueError, match=r"'education' uses Lowercase\('education'\), which has"):
        est.export.to_tf_saved_model(source, tmp_path / "out", verify_files=False)
    assert not os.path.exists(tmp_path / "out")


def test_other_modes_and_existing_output_are_refused(exports, tmp_path):
    model = make("census", exports.root)
    with pytest.raises(ValueError, match=r"PREDICT mode\) signatures only.*\['eval'\]"):
        model.experimental_export_all_saved_models(
            tmp_path,
            {est.ModeKeys.EVAL: lambda: None, est.ModeKeys.PREDICT: receiver("census", "")},
            format="tf_saved_model",
        )
    with pytest.raises(ValueError, match=r"format must be one of \['jax', 'tf_saved_model'\]"):
        model.export_saved_model(tmp_path, receiver("census", ""), format="tf")
    with pytest.raises(ValueError, match="already exists; a SavedModel is written to a new"):
        est.export.to_tf_saved_model(exports.exports["census"], tmp_path)


def test_without_tensorflow_the_error_names_the_extra(exports, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tensorflow", None)
    with pytest.raises(ImportError, match=r"pip install 'jax-estimator\[tf\]'"):
        est.export.to_tf_saved_model(exports.exports["census"], tmp_path / "out")
    assert cli(["to_tf_saved_model", exports.exports["census"], str(tmp_path / "out")]) == 2
    assert "needs TensorFlow >= 2.21" in capsys.readouterr().err
