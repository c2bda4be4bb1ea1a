"""A TF-Serving-compatible REST model server for ``estimator.export`` artifacts.

``python -m estimator.serve --model_name census --model_base_path runs/census/export``
serves the newest version directory under ``model_base_path`` with TF Serving's REST API
(``GET /v1/models/{name}[/versions/{v}][/metadata]``, ``POST ...:predict``,
``:classify``, ``:regress``), reloads when a newer version appears, and answers bad
requests with TF Serving's status codes and ``{"error": "..."}`` bodies. Needs the
``serve`` extra (starlette, uvicorn).
"""

from estimator.serve._app import ServingError as ServingError
from estimator.serve._app import build_app as build_app
from estimator.serve._models import ModelWatcher as ModelWatcher

__all__ = ["build_app", "ModelWatcher", "ServingError"]
