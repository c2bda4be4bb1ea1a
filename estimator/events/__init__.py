"""What training and evaluation leave for people and tools to read: TensorBoard event files
(``files``: tensorboardX's writer, TF's ``FileWriterCache``) and the record of evaluations in
an ``eval_dir`` (``eval_history``: ``eval_results.jsonl``, read back by early stopping,
``BestExporter`` and ``read_eval_metrics``).
"""

from estimator.events.eval_history import EVAL_RESULTS as EVAL_RESULTS
from estimator.events.eval_history import read_eval_metrics as read_eval_metrics
from estimator.events.eval_history import write_eval_results as write_eval_results
from estimator.events.files import FLUSH_SECS as FLUSH_SECS
from estimator.events.files import add_text as add_text
from estimator.events.files import flush_writers as flush_writers
from estimator.events.files import writer_for as writer_for

__all__ = ["read_eval_metrics"]
