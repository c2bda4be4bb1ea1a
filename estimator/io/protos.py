"""TensorFlow's ``tf.Example`` protos without TensorFlow: ``Example``, ``SequenceExample``,
``Features``, ``Feature``, ``BytesList``, ``FloatList``, ``Int64List``, ``FeatureList``,
``FeatureLists`` (``tf.train.*``).

The message classes come from the real schema (``tensorflow/core/example/feature.proto``
and ``example.proto`` as protoc compiled them, see ``_schema``) loaded into a *private*
``descriptor_pool.DescriptorPool``: a process that also imports TensorFlow (whose
generated modules register the same files in protobuf's default pool) sees no clash, and
the bytes are the same on the wire. Other real-schema files (TF Serving's ``predict.proto``,
...) can join the same pool with :func:`add_files`, so their messages can refer to these.

Synopsis::

    from estimator.io import protos

    example = protos.Example()
    example.features.feature["age"].float_list.value.append(39.0)
    data = example.SerializeToString()
    assert protos.Example.FromString(data) == example
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from estimator.io import _schema

__all__ = [
    "BytesList",
    "Example",
    "Feature",
    "FeatureList",
    "FeatureLists",
    "Features",
    "FloatList",
    "Int64List",
    "SequenceExample",
    "add_files",
    "message_class",
    "pool",
]

_POOL = descriptor_pool.DescriptorPool()
_LOCK = threading.Lock()
_ADDED: dict[str, bytes] = {}  # file name -> serialized FileDescriptorProto


def pool() -> descriptor_pool.DescriptorPool:
    """The private descriptor pool holding ``feature.proto``, ``example.proto`` and the
    files given to :func:`add_files`."""
    return _POOL


def add_files(serialized_files: Iterable[bytes | descriptor_pb2.FileDescriptorProto]) -> None:
    """Adds real-schema ``.proto`` files to the private pool, in dependency order.

    Each file is a ``FileDescriptorProto`` (or its serialized bytes), as protoc writes it
    (``descriptor_set_out``, or a generated module's ``DESCRIPTOR.serialized_pb``). Adding a
    file that is already there with the same content does nothing.

    Args:
      serialized_files: the files; each one's dependencies must be in the pool already or
        come earlier in the list.

    Raises:
      ValueError: a file's bytes are not a ``FileDescriptorProto``; a file of that name is
        already in the pool with different content; or a dependency is missing (the
        message names the file and the dependency).
    """
    with _LOCK:
        for item in serialized_files:
            if isinstance(item, descriptor_pb2.FileDescriptorProto):
                proto, blob = item, item.SerializeToString()
            else:
                blob = bytes(item)
                try:
                    proto = descriptor_pb2.FileDescriptorProto.FromString(blob)
                except Exception as err:  # protobuf's DecodeError
                    raise ValueError(
                        f"Expected a serialized FileDescriptorProto (protoc's output for one "
                        f".proto file); got {len(blob)} bytes that do not parse ({err})."
                    ) from None
            name = proto.name
            if name in _ADDED:
                if _ADDED[name] != blob and _canonical(_ADDED[name]) != _canonical(blob):
                    raise ValueError(
                        f"{name} is already in estimator.io's descriptor pool with a different "
                        "schema. Add each .proto file once, from one version."
                    )
                continue
            missing = [d for d in proto.dependency if d not in _ADDED]
            if missing:
                raise ValueError(
                    f"{name} depends on {missing}, which are not in estimator.io's descriptor "
                    "pool. Add the dependencies first (in the same call or an earlier one)."
                )
            _POOL.Add(proto)
            _ADDED[name] = blob


def _canonical(blob: bytes) -> bytes:
    return descriptor_pb2.FileDescriptorProto.FromString(blob).SerializeToString(deterministic=True)


def message_class(full_name: str) -> type:
    """The generated message class of ``full_name`` (``"tensorflow.Example"``) in the
    private pool.

    Raises:
      KeyError: the pool has no such message (the message lists the files it holds).
    """
    try:
        descriptor = _POOL.FindMessageTypeByName(full_name)
    except KeyError:
        raise KeyError(
            f"No message {full_name!r} in estimator.io's descriptor pool (files: "
            f"{sorted(_ADDED)}). Add its .proto file with estimator.io.protos.add_files."
        ) from None
    return message_factory.GetMessageClass(descriptor)


add_files(_schema.FILES)

BytesList = message_class("tensorflow.BytesList")
FloatList = message_class("tensorflow.FloatList")
Int64List = message_class("tensorflow.Int64List")
Feature = message_class("tensorflow.Feature")
Features = message_class("tensorflow.Features")
FeatureList = message_class("tensorflow.FeatureList")
FeatureLists = message_class("tensorflow.FeatureLists")
Example = message_class("tensorflow.Example")
SequenceExample = message_class("tensorflow.SequenceExample")
