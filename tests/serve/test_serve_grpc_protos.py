"""The gRPC server's protos, tensor conversion and model config: TF Serving's schema in a private
pool, ``TensorProto`` <-> NumPy by ``tf.make_ndarray``'s rules, and ``--model_config_file``, all
without TensorFlow."""

import subprocess
import sys

import numpy as np
import pytest
from google.protobuf import descriptor_pool

from estimator.serve import _protos
from estimator.serve._config import read_model_config
from estimator.serve._protos import messages
from estimator.serve._tensors import TensorError, from_numpy, to_numpy

DT_FLOAT, DT_INT32, DT_STRING, DT_INT64, DT_HALF = 1, 3, 7, 9, 19  # types.proto's numbers


def _tensor(dtype: int, shape, **fields):
    tensor = messages.TensorProto(dtype=dtype)
    for size in shape:
        tensor.tensor_shape.dim.add().size = size
    for name, values in fields.items():
        if name == "tensor_content":
            tensor.tensor_content = values
        else:
            getattr(tensor, name).extend(values)
    return tensor


def test_messages_have_tf_servings_names_in_a_private_pool():
    assert messages.PredictRequest.DESCRIPTOR.full_name == "tensorflow.serving.PredictRequest"
    assert messages.TensorProto.DESCRIPTOR.file.name == "tensorflow/core/framework/tensor.proto"
    assert _protos.pool() is not descriptor_pool.Default()
    # Nothing is added to protobuf's default pool: checked in a fresh process, since this one
    # may have imported TF Serving's own stubs (a docs snippet does), which register there.
    code = (
        "from google.protobuf import descriptor_pool\n"
        "from estimator.serve._protos import messages, pool\n"
        "assert messages.PredictRequest.DESCRIPTOR.file.pool is pool()\n"
        "try:\n"
        "    descriptor_pool.Default().FindMessageTypeByName('tensorflow.serving.PredictRequest')\n"
        "except KeyError:\n"
        "    print('not in the default pool')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "not in the default pool", result.stderr[-2000:]
    service = _protos.pool().FindServiceByName(_protos.PREDICTION_SERVICE)
    assert [m.name for m in service.methods] == [
        "Classify", "Regress", "Predict", "MultiInference", "GetModelMetadata",
    ]  # fmt: skip


def test_typed_values_fill_the_shape_as_make_ndarray_does():
    # Fewer values than the shape holds: the last one repeats ([1, 2] -> [1, 2, 2, 2]).
    got = to_numpy(_tensor(DT_FLOAT, [2, 2], float_val=[1.0, 2.0]))
    np.testing.assert_array_equal(got, [[1.0, 2.0], [2.0, 2.0]])
    assert got.dtype == np.float32
    # One value fills every element; none gives zeros.
    np.testing.assert_array_equal(to_numpy(_tensor(DT_INT64, [3], int64_val=[7])), [7, 7, 7])
    np.testing.assert_array_equal(to_numpy(_tensor(DT_INT32, [2])), [0, 0])
    strings = to_numpy(_tensor(DT_STRING, [2, 1], string_val=[b"a", b"b"]))
    assert strings.dtype == object and strings.tolist() == [[b"a"], [b"b"]]
    # half_val holds float16 bit patterns: 0x3C00 is 1.0.
    np.testing.assert_array_equal(to_numpy(_tensor(DT_HALF, [1], half_val=[0x3C00])), [1.0])


def test_tensor_content_round_trips():
    array = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
    tensor = from_numpy(array)
    assert tensor.dtype == DT_FLOAT and tensor.tensor_content == array.tobytes()
    assert [d.size for d in tensor.tensor_shape.dim] == [2, 3]
    np.testing.assert_array_equal(to_numpy(tensor), array)
    text = from_numpy(np.array([[b"x"], [b"yz"]], dtype=object))
    assert text.dtype == DT_STRING and list(text.string_val) == [b"x", b"yz"]
    np.testing.assert_array_equal(to_numpy(from_numpy(np.array([True, False]))), [True, False])


@pytest.mark.parametrize(
    "tensor, message",
    [
        (_tensor(DT_FLOAT, [2], float_val=[1.0, 2.0, 3.0]), r"float_val has 3 values; shape \[2\]"),
        (_tensor(DT_FLOAT, [2], tensor_content=b"\0" * 7), "tensor_content has 7 bytes"),
        (_tensor(DT_FLOAT, [-1]), "negative dimension"),
        (_tensor(20, [1]), "dtype DT_RESOURCE is not supported"),
        (_tensor(DT_STRING, [1], tensor_content=b"a"), "carry their values in string_val"),
    ],
)
def test_bad_tensors_are_refused_with_the_reason(tensor, message):
    with pytest.raises(TensorError, match=message):
        to_numpy(tensor)


def test_model_config_file_lists_models_with_labels(tmp_path):
    path = tmp_path / "models.config"
    path.write_text(
        "model_config_list {\n"
        '  config { name: "a" base_path: "/m/a" model_platform: "tensorflow" }\n'
        '  config { name: "b" base_path: "/m/b" version_labels { key: "stable" value: 7 } }\n'
        "}\n"
    )
    assert read_model_config(str(path)) == [("a", "/m/a", {}), ("b", "/m/b", {"stable": 7})]


@pytest.mark.parametrize(
    "text, message",
    [
        ("model_config_list { config { name: 'a' base_path: '/a' }", "is not a text-format"),
        ("model_config_list { config { nme: 'a' } }", "is not a text-format"),
        ("", "expected a model_config_list"),
        ("model_config_list { }", "lists no model"),
        ("model_config_list { config { name: 'a' } }", "needs a name and a base_path"),
        (
            "model_config_list { config { name: 'a' base_path: '/a' } "
            "config { name: 'a' base_path: '/b' } }",
            "Illegal to list model a multiple times in config list",
        ),
    ],
)
def test_bad_model_config_files_are_refused_with_the_reason(tmp_path, text, message):
    path = tmp_path / "models.config"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        read_model_config(str(path))


def test_command_line_refuses_two_model_sources_and_none(tmp_path, capsys):
    from estimator.serve.__main__ import main

    config = tmp_path / "models.config"
    config.write_text("model_config_list { config { name: 'a' base_path: '/a' } }")
    with pytest.raises(SystemExit):
        main(["--model_config_file", str(config), "--model_base_path", "/a"])
    assert "either --model_config_file or --model_base_path, not both" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--port", "0"])
    assert "give --model_base_path (with --model_name) or --model_config_file" in (
        capsys.readouterr().err
    )
    with pytest.raises(SystemExit, match=r"No servable version of model 'a' under /a"):
        main(["--model_config_file", str(config), "--file_system_poll_wait_seconds", "0"])
