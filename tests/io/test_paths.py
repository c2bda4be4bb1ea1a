"""Storage URLs where paths enter (``model_dir``, checkpoints, warm start, exports, event
files, eval results, the train lock, the server's base path): served through
``estimator.io.fs``, or refused at construction, naming the package to install, before
anything is created; never a local directory named after the URL's scheme.

``memory://`` (fsspec's in-process store) is the object store here: it has no rename and no
directories, as S3 and GCS, and orbax cannot write it, so it takes the staged path that
``s3://`` takes. tests/io/test_storage_servers.py runs real S3 and GCS servers.
"""

import json
import os
import socket
import sys
import time
import uuid

import fsspec
import numpy as np
import pytest
from linear_model import EVAL, TRAIN, X, make, model_fn, reference_eval_loss

import estimator as est
from estimator import checkpoint as ckpt
from estimator.checkpoint import lock as model_dir_lock
from estimator.events import read_eval_metrics
from estimator.io import fs, locks, staging
from estimator.serve._models import ModelWatcher

RECEIVER = est.export.build_raw_serving_input_receiver_fn({"x": X})


@pytest.fixture
def empty_cwd(tmp_path, monkeypatch):
    """A working directory that must stay empty (a URL made relative lands here)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    yield cwd
    assert list(cwd.iterdir()) == [], "a URL became a local path"


@pytest.fixture
def bucket():
    url = f"memory://bucket-{uuid.uuid4().hex[:8]}"
    yield url
    fs.rmtree(url)


@pytest.fixture
def without_gcsfs(monkeypatch):
    """gcsfs as if it were not installed."""
    for name in [n for n in sys.modules if n.split(".")[0] == "gcsfs"] or ["gcsfs"]:
        monkeypatch.setitem(sys.modules, name, None)
    for scheme in ("gs", "gcs"):
        monkeypatch.delitem(sys.modules["fsspec.registry"]._registry, scheme, raising=False)


def test_url_schemes_and_local_paths():
    urls = ["gs://bucket/models/ctr", "s3://bucket/m", "hdfs://namenode/m", "memory://m"]
    assert [fs.protocol(u) for u in urls] == ["gs", "s3", "hdfs", "memory"]
    for local in ("runs/m", "/tmp/m", b"/tmp/m", r"C:\models\m", "gs:/bucket", "model:v1"):
        assert fs.protocol(local) is None
        assert fs.local_path(local, "output_dir") == os.fsdecode(local)
    # file:// is a local path for every function of the seam (one answer everywhere).
    assert fs.protocol("file:///tmp/m") is None
    assert fs.local_path("file:///tmp/m", "output_dir") == "/tmp/m"
    assert fs.check("file:///tmp/m", "model_dir") == "/tmp/m"


def test_an_unavailable_protocol_is_refused_at_construction(empty_cwd, without_gcsfs, tmp_path):
    message = (
        r"model_dir 'gs://bucket/m' is a gs:// URL; reading and writing gs:// needs the gcsfs "
        r"package, which is not installed. Install it with pip install 'jax-estimator\[gcs\]'"
    )
    with pytest.raises(fs.ProtocolUnavailableError, match=message):
        est.Estimator(model_fn, model_dir="gs://bucket/m")
    with pytest.raises(ValueError, match=message):
        est.RunConfig(model_dir="gs://bucket/m")
    with pytest.raises(ValueError, match="pip install gcsfs"):
        est.Estimator(model_fn, config=est.RunConfig().replace(model_dir="gs://bucket/m"))
    with pytest.raises(ValueError, match="ckpt_to_initialize_from 'gs://b/m' is a gs:// URL"):
        est.Estimator(model_fn, str(tmp_path / "m"), warm_start_from=b"gs://b/m")
    assert not (tmp_path / "m").exists()
    with pytest.raises(ValueError, match="The export path 'gs://b/e/1' is a gs:// URL; "):
        est.export.load("gs://b/e/1")


def test_an_unknown_protocol_in_tf_config_is_refused(empty_cwd, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"model_dir": "nosuch://bucket/m"}))
    with pytest.raises(ValueError, match=r"TF_CONFIG\[\"model_dir\"\] 'nosuch://bucket/m' is a "):
        est.RunConfig()


def test_unavailable_export_and_checkpoint_urls_are_refused_before_writing(empty_cwd, tmp_path):
    e = make(tmp_path / "m")
    e.train(TRAIN, steps=1)
    with pytest.raises(ValueError, match="export_dir_base 'nosuch://b/e' is a nosuch:// URL"):
        e.export_saved_model("nosuch://b/e", RECEIVER)
    with pytest.raises(ValueError, match="export_dir_base 'https://h/e' is a https:// URL, whi"):
        e.export_saved_model("https://h/e", RECEIVER)
    with pytest.raises(ValueError, match="checkpoint_path 'nosuch://b/m/model.ckpt_1' is a "):
        e.evaluate(EVAL, checkpoint_path="nosuch://b/m/model.ckpt_1")
    with pytest.raises(ValueError, match="ProfilerHook output_dir 'gs://b/p' is a gs:// URL, but"):
        est.ProfilerHook(save_steps=1, output_dir="gs://b/p")
    assert sorted(os.listdir(tmp_path / "m"))[0] != "gs:"


def test_the_whole_lifecycle_in_an_object_store(empty_cwd, bucket, tmp_path):
    model_dir = fs.join(bucket, "model")
    e = make(model_dir, save_checkpoints_steps=5, keep_checkpoint_max=2)
    e.train(TRAIN, steps=12)
    # Steps 0, 5, 10, 12 saved; the newest two kept in the bucket (retention applies there).
    assert ckpt.complete_steps(model_dir) == [10, 12]
    assert e.latest_checkpoint() == f"{model_dir}/model.ckpt_12"
    names = fs.listdir(model_dir)
    assert any(n.startswith("events.out.tfevents") for n in names)
    assert model_dir_lock.LOCK_FILE not in names  # the lease is released after train()
    assert staging.COMMIT_MARKER in fs.listdir(f"{model_dir}/model.ckpt_12")
    results = e.evaluate(EVAL)
    # The linear model's NumPy reference after 12 SGD steps.
    np.testing.assert_allclose(results["loss"], reference_eval_loss(12), rtol=1e-5)
    older = e.evaluate(EVAL, checkpoint_path=f"{model_dir}/model.ckpt_10", name="older")
    np.testing.assert_allclose(older["loss"], reference_eval_loss(10), rtol=1e-5)
    assert read_eval_metrics(fs.join(model_dir, "eval"))[12]["loss"] == pytest.approx(
        results["loss"]
    )
    assert e.get_variable_names() == ["b", "global_step", "w"]
    # A second train() resumes from the bucket: max_steps counted across calls.
    make(model_dir, save_checkpoints_steps=5, keep_checkpoint_max=2).train(TRAIN, max_steps=15)
    assert ckpt.complete_steps(model_dir) == [12, 15]
    predictions = np.array([p["pred"] for p in e.predict(EVAL)])

    export_dir = e.export_saved_model(fs.join(bucket, "export"), RECEIVER).decode()
    assert export_dir.startswith(f"{bucket}/export/") and fs.basename(export_dir).isdigit()
    loaded = est.export.load(export_dir)
    assert loaded.path == export_dir and loaded.global_step == 15
    served = loaded.signatures["serving_default"](x=X)["pred"]
    np.testing.assert_allclose(served, predictions, rtol=1e-6)

    after = e.evaluate(EVAL, name="after")["loss"]
    # The same two train() calls on a local disk give the same model (the second call's
    # input starts again at the first batch, so this is not reference_eval_loss(15)).
    local = make(tmp_path / "local")
    local.train(TRAIN, steps=12)
    local.train(TRAIN, max_steps=15)
    assert after == local.evaluate(EVAL)["loss"]
    for i, source in enumerate((model_dir, export_dir)):  # warm start from the bucket
        warm = est.Estimator(model_fn, fs.join(bucket, f"warm{i}"), warm_start_from=source)
        np.testing.assert_allclose(warm.evaluate(EVAL)["loss"], after, rtol=1e-6)


def test_slow_uploads_publish_every_checkpoint_whole(empty_cwd, bucket, monkeypatch):
    # Uploads slower than the saves: the publisher runs several checkpoints behind, while
    # orbax's retention (keep_checkpoint_max=1) would delete the staged copies it has yet
    # to upload (seen on a real S3 server: a checkpoint published without its meta/).
    upload_tree = fs.upload_tree
    published = []

    def slow_upload_tree(local, url, **kwargs):
        time.sleep(0.3)
        upload_tree(local, url, **kwargs)
        published.append(fs.basename(url))

    # Patched where fs.publish_tree finds it (the module that defines both).
    monkeypatch.setattr("estimator.io.fs._trees.upload_tree", slow_upload_tree)
    model_dir = fs.join(bucket, "model")
    e = make(model_dir, save_checkpoints_steps=1, keep_checkpoint_max=1)
    e.train(TRAIN, steps=6)  # raises the error of a failed publication, if any
    assert published == [f"model.ckpt_{step}" for step in range(7)]
    assert ckpt.complete_steps(model_dir) == [6]
    ckpt.verify_checkpoint(f"{model_dir}/model.ckpt_6")
    np.testing.assert_allclose(e.evaluate(EVAL)["loss"], reference_eval_loss(6), rtol=1e-5)


def test_checkpoint_paths_and_damage_in_an_object_store(empty_cwd, bucket):
    model_dir = fs.join(bucket, "m")
    e = make(model_dir, save_checkpoints_steps=2)
    e.train(TRAIN, steps=4)
    # An interrupted publication (no commit marker) is not a checkpoint.
    fs.write_bytes(f"{model_dir}/model.ckpt_9/meta/metadata", b"{}")
    assert e.latest_checkpoint() == f"{model_dir}/model.ckpt_4"
    assert ckpt.previous_checkpoint(f"{model_dir}/model.ckpt_4") == f"{model_dir}/model.ckpt_2"
    with pytest.raises(ValueError, match=rf"Could not find trained model at {bucket}/none"):
        e.evaluate(EVAL, checkpoint_path=fs.join(bucket, "none"))
    # Damage is found in the bucket's copy and moved aside there (copy, then delete).
    for data in fs.glob(f"{model_dir}/model.ckpt_4/variables/**"):
        if "/d/" in data:  # TensorStore's data files
            fs.write_bytes(data, b"garbage")
    with pytest.raises(ckpt.DataLossError, match=rf"The checkpoint {model_dir}/model.ckpt_4 is "):
        ckpt.read_checkpoint(f"{model_dir}/model.ckpt_4")
    moved = ckpt.quarantine(f"{model_dir}/model.ckpt_4")
    assert moved == f"{model_dir}/damaged.model.ckpt_4"
    assert e.latest_checkpoint() == f"{model_dir}/model.ckpt_2"


def test_the_lease_keeps_a_second_writer_out(empty_cwd, bucket, monkeypatch):
    model_dir = fs.join(bucket, "m")
    lock_path = fs.join(model_dir, model_dir_lock.LOCK_FILE)
    with model_dir_lock.ModelDirLock(model_dir):
        held = json.loads(fs.read_bytes(lock_path))
        assert held["pid"] == os.getpid()
        with pytest.raises(
            est.ModelDirBusyError,
            match=rf"{model_dir} is being trained by another process \(pid {os.getpid()} on ",
        ):
            make(model_dir).train(TRAIN, steps=1)
    assert not fs.exists(lock_path)  # released

    def lease(**info):
        base = {"pid": 1, "host": "elsewhere", "token": "t", "since": 0, "renewed": time.time()}
        fs.write_bytes(lock_path, json.dumps({**base, **info}).encode())

    lease()  # another host, renewed just now: live
    with pytest.raises(est.ModelDirBusyError, match="pid 1 on elsewhere"):
        model_dir_lock.ModelDirLock(model_dir).__enter__()
    lease(renewed=time.time() - locks.LEASE_SECS - 1)  # not renewed: stale
    with model_dir_lock.ModelDirLock(model_dir):
        assert json.loads(fs.read_bytes(lock_path))["pid"] == os.getpid()
    dead = 2**22 + 12345  # above Linux's pid_max default: no such process
    lease(host=socket.gethostname(), pid=dead)  # a killed run of this host: taken at once
    with model_dir_lock.ModelDirLock(model_dir):
        pass
    # The holder renews its lease in the background.
    monkeypatch.setattr(locks, "LEASE_RENEW_SECS", 0.05)
    with model_dir_lock.ModelDirLock(model_dir):
        first = json.loads(fs.read_bytes(lock_path))["renewed"]
        time.sleep(0.3)
        assert json.loads(fs.read_bytes(lock_path))["renewed"] > first


def test_a_failed_export_upload_leaves_nothing(empty_cwd, bucket, monkeypatch, tmp_path):
    e = make(tmp_path / "m")
    e.train(TRAIN, steps=1)
    memory = type(fsspec.filesystem("memory"))
    real = memory.put_file
    calls = []

    def flaky(self, lpath, rpath, **kwargs):
        calls.append(rpath)
        if len(calls) == 3:
            raise ConnectionError("connection reset")
        return real(self, lpath, rpath, **kwargs)

    monkeypatch.setattr(memory, "put_file", flaky)
    with pytest.raises(ConnectionError, match="connection reset"):
        e.export_saved_model(fs.join(bucket, "export"), RECEIVER)
    assert fs.listdir(fs.join(bucket, "export")) == []
    monkeypatch.setattr(memory, "put_file", real)
    path = e.export_saved_model(fs.join(bucket, "export"), RECEIVER).decode()
    # A version whose upload was cut short (no manifest, uploaded last) is refused, and
    # the server keeps serving the complete one.
    fs.write_bytes(fs.join(bucket, "export", "9999999999", "variables", "x"), b"partial")
    with pytest.raises(ValueError, match=r"9999999999 is not a complete export: expected "):
        est.export.load(fs.join(bucket, "export", "9999999999"))
    watcher = ModelWatcher("m", fs.join(bucket, "export"), poll_seconds=0)
    assert watcher.version == int(fs.basename(path))
    served = watcher.model.signatures["serving_default"](x=X[:3])["pred"]
    np.testing.assert_allclose(served, [p["pred"] for p in e.predict(EVAL)][:3], rtol=1e-6)
    # A damaged file is named by its URL, not the local copy's path.
    fs.write_bytes(fs.join(path, "functions", "serving_default.jax"), b"garbage")
    with pytest.raises(ValueError, match=rf"{path}"):
        est.export.load(path)


def test_compat_gfile_reads_and_writes_urls_and_local_paths(bucket, tmp_path):
    from estimator.compat.v1 import gfile

    for root in (bucket, str(tmp_path)):
        d = fs.join(root, "g")
        gfile.MakeDirs(d)
        with gfile.GFile(fs.join(d, "a.txt"), "w") as f:
            f.write("hello")
        with gfile.GFile(fs.join(d, "a.txt")) as f:
            assert f.read() == "hello"
        gfile.Copy(fs.join(d, "a.txt"), fs.join(d, "b.txt"))
        with pytest.raises(FileExistsError, match="b.txt exists"):
            gfile.Copy(fs.join(d, "a.txt"), fs.join(d, "b.txt"))
        gfile.Rename(fs.join(d, "b.txt"), fs.join(d, "c.txt"))
        assert sorted(gfile.ListDirectory(d)) == ["a.txt", "c.txt"]
        assert gfile.Glob(fs.join(d, "*.txt")) == [fs.join(d, "a.txt"), fs.join(d, "c.txt")]
        assert gfile.Exists(fs.join(d, "a.txt")) and gfile.IsDirectory(d)
        [(top, _, files)] = list(gfile.Walk(d))
        assert fs.abspath(top) == fs.abspath(d) and sorted(files) == ["a.txt", "c.txt"]
        gfile.Remove(fs.join(d, "c.txt"))
        gfile.DeleteRecursively(d)
        assert not gfile.Exists(d)
    fs.write_bytes(fs.join(bucket, "s"), b"12345")
    assert gfile.Stat(fs.join(bucket, "s")).length == 5
    # Across storages: a rename copies, then deletes.
    fs.write_bytes(fs.join(bucket, "x"), b"x")
    gfile.Rename(fs.join(bucket, "x"), str(tmp_path / "x"))
    assert (tmp_path / "x").read_bytes() == b"x" and not gfile.Exists(fs.join(bucket, "x"))
    with pytest.raises(ValueError, match="gfile path 'nosuch://b/x' is a nosuch:// URL"):
        gfile.Exists("nosuch://b/x")


def test_tfrecords_in_an_object_store_appear_whole_or_not_at_all(bucket):
    from estimator.io import tfrecord

    records = [f"record {i}".encode() for i in range(50)]
    for compression in ("", "GZIP"):
        path = fs.join(bucket, f"data/part-{compression or 'raw'}.tfrecord")
        with tfrecord.TFRecordWriter(path, compression) as writer:
            for record in records:
                writer.write(record)
        assert list(tfrecord.read_records(path, compression)) == records
    assert tfrecord.list_files(fs.join(bucket, "data", "part-*")) == [
        fs.join(bucket, "data", "part-GZIP.tfrecord"),
        fs.join(bucket, "data", "part-raw.tfrecord"),
    ]
    # A write that fails uploads nothing (the file is uploaded in one request on close).
    with pytest.raises(RuntimeError, match="producer failed"):
        with tfrecord.TFRecordWriter(fs.join(bucket, "data/failed.tfrecord")) as writer:
            writer.write(b"x")
            raise RuntimeError("producer failed")
    assert not fs.exists(fs.join(bucket, "data/failed.tfrecord"))
    # A damaged object is named by its URL and byte offset.
    fs.write_bytes(fs.join(bucket, "data/bad.tfrecord"), b"\x05" + b"\x00" * 20)
    with pytest.raises(tfrecord.CorruptRecordError, match=rf"{bucket}/data/bad.tfrecord: corrupt"):
        list(tfrecord.read_records(fs.join(bucket, "data/bad.tfrecord")))
