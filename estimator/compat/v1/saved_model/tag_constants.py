"""``tf.saved_model.tag_constants``: the tags of a SavedModel's meta graphs, as TF 2.15
defines them (an export here is served under ``SERVING``)."""

from __future__ import annotations

from estimator.compat._unsupported import module_getattr

__all__ = ["GPU", "SERVING", "TPU", "TRAINING"]

__getattr__ = module_getattr("tf.saved_model.tag_constants", __name__)

SERVING = "serve"
TRAINING = "train"
GPU = "gpu"
TPU = "tpu"
