"""TF's error classes under ``estimator.compat.v1``: every error path of ``tf.io``,
``tf.data``, ``tf.train``, ``tf.estimator`` and ``tf.gfile`` raises the class TF 2.15.1
raises for it, with TF's message first, and is also the native exception's class (a
program catching either works: ``estimator.compat.v1.errors.tf_error``).

The audit. TF's class and message were taken from TF 2.15.1 (``tensorflow-cpu==2.15.1``,
eager); "IAE" is ``InvalidArgumentError``; the native class follows in parentheses; every
row is tested below.

=====================  ===========================  ==================  =====================
API                    condition                    TF 2.15.1           compat (native)
=====================  ===========================  ==================  =====================
tf.io.parse_example,   wrong type or length,        IAE: "Name:         IAE (ValueError)
parse_single_example   missing required key, not    <unknown>, Key: a,
                       an Example, stride of a      Index: 0.  Data
                       FixedLenSequenceFeature,     types don't match
                       serialized of rank 2         ..."
parse_[single_]        wrong step type, missing     IAE                 IAE (ValueError)
sequence_example       list, not a SequenceExample
tf.io.parse_*          bad spec (dtype, object,     ValueError (graph   same (TypeError for
                       allow_missing=False)         construction)       a non-spec object)
tf.io.decode_csv       field count, required field  IAE                 IAE (ValueError)
                       missing, value not parsed
tf_record_iterator     missing file                 NotFoundError       NotFoundError
                                                                        (FileNotFoundError)
                       truncated, corrupt length    DataLossError       DataLossError
                       or data CRC, not GZIP                            (CorruptRecordError)
TFRecordWriter         directory missing            NotFoundError       NotFoundError
TFRecordDataset        truncated, corrupt           DataLossError       DataLossError
                       missing file                 NotFoundError       NotFoundError
                                                                        (FileNotFoundError)
TextLineDataset        missing file                 NotFoundError       NotFoundError
Dataset.list_files     nothing matches              IAE                 IAE (ValueError)
batch, shuffle,        size < 1, shard index out    IAE                 IAE (ValueError)
shard                  of range
padded_batch           element over its padded      ValueError /        IAE when read
                       shape                        IAE                 (ValueError)
Dataset.map            parse/decode error           IAE                 IAE (ValueError)
from_tensor_slices     first dimensions differ      ValueError          same
Iterator.get_next      empty dataset                OutOfRangeError     OutOfRangeError
                                                                        (ValueError)
iteration              past the end                 StopIteration       same
gfile.GFile            missing file or directory    NotFoundError       NotFoundError
                       a directory                  FailedPrecondition  FailedPrecondition
ListDirectory          missing, a file              NotFoundError       NotFoundError
Remove, Stat, Copy,    missing                      NotFoundError       NotFoundError
Rename,
DeleteRecursively
MkDir                  exists / parent missing      none / NotFound     none / NotFound
MakeDirs               a file on the path           FailedPrecondition  FailedPrecondition
Copy, Rename           target exists                AlreadyExistsError  AlreadyExistsError
                                                                        (FileExistsError)
Glob, Walk, Exists,    nothing there                [] / False          same
IsDirectory
any gfile call         unknown URL scheme           UnimplementedError  UnimplementedError
                                                                        (ProtocolUnavailable)
train.list_variables,  no checkpoint                NotFoundError       NotFoundError
load_variable
load_variable          no such variable             NotFoundError       NotFoundError
                       damaged checkpoint           DataLossError       DataLossError
latest_checkpoint      no checkpoint                None                None
nn.embedding_lookup    id outside [0, rows)         IAE: "indices[0] =  IAE (IdRangeError);
                                                    3 is not in [0,     a feature's ids are
                                                    3)"                 checked on the host
                                                                        before each step
Estimator.train,       an input error (any row      TF's class          TF's class
evaluate, predict      above)
=====================  ===========================  ==================  =====================

Differences: a ``TFRecordDataset`` name with glob characters that is not a file is expanded
as a pattern (TF refuses it: NotFoundError); TF's offsets in "corrupted record at N" count
from where its failing read started, ours from the record's start; a file that is not GZIP
says "cannot decompress the gzip stream" where TF's zlib says "inflate() failed"; the host
check of a feature's ids raises the native ``IdRangeError`` (a ``ValueError``) from
``train()`` for batches after the first.
"""

import os

import numpy as np
import pytest

