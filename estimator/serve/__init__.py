"""A TF-Serving-compatible model server for ``estimator.export`` artifacts: gRPC and REST.

``python -m estimator.serve --model_name census --model_base_path runs/census/export
--port 8500 --rest_api_port 8501`` serves the newest version directory under
``model_base_path`` with TF Serving's gRPC API (``tensorflow.serving.PredictionService``:
``Predict``, ``Classify``, ``Regress``, ``MultiInference``, ``GetModelMetadata``;
``ModelService.GetModelStatus``) on ``--port`` and its REST API
(``GET /v1/models/{name}[/versions/{v}][/metadata]``, ``POST ...:predict``,
``:classify``, ``:regress``) on ``--rest_api_port``, from one process over the same loaded
versions and batcher; ``--model_config_file`` serves several models. It reloads when a
newer version appears and answers bad requests with TF Serving's status codes and messages.
Both APIs are thin transports over one :class:`ServingCore` (``_core``), as TF Serving's REST
handler calls the implementations its gRPC service calls.
TensorFlow is never imported: TF Serving's messages come from its compiled schema
(``_protos``). Needs the ``serve`` extra (grpcio, starlette, uvicorn).
"""

from estimator.serve._app import build_app as build_app
from estimator.serve._core import ServingCore as ServingCore
from estimator.serve._core import ServingError as ServingError
from estimator.serve._models import ModelWatcher as ModelWatcher

__all__ = ["build_app", "ModelWatcher", "ServingCore", "ServingError"]
