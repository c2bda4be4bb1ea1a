"""The whole lifecycle against real storage servers on localhost: S3 (moto's server,
``ThreadedMotoServer``) and GCS (``gcp-storage-emulator``), both from PyPI and started here.

For each: TFRecords written to the bucket, training from them with ``model_dir`` in the
bucket in a child process, SIGKILL mid-training, resuming from the bucket's last complete
checkpoint (taking over the killed run's lease), evaluating from the bucket's TFRecords,
exporting to the bucket, loading the export from the bucket, and serving it with
``python -m estimator.serve --model_base_path <bucket URL>`` over REST.

The clients find the servers through the standard environment only (``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``; ``STORAGE_EMULATOR_HOST``, which
``estimator.io.fs`` also hands to TensorStore, orbax's GCS client): no code here names an
endpoint to the library. On gs:// orbax writes the checkpoints itself (through
TensorStore); on s3:// they are staged and published.
"""

import functools
import http.server
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from http import HTTPStatus

import fsspec.core
import httpx
import numpy as np
import pytest
from linear_model import X, Y, model_fn, reference_eval_loss

import estimator as est
from estimator import checkpoint as ckpt
from estimator.checkpoint import lock as model_dir_lock
from estimator.io import fs

pytestmark = pytest.mark.slow

SUPPORT = pathlib.Path(__file__).resolve().parent.parent / "support"
SPEC = {"x": est.io.FixedLenFeature([2], np.float32), "y": est.io.FixedLenFeature([], np.float32)}
CONFIG = dict(tf_random_seed=0, log_step_count_steps=None, save_checkpoints_steps=20)
RECEIVER = est.export.build_raw_serving_input_receiver_fn({"x": X})

# The training job that is killed: trains "forever" from the bucket's TFRecords.
CHILD = f"""
import sys
sys.path.insert(0, {str(SUPPORT)!r})
import numpy as np
import estimator as est
from linear_model import model_fn
model_dir, data = sys.argv[1:]
spec = {{"x": est.io.FixedLenFeature([2], np.float32), "y": est.io.FixedLenFeature([], np.float32)}}
train = est.inputs.tfrecord_input_fn(
    data + "/train-*", spec, label_key="y", batch_size=8, num_epochs=None, shuffle=False,
    compression_type="GZIP",
)
config = est.RunConfig(**{CONFIG!r})
est.Estimator(model_fn, model_dir, config=config).train(train, max_steps=10**8)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _clear_instances():
    """fsspec keeps one client per protocol: start and end with fresh ones."""
    import gcsfs
    import s3fs

    gcsfs.GCSFileSystem.clear_instance_cache()
    s3fs.S3FileSystem.clear_instance_cache()


def _s3():
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    return server.stop, env


def _exact_multipart(emulator):
    """The emulator's request reader, with a byte-exact reading of ``multipart/related``
    uploads. The emulator reads them with ``email``'s parser, which takes a content's last
    byte for the delimiter's line ending when it is ``\\r`` (gcsfs delimits with ``\\n``
    alone): every such object lost its last byte (1 in 256 binary files; an export's
    ``manifest.ocdbt`` ends with a checksum byte), and the loader rightly refused the
    export. Here the delimiters are the line endings the request's first line uses."""
    read = emulator._read_data

    def read_data(handler, query):
        content_type = handler.headers.get("Content-Type") or ""
        if not content_type.startswith("multipart/related"):
            return read(handler, query)
        raw = emulator._decode_raw_data(emulator._read_raw_data(handler), handler)
        boundary = b"--" + content_type.split("boundary=", 1)[1].strip('"').encode()
        newline = b"\r\n" if raw.startswith(boundary + b"\r\n") else b"\n"
        body = raw[len(boundary + newline) : raw.rindex(newline + boundary + b"--")]
        meta, content = body.split(newline + boundary + newline, 1)
        meta = meta.split(newline * 2, 1)[1]
        headers, content = content.split(newline * 2, 1)
        kind = [h.split(b":", 1)[1].strip() for h in headers.split(newline)
                if h.lower().startswith(b"content-type:")]  # fmt: skip
        return {
            "meta": json.loads(meta),
            "content": content,
            "content-type": kind[0].decode() if kind else "application/octet-stream",
        }

    return read_data


def _generation_headers(objects):
    """The emulator's object download, with the ``x-goog-generation`` and
    ``x-goog-metageneration`` headers real GCS sends. Without them TensorStore reads an
    object's generation as 0 and refuses a write conditioned on it ("Malformed
    StorageGeneration"). OCDBT conditions its manifest's writes on the generation it last
    saw, and when it had read the manifest back (under CPU load: three processes compiling
    beside the test), a training child's save failed (1 run in 6)."""
    download = objects.download

    def with_generation(request, response, storage, *args, **kwargs):
        download(request, response, storage, *args, **kwargs)
        if response.status in (HTTPStatus.OK, HTTPStatus.PARTIAL_CONTENT):
            obj = storage.get_file_obj(request.params["bucket_name"], request.params["object_id"])
            response["x-goog-generation"] = obj["generation"]
            response["x-goog-metageneration"] = obj["metageneration"]

    return with_generation


