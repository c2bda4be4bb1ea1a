"""``estimator.io.fs``: local paths and storage URLs through one seam, and the errors for
URLs that cannot be served. ``memory://`` (fsspec's in-process store, no server) stands in
for an object store here; tests/io/test_storage_servers.py runs real S3 and GCS servers."""

import os
import sys
import uuid

import fsspec
import pytest

from estimator.io import fs, staging


@pytest.fixture
def bucket():
    """A fresh ``memory://`` prefix, removed afterwards."""
    url = f"memory://bucket-{uuid.uuid4().hex[:8]}"
    yield url
    fs.rmtree(url)


def test_protocols_and_local_paths():
    assert [fs.protocol(u) for u in ("gs://b/m", "S3://b", "hdfs://n/m", "memory://x")] == [
        "gs",
        "s3",
        "hdfs",
        "memory",
    ]
    for local in ("runs/m", "/tmp/m", b"/tmp/m", r"C:\models\m", "gs:/bucket", "file:///tmp/m"):
        assert fs.protocol(local) is None
    assert fs.check("file:///tmp/m", "model_dir") == "/tmp/m"
    assert fs.check(b"runs/m", "model_dir") == "runs/m"
    assert fs.check("gs://b/m/", "model_dir") == "gs://b/m"  # no trailing /
    assert fs.join("gs://b/m/", "eval", "x") == "gs://b/m/eval/x"
    assert (fs.basename("gs://b/m/model.ckpt_3/"), fs.dirname("gs://b/m/x")) == (
        "model.ckpt_3",
        "gs://b/m",
    )
    # os.path would have made these the local gs:/b/m: fs keeps the URL whole.
    assert fs.abspath("gs://b//m/") == "gs://b//m"
    assert fs.abspath("runs/m") == os.path.abspath("runs/m")


def test_files_and_directories_on_an_object_store(bucket):
    fs.write_bytes(fs.join(bucket, "m", "a", "x"), b"1")
    fs.write_bytes(fs.join(bucket, "m", "b"), b"2")
    assert fs.listdir(fs.join(bucket, "m")) == ["a", "b"]
    assert fs.isdir(fs.join(bucket, "m", "a")) and not fs.isdir(fs.join(bucket, "m", "b"))
    assert fs.isfile(fs.join(bucket, "m", "b")) and not fs.exists(fs.join(bucket, "nothing"))
    assert fs.listdir(fs.join(bucket, "nothing")) == []
    fs.append_bytes(fs.join(bucket, "m", "b"), b"3")  # read and written back whole
    assert fs.read_bytes(fs.join(bucket, "m", "b")) == b"23"
    assert fs.glob(fs.join(bucket, "m", "*")) == [fs.join(bucket, "m", n) for n in "ab"]
    fs.move(fs.join(bucket, "m", "a"), fs.join(bucket, "m", "c"))
    assert fs.listdir(fs.join(bucket, "m")) == ["b", "c"]
    with fs.open_file(fs.join(bucket, "m", "c", "x")) as f:
        assert f.read() == b"1"
    fs.rmtree(fs.join(bucket, "m"))
    assert not fs.exists(fs.join(bucket, "m"))
    fs.rmtree(fs.join(bucket, "m"))  # a missing tree is no error


def test_trees_go_up_with_their_marker_last_and_come_back(bucket, tmp_path, monkeypatch):
    source = tmp_path / "tree"
    (source / "d").mkdir(parents=True)
    for name in ("z", "a", "d/m", "manifest.json"):
        (source / name).write_text(name)
    uploaded = []
    real = fsspec.filesystem("memory").put_file
    monkeypatch.setattr(
        type(fsspec.filesystem("memory")),
        "put_file",
        lambda self, lpath, rpath, **kw: (
            uploaded.append(rpath.rsplit("/tree/", 1)[1]) or real(lpath, rpath, **kw)
        ),
    )
    fs.upload_tree(source, fs.join(bucket, "tree"), last=("manifest.json",))
    assert uploaded[-1] == "manifest.json" and sorted(uploaded) == [
        "a",
        "d/m",
        "manifest.json",
        "z",
    ]
    fs.download_tree(fs.join(bucket, "tree"), tmp_path / "back")
    assert (tmp_path / "back" / "d" / "m").read_text() == "d/m"
    with pytest.raises(FileNotFoundError, match=r"memory://.*/nothing: nothing is stored"):
        fs.download_tree(fs.join(bucket, "nothing"), tmp_path / "none")