import estimator.compat.v1 as tf
from estimator.checkpoint.reader import DataLossError as CheckpointDataLoss
from estimator.io import CorruptRecordError
from estimator.io.fs import ProtocolUnavailableError
from estimator.model.input_checks import IdRangeError


def raises(tf_class, native, match):
    """``pytest.raises(tf_class, match=...)`` that also checks the native class."""

    class Both:
        def __enter__(self):
            self.context = pytest.raises(tf_class, match=match)
            self.info = self.context.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self.context.__exit__(*exc)
            assert isinstance(self.info.value, native), type(self.info.value).__mro__
            assert isinstance(self.info.value, tf.errors.OpError)
            return handled

    return Both()


def _example(**features) -> bytes:
    example = tf.train.Example()
    for key, values in features.items():
        kind = {bytes: "bytes_list", float: "float_list", int: "int64_list"}[type(values[0])]
        getattr(example.features.feature[key], kind).value.extend(values)
    return example.SerializeToString()


A = {"a": tf.io.FixedLenFeature([1], tf.float32)}


# ----- tf.io: parsing ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "records, message",  # TF 2.15.1's messages (eager, after its "{{function_node ...}}")
    [
        ([_example(a=[1])], "Name: <unknown>, Key: a, Index: 0.  Data types don't match. Data "
         "type: int64 but expected type: float"),
        ([_example(a=[1.0, 2.0])], "Name: <unknown>, Key: a, Index: 0.  Number of float values "
         "!= expected.  Values size: 2 but output shape: \\[1\\]"),
        ([_example(b=[1.0])], "Name: <unknown>, Feature: a \\(data type: float\\) is required but "
         "could not be found."),
        ([b"\x01\x02garbage"], "Name: <unknown>, Could not parse example input"),
        ([[_example(a=[1.0])]], "Expected serialized to be a scalar or vector, got shape: "
         "\\[1,1\\]"),
    ],
    ids=["wrong-type", "wrong-length", "missing", "not-an-example", "rank-2"],
)  # fmt: skip
def test_parse_example_data_errors_are_invalid_argument(records, message):
    with raises(tf.errors.InvalidArgumentError, ValueError, match=f"^{message}"):
        tf.io.parse_example(records, A)
    # TF 1's top-level name, and a FixedLenSequenceFeature's stride (TF's message).
    with raises(tf.errors.InvalidArgumentError, ValueError, match="not a multiple of stride"):
        tf.parse_example(
            [_example(a=[1.0, 2.0, 3.0])],
            {"a": tf.io.FixedLenSequenceFeature([2], tf.float32, allow_missing=True)},
        )
    with raises(tf.errors.InvalidArgumentError, ValueError, match="Expected type: float, Actual"):
        tf.io.parse_example([_example(a=[1])], {"a": tf.io.VarLenFeature(tf.float32)})


def test_parse_single_example_data_errors_are_invalid_argument():
    with raises(tf.errors.InvalidArgumentError, ValueError, match="^Key: a.  Data types don't"):
        tf.io.parse_single_example(_example(a=[1]), A)
    with raises(tf.errors.InvalidArgumentError, ValueError, match="^Feature: a .* is required"):
        tf.io.parse_single_example(_example(b=[1]), A)
    with raises(tf.errors.InvalidArgumentError, ValueError, match="Could not parse example"):
        tf.io.parse_single_example(b"\x01\x02garbage", A)
    # A bad spec: TF 1 raises it while building the graph, a ValueError, not a tf.errors
    # class, and before reading the data.
    with pytest.raises(ValueError, match="allow_missing to be True") as info:
        tf.io.parse_example([b"\x01garbage"], {"a": tf.io.FixedLenSequenceFeature([], tf.float32)})
    assert not isinstance(info.value, tf.errors.OpError)
    with pytest.raises(TypeError, match="expected a FixedLenFeature"):
        tf.io.parse_single_example(b"\x01garbage", {"a": 3})