def _gcs():
    from gcp_storage_emulator import server as emulator
    from gcp_storage_emulator.handlers import objects

    class Handler(emulator.RequestHandler):
        """Requests handled one at a time (the emulator's storage is not thread-safe)."""

        lock = threading.Lock()

        def _serialized(method):
            def run(self):
                with self.lock:
                    method(self)

            return run

        do_GET = _serialized(emulator.RequestHandler.do_GET)
        do_POST = _serialized(emulator.RequestHandler.do_POST)
        do_PUT = _serialized(emulator.RequestHandler.do_PUT)
        do_PATCH = _serialized(emulator.RequestHandler.do_PATCH)
        do_DELETE = _serialized(emulator.RequestHandler.do_DELETE)

    class ThreadedAPI(emulator.APIThread):
        """The emulator's API on a threading HTTP server: its own is single-threaded, so
        one client's idle keep-alive connection (TensorStore in the training child) stalls
        every other client (gcsfs in this process)."""

        def run(self):
            handler = functools.partial(Handler, self._storage)
            self._httpd = http.server.ThreadingHTTPServer((self._host, self._port), handler)
            self._httpd.daemon_threads = True
            self.is_running.set()
            self._httpd.serve_forever()

    port = _free_port()
    server = emulator.create_server("127.0.0.1", port, in_memory=True)
    server._api = ThreadedAPI("127.0.0.1", port, server._storage, daemon=True)
    read_data, download = emulator._read_data, objects.download
    emulator._read_data = _exact_multipart(emulator)
    objects.download = _generation_headers(objects)  # objects.get (?alt=media) calls it
    server.start()

    def stop():
        server.stop()
        emulator._read_data, objects.download = read_data, download

    # NO_GCE_CHECK: google-auth's switch for machines off Google Compute Engine; without
    # it, finding no credentials, it pings the metadata server (gcsfs asks it for the
    # bucket's type), which here never answers.
    env = {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}", "NO_GCE_CHECK": "true"}
    return stop, env


@pytest.fixture(scope="module", params=["s3", "gs"])
def bucket(request):
    """A bucket on a real local server of the protocol; the standard environment points
    the clients at it (inherited by the child processes)."""
    stop, env = {"s3": _s3, "gs": _gcs}[request.param]()
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        patch.setenv("TENSORSTORE_GCS_HTTP_URL", "")  # recorded: restored afterwards
        patch.delenv("TENSORSTORE_GCS_HTTP_URL")  # derived from the emulator's (config.platform)
        patch.setenv("GOOGLE_CLOUD_PROJECT", "test")
        metadata = sys.modules.get("google.auth.compute_engine._metadata")
        if metadata is not None and "NO_GCE_CHECK" in env:  # read when imported
            patch.setattr(metadata, "_NO_GCE_CHECK", True)
        _clear_instances()
        url = f"{request.param}://bucket-{uuid.uuid4().hex[:8]}"
        fs.check(url, "bucket")
        filesystem, name = fsspec.core.url_to_fs(url)
        filesystem.mkdir(name)  # the one thing a user makes before: the bucket
        try:
            yield url
        finally:
            _clear_instances()
            stop()


def _input(data: str, **kwargs):
    return est.inputs.tfrecord_input_fn(
        data + "/train-*",
        SPEC,
        label_key="y",
        batch_size=8,
        shuffle=False,
        compression_type="GZIP",
        **kwargs,
    )


def _train_until_killed(model_dir: str, data: str, log: pathlib.Path) -> int:
    """Starts the training child, SIGKILLs it once the bucket holds a checkpoint after
    step 0; returns the newest complete step then. (The child's output goes to a file: a
    full pipe would block it.)"""
    with open(log, "wb") as out:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, model_dir, data], stdout=out, stderr=out
        )
    deadline = time.monotonic() + 180
    try:
        while not [s for s in ckpt.complete_steps(model_dir) if s > 0]:
            if child.poll() is not None:
                raise AssertionError(f"training stopped: {log.read_text()[-3000:]}")
            assert time.monotonic() < deadline, f"no checkpoints: {log.read_text()[-3000:]}"
            time.sleep(0.2)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    return ckpt.complete_steps(model_dir)[-1]


def _serve(base_path: str, log: pathlib.Path):
    port = _free_port()
    out = open(log, "wb")  # noqa: SIM115 (closed with the server)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "estimator.serve",
            "--model_name",
            "m",
            "--model_base_path",
            base_path,
            "--rest_api_port",
            str(port),
            "--port",
            str(_free_port()),
            "--host",
            "127.0.0.1",
        ],
        stdout=out,
        stderr=out,
    )
    out.close()
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
    deadline = time.monotonic() + 90
    while True:
        try:
            client.get("/v1/models/m")
            return client, server
        except httpx.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise RuntimeError(log.read_text()[-3000:]) from None
            time.sleep(0.3)


