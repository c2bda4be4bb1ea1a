"""``tf.estimator.inputs``: ``numpy_input_fn`` (``estimator.inputs``) and ``pandas_input_fn``.

``pandas_input_fn`` takes TF 1's arguments and checks, then feeds the DataFrame's columns
(NumPy arrays, by name) through ``numpy_input_fn``: the same batches, epochs and shuffling
(TF's queue-runner reading is replaced by the Estimator's background prefetch). It needs
the ``pandas`` package (the ``compat`` extra).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from estimator.compat._unsupported import module_getattr
from estimator.inputs import numpy_input_fn as numpy_input_fn

__all__ = ["numpy_input_fn", "pandas_input_fn"]

__getattr__ = module_getattr("tf.estimator.inputs", __name__)


def pandas_input_fn(
    x,
    y=None,
    batch_size: int = 128,
    num_epochs: int | None = 1,
    shuffle: bool | None = None,
    queue_capacity: int = 1000,
    num_threads: int = 1,
    target_column: str = "target",
) -> Callable:
    """``tf.estimator.inputs.pandas_input_fn``: an ``input_fn`` over a pandas DataFrame.

    Args:
      x: a ``pandas.DataFrame``: each column a feature, by its name.
      y: a ``pandas.Series`` (the labels) or ``DataFrame`` (a dict of labels), or None;
        its index must equal ``x``'s.
      batch_size, num_epochs, queue_capacity, num_threads: as ``numpy_input_fn``.
      shuffle: required, a bool: read in a new random order each epoch.
      target_column: the name ``y`` would take among ``x``'s columns (TF checks it is free).

    Returns:
      ``input_fn() -> (features, labels)`` (``features`` alone without ``y``).

    Raises:
      TypeError: pandas is not installed, or ``target_column`` is not a string (TF's
        messages).
      ValueError: ``shuffle`` not a bool, ``x`` already has ``target_column``, or the
        indexes of ``x`` and ``y`` differ (TF's messages).
    """
    try:
        import pandas as pd
    except ImportError:
        raise TypeError(
            "pandas_input_fn should not be called without pandas installed (pip install "
            "pandas, or jax-estimator[compat])"
        ) from None
    if not isinstance(shuffle, bool):
        raise ValueError(
            "shuffle must be provided and explicitly set as boolean (it is recommended to set "
            f"it as True for training); got {shuffle}"
        )
    if not isinstance(target_column, str):
        raise TypeError("target_column must be a string type")
    features = {str(name): x[name].to_numpy() for name in x.columns}
    labels = None
    if y is not None:
        if target_column in x:
            raise ValueError(
                f"Cannot use name {target_column} for target column: DataFrame already has a "
                f"column with that name: {x.columns}"
            )
        if not np.array_equal(x.index, y.index):
            raise ValueError(
                f"Index for x and y are mismatched.\nIndex for x: {x.index}\n"
                f"Index for y: {y.index}\n"
            )
        if isinstance(y, pd.DataFrame):
            labels = {str(name): y[name].to_numpy() for name in y.columns}
        else:
            labels = y.to_numpy()
    return numpy_input_fn(
        features,
        labels,
        batch_size=batch_size,
        num_epochs=num_epochs,
        shuffle=shuffle,
        queue_capacity=queue_capacity,
        num_threads=num_threads,
    )
