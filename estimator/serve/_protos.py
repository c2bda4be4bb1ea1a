"""TF Serving's gRPC messages and services, from its real schema, without TensorFlow.

The descriptors in ``_descriptors.py`` were compiled by protoc from TF Serving's and TF's
``.proto`` files (``tools/gen_serving_descriptors.py`` takes them from the
``tensorflow-serving-api`` wheel; a test checks they are equal). They join
``estimator.io``'s private ``DescriptorPool`` (which holds ``example.proto`` and
``feature.proto``), not protobuf's default pool, so a process that also imports TensorFlow
(or ``tensorflow-serving-api``) holds both without a clash: the full names are TF
Serving's (``tensorflow.serving.PredictRequest``), so the wire format, the gRPC method paths
and ``google.protobuf.Any`` type URLs are TF Serving's too.

Usage::

    from estimator.serve._protos import messages
    request = messages.PredictRequest.FromString(data)
"""

import base64
import functools
import zlib
from types import SimpleNamespace

from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory, wrappers_pb2

from estimator.io import protos as io_protos
from estimator.serve import _descriptors

PREDICTION_SERVICE = "tensorflow.serving.PredictionService"
MODEL_SERVICE = "tensorflow.serving.ModelService"

# Messages the server reads or writes, by their TF Serving / TF full names.
_MESSAGES = (
    "tensorflow.serving.ModelSpec",
    "tensorflow.serving.PredictRequest",
    "tensorflow.serving.PredictResponse",
    "tensorflow.serving.ClassificationRequest",
    "tensorflow.serving.ClassificationResponse",
    "tensorflow.serving.ClassificationResult",
    "tensorflow.serving.Classifications",
    "tensorflow.serving.Class",
    "tensorflow.serving.RegressionRequest",
    "tensorflow.serving.RegressionResponse",
    "tensorflow.serving.RegressionResult",
    "tensorflow.serving.Regression",
    "tensorflow.serving.MultiInferenceRequest",
    "tensorflow.serving.MultiInferenceResponse",
    "tensorflow.serving.InferenceResult",
    "tensorflow.serving.Input",
    "tensorflow.serving.GetModelMetadataRequest",
    "tensorflow.serving.GetModelMetadataResponse",
    "tensorflow.serving.SignatureDefMap",
    "tensorflow.serving.GetModelStatusRequest",
    "tensorflow.serving.GetModelStatusResponse",
    "tensorflow.serving.ModelVersionStatus",
    "tensorflow.serving.ReloadConfigRequest",
    "tensorflow.serving.ReloadConfigResponse",
    "tensorflow.serving.ModelServerConfig",
    "tensorflow.SignatureDef",
    "tensorflow.TensorInfo",
    "tensorflow.TensorProto",
    "tensorflow.TensorShapeProto",
    "tensorflow.Example",
    "tensorflow.Features",
    "tensorflow.Feature",
)


@functools.cache
def pool() -> descriptor_pool.DescriptorPool:
    """``estimator.io``'s private pool, with protobuf's ``any.proto`` and ``wrappers.proto``
    and TF Serving's files added (once)."""
    files = descriptor_pb2.FileDescriptorSet.FromString(
        zlib.decompress(base64.b64decode("".join(_descriptors.FILES)))
    )
    well_known = []
    for module in (any_pb2, wrappers_pb2):
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        well_known.append(proto)
    io_protos.add_files([*well_known, *files.file])
    return io_protos.pool()


@functools.cache
def _namespace() -> SimpleNamespace:
    p = pool()
    classes = {
        name.rsplit(".", 1)[1]: message_factory.GetMessageClass(p.FindMessageTypeByName(name))
        for name in _MESSAGES
    }
    data_type = p.FindEnumTypeByName("tensorflow.DataType")
    return SimpleNamespace(
        **classes,
        DataType=data_type,
        ModelVersionStatus_State=p.FindEnumTypeByName(
            "tensorflow.serving.ModelVersionStatus.State"
        ),
        ErrorCode=p.FindEnumTypeByName("tensorflow.error.Code"),
    )


class _Messages:
    """Attribute access to the message classes (``messages.PredictRequest``), built on first
    use so that importing this module costs nothing."""

    def __getattr__(self, name: str):
        return getattr(_namespace(), name)


messages = _Messages()
