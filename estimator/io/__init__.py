"""Files and storage: where paths point, and reading and writing them.

* ``paths`` — which paths this package can write (:func:`local_path`): a URL
  (``gs://``, ``s3://``, ...) is refused where a ``model_dir``, export directory or
  checkpoint is given, before anything is created.

This is the bottom layer: it knows nothing of the engine.
"""

from estimator.io.paths import local_path as local_path

__all__ = ["local_path"]
