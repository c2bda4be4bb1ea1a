"""Training beyond one ``train()`` call: ``train_and_evaluate`` and what it drives.

* ``specs`` — ``TrainSpec``, ``EvalSpec`` (TF 2.15's validation and messages).
* ``run`` — ``train_and_evaluate`` for the local, chief, worker and evaluator tasks.
* ``exporter`` — ``LatestExporter``, ``FinalExporter``, ``BestExporter``.
* ``in_memory_evaluator`` — ``InMemoryEvaluatorHook``.

They reach the Estimator's engine through ``Estimator.runtime``, never its private members.
"""

from estimator.training.exporter import BestExporter as BestExporter
from estimator.training.exporter import Exporter as Exporter
from estimator.training.exporter import FinalExporter as FinalExporter
from estimator.training.exporter import LatestExporter as LatestExporter
from estimator.training.in_memory_evaluator import InMemoryEvaluatorHook as InMemoryEvaluatorHook
from estimator.training.run import train_and_evaluate as train_and_evaluate
from estimator.training.specs import EvalSpec as EvalSpec
from estimator.training.specs import TrainSpec as TrainSpec

__all__ = [
    "BestExporter",
    "EvalSpec",
    "Exporter",
    "FinalExporter",
    "InMemoryEvaluatorHook",
    "LatestExporter",
    "TrainSpec",
    "train_and_evaluate",
]