def test_parse_sequence_example_data_errors_are_invalid_argument():
    sequence = tf.train.SequenceExample()
    for step in ([1], [2]):
        sequence.feature_lists.feature_list["t"].feature.add().int64_list.value.extend(step)
    record = sequence.SerializeToString()
    floats = {"t": tf.io.FixedLenSequenceFeature([], tf.float32)}
    with raises(
        tf.errors.InvalidArgumentError,
        ValueError,
        match="^Name: <unknown>, Feature list: t, Index: 0.  Data types don't match. Expected "
        "type: float",  # TF 2.15.1's message
    ):
        tf.io.parse_single_sequence_example(record, sequence_features=floats)
    missing = {"u": tf.io.FixedLenSequenceFeature([], tf.int64)}
    with raises(
        tf.errors.InvalidArgumentError, ValueError, match="^Name: <unknown>, Feature list 'u' is "
        "required but could not be found.  Did you mean to include it in "
        "feature_list_dense_missing_assumed_empty",
    ):  # fmt: skip
        tf.io.parse_sequence_example([record], sequence_features=missing)
    with raises(
        tf.errors.InvalidArgumentError, ValueError, match="^Invalid protocol message input, "
        "example id: <unknown>",
    ):  # fmt: skip
        tf.io.parse_single_sequence_example(b"\x01garbage", sequence_features=missing)


def test_decode_csv_errors_are_invalid_argument():
    with raises(tf.errors.InvalidArgumentError, ValueError, match="^Expect 3 fields but have 2"):
        tf.io.decode_csv(["1,2"], [[0.0], [0.0], [0.0]])
    with raises(tf.errors.InvalidArgumentError, ValueError, match="^Field 1 is required"):
        tf.decode_csv(["1,"], [[0.0], []])
    with raises(tf.errors.InvalidArgumentError, ValueError, match="abc"):
        tf.io.decode_csv(["abc"], [[0.0]])


