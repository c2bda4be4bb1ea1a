"""``estimator.io.protos``: TF's real example schema in a private descriptor pool."""

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool

from estimator.io import _schema, protos


def test_messages_round_trip_and_keep_the_wire_format():
    example = protos.Example()
    example.features.feature["age"].float_list.value.extend([39.0])
    example.features.feature["tags"].bytes_list.value.extend([b"a", b"b"])
    data = example.SerializeToString()
    # Field 1 (features, length-delimited) opens every non-empty Example: tag 0x0A.
    assert data[0] == 0x0A
    again = protos.Example.FromString(data)
    assert again == example
    assert list(again.features.feature["tags"].bytes_list.value) == [b"a", b"b"]


def test_the_pool_is_private():
    # Our messages live in a pool of their own, so TF's generated modules (which register
    # the same names in protobuf's default pool) can be imported beside them.
    assert protos.pool() is not descriptor_pool.Default()
    assert protos.Example.DESCRIPTOR.file.pool is protos.pool()
    assert protos.Example.DESCRIPTOR.full_name == "tensorflow.Example"


def test_add_files_accepts_a_dependent_file_and_repeats():
    extra = descriptor_pb2.FileDescriptorProto(
        name="test/extra.proto", package="test", dependency=[_names()[1]]
    )
    message = extra.message_type.add(name="Batch")
    field = message.field.add(name="examples", number=1, type=11, label=3)
    field.type_name = ".tensorflow.Example"
    protos.add_files([extra])
    protos.add_files([extra.SerializeToString()])  # the same file again: nothing happens
    batch = protos.message_class("test.Batch")()
    batch.examples.add().features.feature["x"].int64_list.value.append(3)
    assert protos.message_class("test.Batch").FromString(batch.SerializeToString()) == batch


def _names():
    return [descriptor_pb2.FileDescriptorProto.FromString(f).name for f in _schema.FILES]


def test_add_files_errors_name_the_file_and_the_fix():
    with pytest.raises(ValueError, match="Expected a serialized FileDescriptorProto"):
        protos.add_files([b"\xff\xff\xff"])
    lonely = descriptor_pb2.FileDescriptorProto(name="test/lonely.proto", dependency=["x.proto"])
    with pytest.raises(ValueError, match=r"test/lonely.proto depends on \['x.proto'\].*Add"):
        protos.add_files([lonely])
    changed = descriptor_pb2.FileDescriptorProto.FromString(_schema.FILES[1])
    changed.message_type[0].name = "Other"
    with pytest.raises(ValueError, match="already in estimator.io's descriptor pool"):
        protos.add_files([changed])
    with pytest.raises(KeyError, match="No message 'tensorflow.Nope'.*add_files"):
        protos.message_class("tensorflow.Nope")


def _fields(file):
    def walk(messages, prefix=""):
        for m in messages:
            yield from walk(m.nested_type, prefix + m.name + ".")
            for f in m.field:
                oneof = f.oneof_index if f.HasField("oneof_index") else None
                yield (prefix + m.name, f.name, f.number, f.type, f.label, f.type_name,
                       f.options.packed, oneof)  # fmt: skip

    return sorted(walk(file.message_type))


@pytest.mark.slow
def test_schema_equals_the_installed_tensorflow():
    from tensorflow.core.example import example_pb2, feature_pb2

    for ours, theirs in zip(_schema.FILES, (feature_pb2, example_pb2), strict=True):
        mine = descriptor_pb2.FileDescriptorProto.FromString(ours)
        tf_file = descriptor_pb2.FileDescriptorProto.FromString(theirs.DESCRIPTOR.serialized_pb)
        # What the wire format depends on (TF 2.21 adds a JSON-only option, jstype).
        assert _fields(mine) == _fields(tf_file)
        assert mine.name == tf_file.name and mine.package == tf_file.package
    # TF parses our bytes and we parse TF's.
    example = protos.Example()
    example.features.feature["x"].int64_list.value.extend([1, -2, 2**40])
    assert example_pb2.Example.FromString(example.SerializeToString()).features.feature[
        "x"
    ].int64_list.value == [1, -2, 2**40]
