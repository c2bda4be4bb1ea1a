"""``estimator.io.paths``: a URL where a local path goes is refused before anything is
created (``Estimator(model_fn, model_dir="gs://b/m")`` used to make a local ``gs:/b/m``)."""

import json
import os

import pytest
from linear_model import EVAL, TRAIN, X, make, model_fn

import estimator as est
from estimator.io.paths import local_path, url_scheme

URLS = ["gs://bucket/models/ctr", "s3://bucket/m", "hdfs://namenode/m", "file:///tmp/m"]
RECEIVER = est.export.build_raw_serving_input_receiver_fn({"x": X})


@pytest.fixture
def empty_cwd(tmp_path, monkeypatch):
    """A working directory that must stay empty (a URL made relative lands here)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    yield cwd
    assert list(cwd.iterdir()) == [], "a URL became a local path"


def test_url_schemes_and_local_paths():
    assert [url_scheme(u) for u in URLS] == ["gs", "s3", "hdfs", "file"]
    for local in ("runs/m", "/tmp/m", b"/tmp/m", r"C:\models\m", "gs:/bucket", "model:v1"):
        assert url_scheme(local) is None
        assert local_path(local, "model_dir") == os.fsdecode(local)


@pytest.mark.parametrize("url", URLS)
def test_a_url_model_dir_is_refused_at_construction(empty_cwd, url):
    scheme = url.split(":")[0]
    message = rf"model_dir '{url}' is a {scheme}:// URL, but this jax-estimator reads and writes "
    with pytest.raises(ValueError, match=message):
        est.Estimator(model_fn, model_dir=url)
    with pytest.raises(ValueError, match=message):
        est.RunConfig(model_dir=url)
    with pytest.raises(ValueError, match="mount the bucket as a file system"):
        est.Estimator(model_fn, config=est.RunConfig().replace(model_dir=url))


def test_a_url_model_dir_in_tf_config_is_refused(empty_cwd, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"model_dir": "gs://bucket/m"}))
    with pytest.raises(ValueError, match=r"TF_CONFIG\[\"model_dir\"\] 'gs://bucket/m' is a gs://"):
        est.RunConfig()


def test_a_url_warm_start_is_refused_at_construction(empty_cwd, tmp_path):
    with pytest.raises(ValueError, match="ckpt_to_initialize_from 's3://bucket/m' is a s3:// URL"):
        est.WarmStartSettings("s3://bucket/m")
    with pytest.raises(ValueError, match="ckpt_to_initialize_from 'gs://b/m' is a gs:// URL"):
        est.Estimator(model_fn, str(tmp_path / "m"), warm_start_from=b"gs://b/m")
    assert not (tmp_path / "m").exists()


def test_url_export_and_checkpoint_paths_are_refused_before_writing(empty_cwd, tmp_path):
    e = make(tmp_path / "m")
    e.train(TRAIN, steps=1)
    with pytest.raises(ValueError, match="export_dir_base 'gs://bucket/export' is a gs:// URL"):
        e.export_saved_model("gs://bucket/export", RECEIVER)
    with pytest.raises(ValueError, match="export_dir_base 's3://b/e' is a s3:// URL"):
        e.experimental_export_all_saved_models(b"s3://b/e", {est.ModeKeys.PREDICT: RECEIVER})
    with pytest.raises(ValueError, match="checkpoint_path 'gs://b/m/model.ckpt_1' is a gs://"):
        e.evaluate(EVAL, checkpoint_path="gs://b/m/model.ckpt_1")
    with pytest.raises(ValueError, match="checkpoint_path 'gs://b/m' is a gs:// URL"):
        next(e.predict(EVAL, checkpoint_path="gs://b/m"))
    with pytest.raises(ValueError, match="The export path 'gs://b/export/1' is a gs:// URL"):
        est.export.load("gs://b/export/1")
    assert not [n for n in os.listdir(tmp_path / "m") if n.startswith(("gs", "s3"))]