# ----- tf.io: TFRecord files ----------------------------------------------------------------
def _records(tmp_path, n=3) -> tuple[str, bytes]:
    path = str(tmp_path / "r.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(n):
            writer.write(_example(a=[1.0]))
    with open(path, "rb") as f:
        return path, f.read()


def _damaged(tmp_path) -> dict[str, tuple[str, str | None, str]]:
    """The damaged files of a 3-record file and TF 2.15.1's message for each."""
    _, raw = _records(tmp_path)
    files = {
        # TF: "truncated record at 90' failed with Read less bytes than requested" (TF's
        # offsets count from where its failing read starts; ours from the record's start)
        "truncated": (raw[:-3], None, r"^truncated record at \d+ \("),
        # TF: "corrupted record at 0 (Is this even a TFRecord file?)"
        "length-crc": (raw[:8] + bytes([raw[8] ^ 1]) + raw[9:], None, "^corrupted record at 0"),
        # TF: "corrupted record at 12"
        "data-crc": (raw[:14] + bytes([raw[14] ^ 1]) + raw[15:], None, r"^corrupted record at"),
        # TF: "inflate() failed with error -3: incorrect header check"
        "not-gzip": (raw, "GZIP", "cannot decompress the gzip stream"),  # (ours)
    }
    out = {}
    for name, (data, compression, message) in files.items():
        path = tmp_path / name
        path.write_bytes(data)
        out[name] = (str(path), compression, message)
    return out


def test_damaged_tfrecords_raise_data_loss_where_tf_does(tmp_path):
    for name, (path, compression, message) in _damaged(tmp_path).items():
        options = tf.io.TFRecordOptions(compression_type=compression) if compression else None
        with raises(tf.errors.DataLossError, CorruptRecordError, match=message):
            list(tf.io.tf_record_iterator(path, options))
        with raises(tf.errors.DataLossError, CorruptRecordError, match=message):
            list(tf.data.TFRecordDataset(path, compression_type=compression))
        with raises(tf.errors.DataLossError, CorruptRecordError, match=message):
            list(tf.python_io.tf_record_iterator(path, options))
        assert name


def test_missing_files_raise_not_found(tmp_path):
    missing = str(tmp_path / "nope")
    with raises(tf.errors.NotFoundError, FileNotFoundError, match="nope"):
        list(tf.io.tf_record_iterator(missing))
    with raises(tf.errors.NotFoundError, FileNotFoundError, match="no/x"):
        tf.io.TFRecordWriter(str(tmp_path / "no" / "x"))
    # TF: "<path>; No such file or directory"
    with raises(tf.errors.NotFoundError, FileNotFoundError, match="nope; No such file"):
        list(tf.data.TextLineDataset(missing))
    # TF 2.15.1: NotFoundError "<path>; No such file or directory" (names are files).
    with raises(tf.errors.NotFoundError, FileNotFoundError, match="nope; No such file"):
        list(tf.data.TFRecordDataset(missing))
    with raises(tf.errors.NotFoundError, FileNotFoundError, match="nope; No such file"):
        list(tf.data.TFRecordDataset([missing]).batch(2))  # the batched (engine) pipeline
    with raises(tf.errors.NotFoundError, FileNotFoundError, match="nope; No such file"):
        list(tf.data.TextLineDataset([missing]).batch(2))


# ----- tf.data ------------------------------------------------------------------------------
def test_dataset_argument_errors_are_invalid_argument(tmp_path):
    # TF 2.15.1's messages.
    with raises(tf.errors.InvalidArgumentError, ValueError, match="^Batch size must be greater"):
        tf.data.Dataset.range(3).batch(0)
    with raises(
        tf.errors.InvalidArgumentError, ValueError, match="^buffer_size must be greater than zero"
    ):
        tf.data.Dataset.range(3).shuffle(0)
    with raises(
        tf.errors.InvalidArgumentError, ValueError, match=r"^Index must be between 0 and 1 \("
    ):
        tf.data.Dataset.range(3).shard(2, 5)
    with raises(tf.errors.InvalidArgumentError, ValueError, match="No files matched pattern"):
        tf.data.Dataset.list_files(str(tmp_path / "*.zzz"))
    with pytest.raises(ValueError, match="must agree") as info:  # TF: ValueError too
        tf.data.Dataset.from_tensor_slices((np.zeros(3), np.zeros(4)))
    assert not isinstance(info.value, tf.errors.OpError)


def test_errors_inside_a_pipeline_are_tfs_classes(tmp_path):
    path, _ = _records(tmp_path)
    bad_spec = {"a": tf.io.FixedLenFeature([1], tf.int64)}
    parsed = tf.data.TFRecordDataset(path).batch(2).map(lambda r: tf.io.parse_example(r, bad_spec))
    with raises(tf.errors.InvalidArgumentError, ValueError, match="Data types don't match"):
        list(parsed)
    padded = tf.data.Dataset.from_generator(lambda: iter([np.zeros(3)])).padded_batch(2, [2])
    with raises(tf.errors.InvalidArgumentError, ValueError, match="^Attempted to pad to a smaller"):
        list(padded)
    iterator = tf.data.Dataset.range(0).make_one_shot_iterator()
    with raises(tf.errors.OutOfRangeError, ValueError, match="^End of sequence"):
        iterator.get_next()
    elements = iter(tf.data.Dataset.range(1))
    next(elements)
    with pytest.raises(StopIteration):  # Python iteration ends as TF's eager iteration
        next(elements)


# ----- tf.gfile -----------------------------------------------------------------------------
def test_gfile_errors_are_tfs_classes_and_messages(tmp_path):
    g = tf.gfile
    d = str(tmp_path)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    for path in (a, b):
        with open(path, "w") as f:
            f.write("x")
    nope = str(tmp_path / "nope")
    # TF 2.15.1's messages.
    with raises(tf.errors.NotFoundError, FileNotFoundError, match=f"^{nope}; No such file"):
        g.GFile(nope).read()
    with raises(tf.errors.NotFoundError, FileNotFoundError, match="no/x; No such file"):
        g.GFile(str(tmp_path / "no" / "x"), "w")
    with raises(tf.errors.FailedPreconditionError, IsADirectoryError, match="; Is a directory"):
        g.GFile(d).read()
    with raises(tf.errors.NotFoundError, FileNotFoundError, match="^Could not find directory"):
        g.ListDirectory(nope)
    with raises(tf.errors.NotFoundError, NotADirectoryError, match="^Could not find directory"):
        tf.io.gfile.listdir(a)
    with raises(tf.errors.NotFoundError, FileNotFoundError, match="; No such file"):
        g.Remove(nope)
    with raises(tf.errors.NotFoundError, FileNotFoundError, match=f"^{nope} not found"):
        g.DeleteRecursively(nope)
    g.MkDir(d)  # an existing directory: no error, as TF's
    with raises(tf.errors.NotFoundError, FileNotFoundError, match="; No such file"):
        g.MkDir(str(tmp_path / "x" / "y"))
    with raises(tf.errors.FailedPreconditionError, OSError, match="is not a directory"):
        g.MakeDirs(os.path.join(a, "x"))
    with raises(tf.errors.AlreadyExistsError, FileExistsError, match="^file already exists"):
        g.Copy(a, b)
    with raises(tf.errors.AlreadyExistsError, FileExistsError, match="^file already exists"):
        tf.io.gfile.rename(a, b)
    with raises(tf.errors.NotFoundError, FileNotFoundError, match="; No such file"):
        g.Copy(nope, str(tmp_path / "c"))
    with raises(tf.errors.NotFoundError, FileNotFoundError, match="; No such file"):
        g.Rename(nope, str(tmp_path / "c"))
    with raises(tf.errors.NotFoundError, FileNotFoundError, match="; No such file"):
        g.Stat(nope)
    with raises(tf.errors.UnimplementedError, ProtocolUnavailableError, match="foo://"):
        g.Exists("foo://bucket/x")
    assert g.Glob(str(tmp_path / "*.zzz")) == [] and list(g.Walk(nope)) == []
    assert not g.Exists(nope) and not g.IsDirectory(nope)


# ----- tf.train: checkpoints ----------------------------------------------------------------
def _trained(model_dir) -> str:
    def model_fn(features, labels, mode):
        w = tf.get_variable("w", [1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(features["x"] * w - labels))
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    estimator = tf.estimator.Estimator(model_fn, str(model_dir))
    x = np.ones(4, np.float32)
    estimator.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, x)).batch(2), steps=1)
    return estimator.latest_checkpoint()


