"""TFRecord files: framing, compression, patterns, interleaving, sharding, damaged files,
and round trips with TensorFlow (both ways, all three compressions)."""

import gzip
import os
import struct

import pytest

from estimator.io import tfrecord

COMPRESSIONS = ["", "GZIP", "ZLIB"]


def _records(n, prefix=b"r"):
    return [prefix + str(i).encode() * (i % 7) for i in range(n)]


def test_masked_crc32c_of_known_values():
    # CRC32C("123456789") = 0xE3069283 (the check value of the Castagnoli polynomial);
    # masked: ((c >> 15) | (c << 17)) + 0xa282ead8 mod 2**32.
    crc = 0xE3069283
    expected = (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    assert tfrecord.masked_crc32c(b"123456789") == expected


def test_frame_layout_is_tfs(tmp_path):
    path = tmp_path / "one.tfrecord"
    with tfrecord.TFRecordWriter(path) as writer:
        writer.write(b"abc")
    data = path.read_bytes()
    # 8 bytes length, 4 bytes masked CRC of it, the data, 4 bytes masked CRC of the data.
    assert len(data) == 8 + 4 + 3 + 4
    assert struct.unpack("<Q", data[:8]) == (3,)
    assert struct.unpack("<I", data[8:12]) == (tfrecord.masked_crc32c(data[:8]),)
    assert data[12:15] == b"abc"
    assert struct.unpack("<I", data[15:]) == (tfrecord.masked_crc32c(b"abc"),)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_round_trip_each_compression(tmp_path, compression):
    path = tmp_path / "data.tfrecord"
    records = _records(50) + [b""]
    tfrecord.write_records(path, records, compression)
    assert list(tfrecord.tf_record_iterator(path, compression)) == records
    assert list(tfrecord.read_records(str(path), compression)) == records
    if compression == "GZIP":
        assert path.read_bytes()[:2] == b"\x1f\x8b"


def _write_files(tmp_path, n_files, per_file):
    paths = []
    for f in range(n_files):
        path = tmp_path / f"part-{f:02d}.tfrecord"
        tfrecord.write_records(path, [f"{f}-{i}".encode() for i in range(per_file)])
        paths.append(str(path))
    return paths


def test_patterns_lists_and_interleaving(tmp_path):
    _write_files(tmp_path, 3, 3)
    pattern = str(tmp_path / "part-*.tfrecord")
    sequential = list(tfrecord.read_records(pattern))
    assert sequential == [f"{f}-{i}".encode() for f in range(3) for i in range(3)]
    # cycle_length 2, block_length 2: 0-0 0-1 | 1-0 1-1 | 0-2 (file 0 ends: file 2 opens)
    # | 1-2 | 2-0 2-1 | 2-2
    interleaved = list(tfrecord.read_records([pattern], cycle_length=2, block_length=2))
    assert interleaved == [
        b"0-0", b"0-1", b"1-0", b"1-1", b"0-2", b"1-2", b"2-0", b"2-1", b"2-2",
    ]  # fmt: skip


def test_shards_are_disjoint_and_cover_the_files(tmp_path):
    _write_files(tmp_path, 4, 5)
    pattern = str(tmp_path / "*.tfrecord")
    everything = sorted(tfrecord.read_records(pattern))
    for num_shards in (2, 3, 8):  # 8 > 4 files: records are sharded instead of files
        shards = [
            list(tfrecord.read_records(pattern, num_shards=num_shards, shard_index=i))
            for i in range(num_shards)
        ]
        flat = [r for shard in shards for r in shard]
        assert sorted(flat) == everything
        assert len(set(flat)) == len(flat)
    # 2 shards of 4 files: files 0 and 2, then 1 and 3 (Dataset.list_files(...).shard(2, i)).
    first = list(tfrecord.read_records(pattern, num_shards=2, shard_index=0))
    assert {r.split(b"-")[0] for r in first} == {b"0", b"2"}
    with pytest.raises(ValueError, match=r"Shard index 2 is not in \[0, 2\)"):
        list(tfrecord.read_records(pattern, num_shards=2, shard_index=2))


def test_no_match_names_the_pattern(tmp_path):
    with pytest.raises(ValueError, match="No files matched pattern: .*nothing-\\*"):
        tfrecord.list_files(str(tmp_path / "nothing-*"))


def _damaged(tmp_path, name, transform, compression=""):
    path = tmp_path / name
    tfrecord.write_records(path, _records(10), compression)
    path.write_bytes(transform(path.read_bytes()))
    return str(path)


def test_truncated_file_names_file_offset_and_fix(tmp_path):
    path = _damaged(tmp_path, "cut.tfrecord", lambda b: b[:-3])
    # Records 0..8 are 16 + len bytes each: r(1+0), r0... offsets add up to the last one.
    last = sum(16 + len(r) for r in _records(9))
    with pytest.raises(tfrecord.CorruptRecordError) as info:
        list(tfrecord.read_records(path))
    assert info.value.offset == last
    assert f"{path}: truncated record at byte offset {last}" in str(info.value)
    assert "ignore_errors=True" in str(info.value)


def test_corrupt_data_crc(tmp_path):
    def flip(b):
        b = bytearray(b)
        b[12] ^= 0xFF  # the first byte of the first record's data
        return bytes(b)

    path = _damaged(tmp_path, "flip.tfrecord", flip)
    with pytest.raises(tfrecord.CorruptRecordError, match="byte offset 0: the CRC32C of its 1 "):
        list(tfrecord.read_records(path))


def _big_records():
    # ~2.6 MB: frames cross the reader's 1 MB chunks, and one record is larger than a chunk.
    sizes = [1, 700_000, 3, 300_000, 1_500_000, 0, 90_000, 5]
    return [bytes([i]) * n for i, n in enumerate(sizes)] + _records(2000)


def _offsets(records):
    return [sum(16 + len(r) for r in records[:i]) for i in range(len(records))]


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_frames_across_chunks_read_back_exactly(tmp_path, compression):
    path = tmp_path / "big.tfrecord"
    records = _big_records()
    tfrecord.write_records(path, records, compression)
    assert list(tfrecord.read_records(str(path), compression)) == records


@pytest.mark.parametrize("damage", ["data", "small length", "huge length"])
def test_damage_after_the_first_chunk_names_its_record(tmp_path, damage):
    # Record 6 starts past the first megabyte; records 0-5 come out before the error.
    records = _big_records()
    at = _offsets(records)[6]
    path = tmp_path / "damaged.tfrecord"
    tfrecord.write_records(path, records)
    data = bytearray(path.read_bytes())
    if damage == "data":
        data[at + 12 + 100] ^= 0x01
    else:  # a length that still fits in the chunk, or one that runs past the file
        data[at : at + 8] = struct.pack("<Q", 10 if damage == "small length" else 1 << 40)
    path.write_bytes(bytes(data))
    read = []
    with pytest.raises(tfrecord.CorruptRecordError) as info:
        for record in tfrecord.read_records(str(path)):
            read.append(record)
    assert read == records[:6]
    assert info.value.offset == at
    what = "its 90000 bytes of data" if damage == "data" else "the length does not match"
    assert f"{path}: corrupt record at byte offset {at}: the CRC32C of {what}" in str(info.value)


def test_wrong_compression_says_which_to_use(tmp_path):
    path = _damaged(tmp_path, "z.tfrecord.gz", lambda b: b, "GZIP")
    with pytest.raises(tfrecord.CorruptRecordError, match="pass compression_type='GZIP'"):
        list(tfrecord.read_records(path))
    plain = _damaged(tmp_path, "plain.tfrecord", lambda b: b)
    with pytest.raises(tfrecord.CorruptRecordError, match="cannot decompress the gzip stream"):
        list(tfrecord.read_records(plain, "GZIP"))
    zpath = _damaged(tmp_path, "z.tfrecord", lambda b: b, "ZLIB")
    with pytest.raises(tfrecord.CorruptRecordError, match="compression_type='ZLIB'"):
        list(tfrecord.read_records(zpath))
    cut = _damaged(tmp_path, "cut.tfrecord.gz", lambda b: b[: len(b) // 2], "GZIP")
    with pytest.raises(tfrecord.CorruptRecordError, match="truncated or damaged"):
        list(tfrecord.read_records(cut, "GZIP"))


def test_ignore_errors_skips_the_rest_of_a_damaged_file_and_counts_it(tmp_path):
    good = _write_files(tmp_path, 2, 3)
    bad = _damaged(tmp_path, "part-01x.tfrecord", lambda b: b[:-3])
    stats = tfrecord.ReadStats()
    records = list(tfrecord.read_records([*good, bad], ignore_errors=True, stats=stats))
    assert len(records) == 6 + 9  # the damaged file's first 9 records are good
    assert stats.records == 15
    assert [(p, o) for p, o, _ in stats.skipped] == [(bad, sum(16 + len(r) for r in _records(9)))]


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="compression_type must be '', 'GZIP' or 'ZLIB'"):
        tfrecord.TFRecordWriter(tmp_path / "x", "LZ4")
    with pytest.raises(ValueError, match="compression_level must be in"):
        tfrecord.TFRecordOptions("GZIP", compression_level=12)
    with pytest.raises(
        ValueError, match="file 'nosuch://bucket/x.tfrecord' is a nosuch:// URL, but no file sys"
    ):
        tfrecord.TFRecordWriter("nosuch://bucket/x.tfrecord")
    assert not os.path.exists("nosuch:")
    with tfrecord.TFRecordWriter(tmp_path / "y") as writer, pytest.raises(TypeError, match="bytes"):
        writer.write("text")


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_a_failed_write_leaves_nothing(tmp_path, compression):
    path = tmp_path / "out.tfrecord"
    with pytest.raises(RuntimeError, match="boom"):
        with tfrecord.TFRecordWriter(path, compression) as writer:
            writer.write(b"a")
            raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []
    writer = tfrecord.TFRecordWriter(path, compression)
    writer.write(b"a")
    assert not path.exists()  # not before close()
    writer.close()
    assert list(tfrecord.tf_record_iterator(path, compression)) == [b"a"]
    assert os.listdir(tmp_path) == ["out.tfrecord"]


@pytest.mark.slow
@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_tensorflow_reads_ours_and_we_read_tensorflows(tmp_path, compression):
    import tensorflow as tf

    records = _records(40) + [b"", bytes(range(256)) * 40]
    ours = tmp_path / "ours.tfrecord"
    tfrecord.write_records(ours, records, compression)
    read = [r.numpy() for r in tf.data.TFRecordDataset(str(ours), compression_type=compression)]
    assert read == records
    theirs = tmp_path / "theirs.tfrecord"
    with tf.io.TFRecordWriter(str(theirs), tf.io.TFRecordOptions(compression)) as writer:
        for r in records:
            writer.write(r)
    assert list(tfrecord.read_records(str(theirs), compression)) == records
    if compression == "GZIP":
        assert gzip.decompress(theirs.read_bytes()) == gzip.decompress(ours.read_bytes())


def test_paths_and_reader_argument_errors(tmp_path):
    from estimator.io import fs

    with pytest.raises(FileNotFoundError, match=r"No such file or directory \(check the path"):
        fs.open_file(tmp_path / "missing", "rb")
    with pytest.raises(ValueError, match="file pattern 'nosuch://b/train-\\*' is a nosuch:// URL"):
        tfrecord.list_files("nosuch://b/train-*")
    with pytest.raises(ValueError, match="memory://b/x: object stores cannot append"):
        fs.open_file("memory://b/x", "ab")
    tfrecord.write_records(tmp_path / "a.tfrecord", [b"x"])
    with pytest.raises(ValueError, match="cycle_length and block_length must be >= 1; got 0, 1"):
        list(tfrecord.read_records(str(tmp_path / "a.tfrecord"), cycle_length=0))


@pytest.mark.slow  # a subprocess that compiles the reader afresh
def test_reading_works_where_numba_cannot_cache(tmp_path):
    # A read-only installation with no writable home (some containers): numba finds no
    # place for its cache. The reader must still import and read (compiling in the
    # process), and say how to keep the compiled code.
    import subprocess
    import sys

    path = tmp_path / "data.tfrecord"
    tfrecord.write_records(path, _records(30))
    script = (
        "import numba.core.caching as c\n"
        "c.CacheImpl._locator_classes = []\n"  # no cache location, as described above
        "from estimator.io import tfrecord\n"
        f"print(len(list(tfrecord.read_records({str(path)!r}))))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["30"]
    assert "numba cannot cache the TFRecord reader's compiled code" in done.stderr
    assert "Set NUMBA_CACHE_DIR to a writable folder" in done.stderr


def test_warming_compiles_what_reading_and_parsing_use(tmp_path):
    # warm() must compile each loop for the argument types real reads and parses pass
    # (read-only buffers of bytes included): after it, they add no second specialization.
    import numpy as np

    from estimator import io
    from estimator.inputs import engine
    from estimator.io import _kernels

    _kernels.warm()
    path = tmp_path / "w.tfrecord"
    columns = {"s": np.array(["a", "bc"], object), "x": np.arange(2.0, dtype=np.float32)}
    io.write_examples(str(path), columns, compression_type="")
    records = list(tfrecord.read_records(str(path)))
    io.parse_example(records, {"s": io.FixedLenFeature([], str), "x": io.VarLenFeature(np.float32)})
    chunks = list(tfrecord.read_record_chunks(str(path)))
    io.parse_example(chunks[0], {"x": io.VarLenFeature(np.float32)})  # records in a buffer
    list(engine.Shuffle(engine.Source(lambda: chunks * 2), 1, np.random.default_rng))
    loops = [_kernels.frames, _kernels.scan, _kernels.gather, _kernels.padded]
    loops += [_kernels.shuffle_draws, _kernels.record_crcs]
    assert [len(f.signatures) for f in loops] == [1] * len(loops)


def test_record_checksums_and_record_gathering():
    """The compiled CRC32C of records (the CPU's instruction where it has one, the tables
    elsewhere) is crc32c's; records gathered from several buffers come back byte for byte,
    whether whole buffers are joined or records copied one by one."""
    import crc32c
    import numpy as np

    from estimator.io import _kernels
    from estimator.io._records import Records

    data = os.urandom(5000)
    starts = np.array([0, 5, 100, 1000, 3, 7, 4990], np.int64)
    lengths = np.array([0, 17, 800, 3999, 1, 9, 10], np.int64)
    expected = [crc32c.crc32c(data[s : s + n]) for s, n in zip(starts, lengths, strict=True)]
    arr = np.frombuffer(data, np.uint8)
    assert _kernels._record_crcs_tables(arr, starts, lengths).tolist() == expected
    if _kernels._SSE42:
        assert _kernels._record_crcs_sse42(arr, starts, lengths).tolist() == expected
    whole = Records(data, starts, lengths)
    parts = [whole.take(slice(1, 4)), Records.from_list([b"xy", b""]), whole.take([6, 1])]
    joined = Records.concat(parts)  # buffers mostly used: joined whole
    sparse = Records.concat([whole.take([1]), whole.take([5]), whole.take([6])])  # copied
    assert joined.tolist() == [r for p in parts for r in p.tolist()]
    assert sparse.tolist() == [data[5:22], data[7:16], data[4990:5000]]
    assert len(sparse.data) == 17 + 9 + 10  # only the records were copied