def test_the_lifecycle_on_a_real_server(bucket, tmp_path):
    data, model_dir = fs.join(bucket, "data"), fs.join(bucket, "model")
    written = est.io.write_examples(fs.join(data, "train"), {"x": X, "y": Y}, num_shards=2)
    assert written == [f"{data}/train-0000{i}-of-00002" for i in range(2)]
    assert fs.glob(fs.join(data, "train-*")) == written

    killed_at = _train_until_killed(model_dir, data, tmp_path / "train.log")
    assert killed_at >= 20 and killed_at % 20 == 0  # save_checkpoints_steps=20
    # The killed run left its lease; a run on the same host takes it over at once.
    lease = json.loads(fs.read_bytes(fs.join(model_dir, model_dir_lock.LOCK_FILE)))
    assert lease["pid"] != os.getpid()

    e = est.Estimator(model_fn, model_dir, config=est.RunConfig(**CONFIG))
    e.train(_input(data, num_epochs=None), steps=5)
    assert e.latest_checkpoint() == f"{model_dir}/model.ckpt_{killed_at + 5}"  # resumed
    assert not fs.exists(fs.join(model_dir, model_dir_lock.LOCK_FILE))

    results = e.evaluate(_input(data, num_epochs=1))
    assert results["global_step"] == killed_at + 5
    # Loss at w = 0, b = 0 is mean(y^2) (reference_eval_loss(0)); ≥ 25 SGD steps cut it.
    assert results["loss"] < reference_eval_loss(0) / 4
    names = fs.listdir(fs.join(model_dir, "eval"))
    assert "eval_results.jsonl" in names and any(n.startswith("events.out") for n in names)

    export_dir = e.export_saved_model(fs.join(bucket, "export"), RECEIVER).decode()
    assert export_dir.startswith(f"{bucket}/export/")
    predictions = np.array([p["pred"] for p in e.predict(_input(data, num_epochs=1))])
    loaded = est.export.load(export_dir)
    assert loaded.global_step == killed_at + 5
    np.testing.assert_allclose(
        loaded.signatures["serving_default"](x=X)["pred"], predictions, rtol=1e-6
    )

    client, server = _serve(fs.join(bucket, "export"), tmp_path / "serve.log")
    try:
        status = client.get("/v1/models/m").json()
        assert status["model_version_status"][0]["version"] == fs.basename(export_dir)
        answer = client.post("/v1/models/m:predict", json={"inputs": {"x": X[:3].tolist()}})
        outputs = answer.json()["outputs"]
        outputs = outputs["pred"] if isinstance(outputs, dict) else outputs
        np.testing.assert_allclose(outputs, predictions[:3], rtol=1e-6)
    finally:
        server.kill()
        server.wait()
        client.close()


def test_every_byte_round_trips_exactly(bucket, tmp_path):
    """Contents ending in ``\\r``, line breaks and the gcsfs boundary itself come back
    byte for byte, uploaded one by one and as a tree (the gs:// emulator used to drop a
    last ``\\r``: ``_exact_multipart``)."""
    contents = [b"", b"\r", b"a\r", b"\r\n", b"a\n", b"\r\n\r\n--==0==\r", bytes(range(256))]
    local = tmp_path / "tree"
    local.mkdir()
    for i, data in enumerate(contents):
        fs.write_bytes(fs.join(bucket, "one", f"f{i}"), data)
        (local / f"f{i}").write_bytes(data)
    fs.upload_tree(str(local), fs.join(bucket, "tree"))
    fs.download_tree(fs.join(bucket, "tree"), str(tmp_path / "back"))
    for i, data in enumerate(contents):
        assert fs.read_bytes(fs.join(bucket, "one", f"f{i}")) == data, i
        assert (tmp_path / "back" / f"f{i}").read_bytes() == data, i


def test_tf_data_reads_text_and_tfrecords_from_the_server(bucket):
    """compat's ``TextLineDataset`` and ``TFRecordDataset`` read storage URLs, as TF's."""
    import gzip

    import estimator.compat.v1 as tf

    lines = [f"{i},name {i}".encode() for i in range(300)]
    fs.write_bytes(fs.join(bucket, "rows.csv.gz"), gzip.compress(b"\n".join(lines) + b"\n"))
    with est.io.TFRecordWriter(fs.join(bucket, "rows.tfrecord")) as writer:
        for line in lines:
            writer.write(line)
    text = tf.data.TextLineDataset(fs.join(bucket, "rows.csv.gz")).batch(128)
    records = tf.data.TFRecordDataset(fs.join(bucket, "rows.tfrecord")).batch(128)
    for dataset in (text, records):
        got = [bytes(x) for batch in dataset.as_numpy_iterator() for x in batch]
        assert got == lines
