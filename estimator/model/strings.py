"""String outputs of a jitted step: integer ids on the device, strings on the host.

XLA has no string type, but TF models return strings (a classifier's ``classes``). A
:class:`IndexToString` is a pytree whose only leaf is an integer id array and whose
vocabulary is static metadata, so it passes through ``jax.jit`` and ``jax.export``
unchanged; :meth:`IndexToString.to_numpy` (called by ``Estimator.predict`` and by the
export loader after the device -> host transfer) turns it into the strings TF returns.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["IndexToString", "index_to_string"]


@jax.tree_util.register_pytree_node_class
class IndexToString:
    """Integer ids with the vocabulary that names them.

    The counterpart of ``tf.compat.v1.contrib.lookup.index_to_string_table_from_tensor``:
    ``vocabulary[i]`` for ids in range, ``default_value`` for the others.

    Attributes:
      ids: integer array of any shape (device side).
      vocabulary: tuple of ``str`` (static).
      default_value: the string for out-of-range ids (TF's default ``"UNK"``).
    """

    def __init__(self, ids, vocabulary: Sequence[str], default_value: str = "UNK"):
        self.ids = ids
        self.vocabulary = tuple(str(v) for v in vocabulary)
        self.default_value = str(default_value)

    def tree_flatten(self):
        return (self.ids,), (self.vocabulary, self.default_value)

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj.ids = children[0]
        obj.vocabulary, obj.default_value = aux
        return obj

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(np.shape(self.ids))

    def __getitem__(self, index) -> IndexToString:
        return IndexToString(self.ids[index], self.vocabulary, self.default_value)

    def to_numpy(self) -> np.ndarray:
        """The strings as a NumPy ``object`` array of ``bytes`` (what TF's predict yields)."""
        table = np.array(
            [v.encode() for v in self.vocabulary] + [self.default_value.encode()], dtype=object
        )
        ids = np.asarray(self.ids).astype(np.int64)
        ids = np.where((ids >= 0) & (ids < len(self.vocabulary)), ids, len(self.vocabulary))
        return table[ids]

    def __repr__(self) -> str:
        return f"IndexToString(ids={self.ids!r}, vocabulary={self.vocabulary!r})"


def index_to_string(ids: jax.typing.ArrayLike, vocabulary: Sequence[str]) -> IndexToString:
    """Names integer ids by ``vocabulary`` (see :class:`IndexToString`).

    Args:
      ids: integer array, any shape.
      vocabulary: the strings for ids ``0 .. len(vocabulary) - 1``.

    Returns:
      An :class:`IndexToString` usable as a prediction or a ``ClassificationOutput``'s
      ``classes``.
    """
    return IndexToString(jnp.asarray(ids), vocabulary)


def to_host(tree):
    """``jax.device_get`` that also turns every :class:`IndexToString` into bytes (internal)."""
    tree = jax.device_get(tree)
    return jax.tree_util.tree_map(
        lambda x: x.to_numpy() if isinstance(x, IndexToString) else x,
        tree,
        is_leaf=lambda x: isinstance(x, IndexToString),
    )