def test_checkpoint_errors_are_tfs_classes(tmp_path):
    nockpt = str(tmp_path / "nockpt")
    message = "^Unsuccessful TensorSliceReader constructor: Failed to find any matching files"
    with raises(tf.errors.NotFoundError, FileNotFoundError, match=message):
        tf.train.list_variables(nockpt)
    with raises(tf.errors.NotFoundError, FileNotFoundError, match=message):
        tf.train.load_variable(nockpt, "w")
    assert tf.train.latest_checkpoint(nockpt) is None
    path = _trained(tmp_path / "m")
    assert [n for n, _ in tf.train.list_variables(str(tmp_path / "m"))].count("w") == 1
    with raises(
        tf.errors.NotFoundError, FileNotFoundError, match="^Key zz not found in checkpoint"
    ):
        tf.train.load_variable(str(tmp_path / "m"), "zz")
    for root, _, files in os.walk(path):  # damage every array file of the checkpoint
        for name in files:
            if "variables" in root and not name.startswith("_"):
                with open(os.path.join(root, name), "r+b") as f:
                    data = bytearray(f.read())
                    data[len(data) // 2] ^= 0xFF
                    f.seek(0)
                    f.write(bytes(data))
    with raises(tf.errors.DataLossError, CheckpointDataLoss, match="checkpoint"):
        tf.train.load_variable(path, "w")


# ----- tf.nn.embedding_lookup, and errors through the Estimator -------------------------------
def test_embedding_lookup_of_an_id_out_of_range_is_invalid_argument():
    table = np.arange(6, dtype=np.float32).reshape(3, 2)
    # TF 2.15.1 (GatherV2 on CPU): "indices[0] = 3 is not in [0, 3)"
    with raises(tf.errors.InvalidArgumentError, IdRangeError, match=r"^indices\[0\] = 3 is not"):
        tf.nn.embedding_lookup(table, np.array([3]))
    with raises(tf.errors.InvalidArgumentError, IdRangeError, match=r"^indices\[1\] = -1 is not"):
        tf.nn.embedding_lookup(table, np.array([0, -1]))
    np.testing.assert_array_equal(tf.nn.embedding_lookup(table, np.array([2, 0])), [[4, 5], [0, 1]])


def test_estimator_passes_the_inputs_tf_errors_through(tmp_path):
    path, raw = _records(tmp_path, n=8)
    damaged = tmp_path / "damaged.tfrecord"
    damaged.write_bytes(raw[: len(raw) // 2 + 5])  # cut inside the 5th record
    spec = {"a": tf.io.FixedLenFeature([1], tf.float32)}

    def model_fn(features, labels, mode):
        w = tf.get_variable("w", [1, 1])
        loss = tf.reduce_mean(tf.matmul(features["a"], w))
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    def input_fn(file, features=spec):
        return lambda: (
            tf.data.TFRecordDataset(str(file))
            .batch(2)
            .map(lambda r: tf.io.parse_example(r, features))
        )

    estimator = tf.estimator.Estimator(model_fn, str(tmp_path / "m"))
    with raises(tf.errors.DataLossError, CorruptRecordError, match="truncated record"):
        estimator.train(input_fn(damaged), steps=10)
    wrong = {"a": tf.io.FixedLenFeature([1], tf.int64)}
    with raises(tf.errors.InvalidArgumentError, ValueError, match="Data types don't match"):
        estimator.train(input_fn(path, wrong), steps=10)
