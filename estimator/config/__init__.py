"""Where and how an Estimator runs: :class:`RunConfig` (``tf.estimator.RunConfig``), the
cluster a ``TF_CONFIG`` describes (``tf_config``), the dtype policy object
(``dtype_policies``) and the process-wide switches this package sets in JAX (``platform``).
"""

from estimator.config.dtype_policies import DTypePolicy as DTypePolicy
from estimator.config.run_config import RunConfig as RunConfig
from estimator.config.tf_config import TaskType as TaskType

__all__ = ["DTypePolicy", "RunConfig", "TaskType"]