def test_a_deletion_cut_short_leaves_an_incomplete_checkpoint(bucket, monkeypatch):
    """Retention deletes the commit marker first: killed after it (here the bulk delete
    fails), the remains are not a complete checkpoint, so no reader takes them for one."""
    from estimator.checkpoint import paths as checkpoint_paths

    step = fs.join(bucket, "m", "model.ckpt_20")
    for name in ("meta/metadata", "variables/d/x", staging.COMMIT_MARKER):
        fs.write_bytes(fs.join(step, name), b"x")
    assert checkpoint_paths.complete_steps(fs.join(bucket, "m")) == [20]

    def killed(self, path, recursive=False, **kw):
        raise KeyboardInterrupt  # the process dies before the rest is deleted

    monkeypatch.setattr(type(fsspec.filesystem("memory")), "rm", killed)
    with pytest.raises(KeyboardInterrupt):
        fs.rmtree(step, first=(staging.COMMIT_MARKER,))
    assert fs.exists(fs.join(step, "meta", "metadata"))  # what was left
    assert checkpoint_paths.complete_steps(fs.join(bucket, "m")) == []


def test_local_writes_are_atomic(tmp_path, monkeypatch):
    target = tmp_path / "f"
    fs.write_bytes(target, b"old")

    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        fs.write_bytes(target, b"new")
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["f"]  # no temp left


def test_an_unknown_protocol_is_refused_with_the_fix():
    with pytest.raises(fs.ProtocolUnavailableError) as err:
        fs.check("nosuch://bucket/m", "model_dir")
    assert str(err.value) == (
        "model_dir 'nosuch://bucket/m' is a nosuch:// URL, but no file system implements "
        "nosuch://. Use a local path or a URL of a storage fsspec serves (gs://, s3://, ...), "
        "or mount the storage and pass the mounted path."
    )
    assert isinstance(err.value, ValueError)  # as TF's RunConfig raises for a bad model_dir


@pytest.mark.parametrize(
    ("url", "package", "extra"), [("gs://b/m", "gcsfs", "gcs"), ("s3://b/m", "s3fs", "s3")]
)
def test_a_missing_package_is_named_with_its_extra(monkeypatch, url, package, extra):
    for name in [n for n in sys.modules if n.split(".")[0] == package] or [package]:
        monkeypatch.setitem(sys.modules, name, None)  # import fails as if not installed
    scheme = url.split(":")[0]
    # forget the imported class (fsspec.registry is a view; its module holds the dict)
    monkeypatch.delitem(sys.modules["fsspec.registry"]._registry, scheme, raising=False)
    message = (
        rf"model_dir '{url}' is a {scheme}:// URL; reading and writing {scheme}:// needs the "
        rf"{package} package, which is not installed. Install it with pip install "
        rf"'jax-estimator\[{extra}\]' \(or pip install {package}\)."
    )
    with pytest.raises(fs.ProtocolUnavailableError, match=message):
        fs.check(url, "model_dir")


def test_a_protocol_fsspec_knows_without_its_package_gets_fsspecs_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "adlfs", None)
    with pytest.raises(fs.ProtocolUnavailableError, match=r"needs a package that is not "):
        fs.check("abfs://container/m", "export_dir_base")


def test_read_only_protocols_are_refused_for_writing():
    assert fs.check("https://example.com/data.tfrecord", "file") == (
        "https://example.com/data.tfrecord"
    )
    with pytest.raises(fs.ProtocolUnavailableError, match="can be read but not written"):
        fs.check("https://example.com/m", "model_dir", write=True)


