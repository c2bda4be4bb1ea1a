"""TF 1's dataset iterators at the end of an ``input_fn``.

TF 1 input functions end in an iterator::

    def input_fn():
        dataset = tf.data.TextLineDataset(path).map(parse_csv).shuffle(1000).batch(32)
        features, labels = dataset.make_one_shot_iterator().get_next()
        return features, labels

In TF ``get_next()`` returns tensors that yield the next element each time the graph runs.
Here ``get_next()`` returns the element's structure (a tuple stays a tuple, so it unpacks;
a dict stays a dict) with each value replaced by a placeholder, an
:class:`IteratorValue`. Whatever ``input_fn`` builds from those placeholders
(``(features, labels)``, ``({"x": x}, y)``, ...) is handed back to the iterator when the
Estimator reads the input (``estimator.inputs`` asks a placeholder for its
``__input_source__``), which returns the dataset of such results: one per element, in
order. When the result has the element's own structure the dataset itself is returned, so
the fast paths of in-memory pipelines stay on.

A placeholder is not an array: computing with it inside ``input_fn`` after ``get_next()``
raises an error saying to move that work into a ``Dataset.map``. ``get_next()`` reads the
first element to learn the structure (TF knows it from the graph).
"""

from __future__ import annotations

from typing import Any

import jax

from estimator.compat.v1.errors import OutOfRangeError, tf_error
from estimator.compat.v1.train._train_op import NoOp

__all__ = ["Iterator", "IteratorValue", "make_one_shot_iterator", "make_initializable_iterator"]


class IteratorValue:
    """A value of ``Iterator.get_next()``: stands for one leaf of every element.

    Attributes:
      iterator: the :class:`Iterator` it came from.
      index: the leaf's position in the flattened element.
    """

    def __init__(self, iterator: Iterator, index: int) -> None:
        self.iterator = iterator
        self.index = index

    def __input_source__(self, result: Any) -> Any:
        """The dataset of ``result`` s, one per element (what the Estimator reads)."""
        return self.iterator._source_of(result)

    def _refuse(self, *args, **kwargs):
        raise TypeError(
            "A value of iterator.get_next() is read by the Estimator, one element per step; "
            "it is not an array inside input_fn. Do the computation in a Dataset.map before "
            "the iterator (dataset.map(lambda features, labels: ...)), and return what "
            "get_next() gave (or a dict/tuple of its values) from input_fn."
        )

    __array__ = __add__ = __radd__ = __sub__ = __mul__ = __truediv__ = __getitem__ = _refuse
    __float__ = __int__ = __bool__ = __len__ = __iter__ = _refuse

    def __repr__(self) -> str:
        return f"<iterator.get_next() value #{self.index}>"


def _is_value(x: Any) -> bool:
    return isinstance(x, IteratorValue)


class Iterator:
    """``tf.data.Iterator`` (TF 1): made by ``make_one_shot_iterator`` /
    ``make_initializable_iterator``; ``get_next()`` is what an ``input_fn`` returns."""

    def __init__(self, dataset: Any) -> None:
        self._dataset = dataset
        self._treedef = None

    @property
    def initializer(self) -> NoOp:
        """A no-op: the Estimator starts the dataset when it reads it."""
        return NoOp()

    def get_next(self, name: str | None = None) -> Any:
        """The element's structure with placeholders as values (see the module docstring).

        Raises:
          tf.errors.OutOfRangeError: an empty dataset (TF's class and message first; also
            a ``ValueError``, the class raised before).
        """
        del name
        try:
            first = next(iter(self._dataset.as_numpy_iterator()))
        except StopIteration:
            error = ValueError(
                "iterator.get_next() on an empty dataset: it has no element to return. Check "
                "the input files and filters."
            )
            raise tf_error(error, OutOfRangeError, "End of sequence") from None
        leaves, self._treedef = jax.tree.flatten(first)
        values = [IteratorValue(self, i) for i in range(len(leaves))]
        return jax.tree.unflatten(self._treedef, values)

    def _source_of(self, result: Any) -> Any:
        values = jax.tree.leaves(result, is_leaf=_is_value)
        if any(_is_value(v) and v.iterator is not self for v in values):
            raise ValueError(
                "input_fn returned values of two different iterators; return the values of "
                "one dataset (zip the arrays before slicing)."
            )
        structure = jax.tree.structure(result, is_leaf=_is_value)
        if structure == self._treedef and all(
            _is_value(v) and v.index == i for i, v in enumerate(values)
        ):
            return self._dataset  # the element itself: keep the dataset's fast paths

        def rebuild(*element):  # a tuple element comes as arguments: the same leaves
            leaves = jax.tree.leaves(element)
            return jax.tree.map(
                lambda v: leaves[v.index] if _is_value(v) else v, result, is_leaf=_is_value
            )

        return self._dataset.map(rebuild)


def make_one_shot_iterator(dataset: Any) -> Iterator:
    """``tf.data.make_one_shot_iterator(dataset)`` (``dataset.make_one_shot_iterator()``)."""
    return Iterator(dataset)


def make_initializable_iterator(dataset: Any, shared_name: str | None = None) -> Iterator:
    """``tf.data.make_initializable_iterator(dataset)``: as a one-shot iterator; its
    ``initializer`` is a no-op."""
    del shared_name
    return Iterator(dataset)
