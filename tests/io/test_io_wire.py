"""The NumPy wire reader (``estimator.io._wire``) against protobuf record by record
(``_columns.collect_protobuf``): the same columns for every record, including those whose
layout the fast reader hands to protobuf."""

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from estimator.io import _columns, _wire, protos


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _entry(key: bytes, feature: bytes) -> bytes:
    return _field(1, _field(1, key) + _field(2, feature))


def _example(*entries: bytes) -> bytes:
    return _field(1, b"".join(entries))


def assert_same(records, keys):
    fast = _wire.collect(records, keys)
    slow = _columns.collect_protobuf(records, keys)
    for key in keys:
        for a, b in zip(fast[key], slow[key], strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape, key
            if a.dtype.kind == "f":
                np.testing.assert_array_equal(a.view(np.int32), b.view(np.int32))
            else:
                assert a.tolist() == b.tolist(), key


def _declined(records, keys):
    calls = []
    original = _wire.collect_protobuf
    _wire.collect_protobuf = lambda r, k: calls.append(len(r)) or original(r, k)
    try:
        _wire.collect(records, keys)
    finally:
        _wire.collect_protobuf = original
    return sum(calls)


FLOATS = _field(2, _field(1, struct.pack("<2f", 1.5, -2.0)))
UNPACKED_FLOATS = _field(2, b"\x0d" + struct.pack("<f", 1.5) + b"\x0d" + struct.pack("<f", 3.0))
INTS = _field(3, _field(1, _varint(-1) + _varint(300) + _varint(2**62)))
STRINGS = _field(1, _field(1, b"a" * 200) + _field(1, b"") + _field(1, b"\xff"))
ODD = {
    "unpacked floats": _example(_entry(b"f", UNPACKED_FLOATS)),
    "repeated key (last wins)": _example(_entry(b"f", FLOATS), _entry(b"f", UNPACKED_FLOATS)),
    "unknown Example field": _example(_entry(b"f", FLOATS)) + _field(5, b"xyz"),
    "features twice (merged)": _example(_entry(b"f", FLOATS)) + _example(_entry(b"i", INTS)),
    "value before key": _field(1, _field(1, _field(2, FLOATS) + _field(1, b"f"))),
    "two lists in a Feature": _example(_entry(b"f", FLOATS + _field(3, _field(1, b"\x01")))),
}


def test_common_layouts_are_read_without_protobuf():
    long_key = b"a_feature_key_longer_than_16_bytes"
    records = [
        _example(_entry(b"f", FLOATS), _entry(b"i", INTS), _entry(b"s", STRINGS)),
        _example(_entry(long_key, INTS), _entry(b"s", _field(1, b""))),  # empty bytes list
        b"",  # an empty Example
        _example(_entry(b"f", b"")),  # an empty Feature: absent
        _example(),
    ]
    keys = ["f", "i", "s", long_key.decode(), "absent"]
    assert _declined(records, keys) == 0
    assert_same(records, keys)
    column = _wire.collect(records, keys)["i"]
    assert column.int_values.tolist() == [-1, 300, 2**62]


@pytest.mark.parametrize("name", list(ODD))
def test_odd_layouts_go_to_protobuf_with_the_same_result(name):
    records = [_example(_entry(b"f", FLOATS)), ODD[name], _example(_entry(b"i", INTS))]
    assert _declined(records, ["f", "i"]) >= 1
    assert_same(records, ["f", "i"])


def test_a_record_that_is_not_an_example_raises_with_its_index():
    records = [_example(_entry(b"f", FLOATS)), b"\x0a\x05ab"]  # a length past the end
    with pytest.raises(_columns.RecordError) as info:
        _wire.collect(records, ["f"])
    assert info.value.index == 1


def _proto_example(features):
    example = protos.Example()
    for key, (kind, values) in features.items():
        getattr(example.features.feature[key], kind).value.extend(values)
    return example.SerializeToString()


_values = st.one_of(
    st.tuples(st.just("float_list"), st.lists(st.floats(width=32, allow_nan=False), max_size=4)),
    st.tuples(st.just("int64_list"), st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4)),
    st.tuples(st.just("bytes_list"), st.lists(st.binary(max_size=140), max_size=4)),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["a", "bb", "key_c"]), _values), max_size=8))
def test_random_examples_read_the_same(examples):
    records = [_proto_example(e) for e in examples]
    assert _declined(records, ["a", "bb", "key_c"]) == 0
    assert_same(records, ["a", "bb", "key_c", "zz"])


def test_short_strings_at_the_end_of_the_batch_with_long_ones_before():
    # Strings of up to 64 bytes are cut as one [n, width] array; the last record's short
    # string lies within `width` of the batch's end.
    records = [
        _example(_entry(b"s", _field(1, _field(1, b"x" * 60)))),
        _example(_entry(b"s", _field(1, _field(1, b"ab") + _field(1, b"c\x00d")))),
    ]
    assert _declined(records, ["s"]) == 0
    assert_same(records, ["s"])
    assert _wire.collect(records, ["s"])["s"].bytes_values.tolist() == [b"x" * 60, b"ab", b"c\x00d"]