def test_gcs_clients_follow_one_emulator(monkeypatch, tmp_path):
    # gcsfs reads STORAGE_EMULATOR_HOST, TensorStore (orbax's checkpoints) its own variable:
    # both must reach the same server, never the emulator for some files and GCS for others.
    # The switch lives with the other process-wide ones (estimator.config.platform), and a
    # model_dir set after the emulator applies it.
    import estimator as est

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "localhost:9023")
    monkeypatch.setenv("TENSORSTORE_GCS_HTTP_URL", "")  # recorded: restored afterwards
    monkeypatch.delenv("TENSORSTORE_GCS_HTTP_URL")
    est.Estimator(lambda features: None, model_dir=str(tmp_path / "m"))
    assert os.environ["TENSORSTORE_GCS_HTTP_URL"] == "http://localhost:9023"
    assert os.environ["EPATH_USE_TF"] == "false"  # set on import: epath serves gs:// via fsspec


def test_a_protocol_whose_package_loads_on_use_is_refused_naming_it(monkeypatch, tmp_path):
    """hdfs:// is fsspec's (its class imports without pyarrow), but reading or writing it
    needs pyarrow: the error names it before anything is created, where fsspec would fail
    at the first use with "No module named 'pyarrow'"."""
    import estimator as est

    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import fails as if not installed
    message = (
        r"model_dir 'hdfs://namenode/m' is a hdfs:// URL; reading and writing hdfs:// needs "
        r"the pyarrow package, which is not installed. Install it with pip install pyarrow\."
    )
    with pytest.raises(fs.ProtocolUnavailableError, match=message):
        est.Estimator(lambda features: None, model_dir="hdfs://namenode/m")
    with pytest.raises(fs.ProtocolUnavailableError, match="needs the pyarrow package"):
        fs.exists("hdfs://namenode/m/x")  # every operation names it too
    assert not os.path.exists("hdfs:")


def test_staging_reads_a_local_copy_and_publishes_marker_last(bucket, tmp_path):
    (tmp_path / "s" / "model.ckpt_1" / "meta").mkdir(parents=True)
    (tmp_path / "s" / "model.ckpt_1" / "meta" / "metadata").write_text("{}")
    publisher = staging.Publisher(str(tmp_path / "s"), bucket, after_publish=None)
    publisher.submit("model.ckpt_1")
    publisher.submit("model.ckpt_2")  # never appears (pending says no): skipped
    publisher.close()
    assert fs.listdir(fs.join(bucket, "model.ckpt_1")) == [staging.COMMIT_MARKER, "meta"]
    assert fs.listdir(bucket) == ["model.ckpt_1"]
    with staging.readable(fs.join(bucket, "model.ckpt_1"), ("meta", "opt_state")) as local:
        assert os.listdir(local) == ["meta"]  # absent items skipped
        copy = local
    assert not os.path.exists(copy)  # removed after the block
    with staging.readable(tmp_path / "s") as local:
        assert local == str(tmp_path / "s")  # orbax reads local paths itself


def test_only_the_seam_tells_urls_from_local_paths():
    """One seam: no module but ``estimator.io.fs`` branches on whether a path is a URL
    (what differs between storages is a named function of the seam)."""
    import pathlib

    import estimator

    root = pathlib.Path(estimator.__file__).parent
    seam = root / "io" / "fs"
    branching = sorted(
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if seam not in path.parents and "is_url(" in path.read_text()
    )
    assert branching == []
    assert not hasattr(fs, "is_url")  # not offered to callers either


def test_a_mirror_uploads_a_file_only_when_it_changed(monkeypatch):
    # Event files of a URL model_dir are written locally and uploaded whole at each flush:
    # an unchanged file is not sent again (a flush of an idle writer makes no request).
    from estimator.io.fs import _trees

    uploads = []
    real = _trees.write_bytes
    monkeypatch.setattr(_trees, "write_bytes", lambda p, d: (uploads.append(p), real(p, d)))
    mirror = fs.Mirror("memory://mirror-test/logs")
    with open(os.path.join(mirror.path, "events"), "wb") as f:
        f.write(b"one")
    mirror.sync()
    mirror.sync()
    assert uploads == ["memory://mirror-test/logs/events"]
    with open(os.path.join(mirror.path, "events"), "ab") as f:
        f.write(b"two")
    mirror.close()
    assert len(uploads) == 2
    assert fs.read_bytes("memory://mirror-test/logs/events") == b"onetwo"
