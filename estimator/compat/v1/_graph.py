"""What TF keeps in the graph and compat keeps per ``model_fn`` run: collections.

TF 1 code reads graph collections (``tf.get_collection(tf.GraphKeys.LOSSES)``,
``UPDATE_OPS``, ``TRAINABLE_VARIABLES``) and adds to them. Here each run of ``model_fn``
(the Estimator's variable frame) carries a small dict of its own for the collections compat
fills (losses, summaries it was given); variables come from the frame itself. Outside
``model_fn`` (an ``input_fn``) there is no graph: reads give empty lists.
"""

from __future__ import annotations

from typing import Any

from estimator.model import variables as _variables

__all__ = ["GraphKeys", "collection", "add_to_collection", "frame_state"]


class GraphKeys:
    """TF 1's standard collection names (``tf.GraphKeys``)."""

    GLOBAL_VARIABLES = "variables"
    LOCAL_VARIABLES = "local_variables"
    MODEL_VARIABLES = "model_variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    SUMMARIES = "summaries"
    QUEUE_RUNNERS = "queue_runners"
    TABLE_INITIALIZERS = "table_initializer"
    ASSET_FILEPATHS = "asset_filepaths"
    MOVING_AVERAGE_VARIABLES = "moving_average_variables"
    REGULARIZATION_LOSSES = "regularization_losses"
    CONCATENATED_VARIABLES = "concatenated_variables"
    SAVERS = "savers"
    WEIGHTS = "weights"
    BIASES = "biases"
    ACTIVATIONS = "activations"
    UPDATE_OPS = "update_ops"
    LOSSES = "losses"
    SAVEABLE_OBJECTS = "saveable_objects"
    RESOURCES = "resources"
    LOCAL_RESOURCES = "local_resources"
    TRAINABLE_RESOURCE_VARIABLES = "trainable_resource_variables"
    INIT_OP = "init_op"
    LOCAL_INIT_OP = "local_init_op"
    READY_OP = "ready_op"
    READY_FOR_LOCAL_INIT_OP = "ready_for_local_init_op"
    SUMMARY_OP = "summary_op"
    GLOBAL_STEP = "global_step"
    EVAL_STEP = "eval_step"
    TRAIN_OP = "train_op"
    COND_CONTEXT = "cond_context"
    WHILE_CONTEXT = "while_context"
    METRIC_VARIABLES = "metric_variables"


def frame_state() -> dict[str, Any] | None:
    """The compat state of the ``model_fn`` run in progress, or None outside one."""
    frame = _variables.current_frame()
    if frame is None:
        return None
    state = frame.__dict__.get("_compat")
    if state is None:
        state = {"collections": {}, "minimize_losses": {}}
        frame.__dict__["_compat"] = state
    return state


def _variables_of(trainable_only: bool, scope: str | None) -> list:
    frame = _variables.current_frame()
    if frame is None:
        return []
    stores = [frame.trainable] if trainable_only else [frame.trainable, frame.non_trainable]
    out = []
    for store in stores:
        for name, value in store.items():
            if scope is None or name.startswith(scope):
                value = frame.assigned.get(name, value)
                frame.by_id[id(value)] = name
                out.append(value)
    return out


def collection(key: str, scope: str | None = None) -> list:
    """``tf.get_collection(key, scope)`` for the collections compat knows.

    ``TRAINABLE_VARIABLES`` / ``GLOBAL_VARIABLES`` / ``MODEL_VARIABLES`` give the values of
    the variables created so far whose names start with ``scope``; ``REGULARIZATION_LOSSES``
    the regularizers' values; ``UPDATE_OPS`` is always empty (batch-norm updates apply
    without it); anything else holds what was added with :func:`add_to_collection`.
    """
    if key in (GraphKeys.TRAINABLE_VARIABLES, GraphKeys.TRAINABLE_RESOURCE_VARIABLES):
        return _variables_of(True, scope)
    if key in (GraphKeys.GLOBAL_VARIABLES, GraphKeys.MODEL_VARIABLES):
        return _variables_of(False, scope)
    frame = _variables.current_frame()
    if key == GraphKeys.REGULARIZATION_LOSSES:
        return [] if frame is None else list(frame.regularization)
    if key == GraphKeys.UPDATE_OPS:
        return []
    state = frame_state()
    if state is None:
        return []
    return list(state["collections"].get(key, []))


def add_to_collection(name: str | list, value: Any) -> None:
    """``tf.add_to_collection`` (a no-op outside ``model_fn``)."""
    state = frame_state()
    if state is None:
        return
    for key in [name] if isinstance(name, str) else name:
        if key == GraphKeys.REGULARIZATION_LOSSES:
            frame = _variables.current_frame()
            frame.regularization.append(value)
        else:
            state["collections"].setdefault(key, []).append(value)
