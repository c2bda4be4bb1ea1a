"""The model layer: what a ``model_fn`` writes and returns.

* ``spec`` — :class:`EstimatorSpec`, validated per mode as TF 2.15.
* ``variables`` — ``get_variable``, ``variable_scope``, ``assign``, ``identity``: variables
  by name inside a traced ``model_fn`` (the :class:`~estimator.model.variables.Frame`).
* ``function`` — :class:`ModelFunction`: the one way the engine and the export writer run
  ``model_fn``.
* ``padding`` — ``masks_padding``/``row_mask``: a shorter batch padded into the full
  batches' program, for a ``model_fn`` that masks its padded examples.
* ``export_output``, ``strings``, ``train_op`` — serving outputs, string predictions,
  per-scope optimizers.

Nothing here runs a step or touches the disk (that is ``estimator.engine``).
"""

from estimator.model.function import ModelFunction as ModelFunction
from estimator.model.spec import EstimatorSpec as EstimatorSpec

__all__ = ["EstimatorSpec", "ModelFunction"]
