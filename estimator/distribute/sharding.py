"""Where the state lives on a mesh: replicated, or sharded by ``variable_partitions``."""

from __future__ import annotations

import math
import re

import jax
from jax.sharding import NamedSharding, PartitionSpec

__all__ = ["state_shardings"]


def _spec_for(name: str, shape: tuple, partitions: list, mesh) -> PartitionSpec:
    for pattern, spec in partitions:
        if pattern.search(name):
            for dim, axes in enumerate(spec):
                if axes is None:
                    continue
                size = math.prod(
                    mesh.shape[a] for a in ((axes,) if isinstance(axes, str) else axes)
                )
                if dim >= len(shape) or shape[dim] % size:
                    raise ValueError(
                        f"variable_partitions: variable {name!r} of shape {shape} matches "
                        f"{pattern.pattern!r}, whose {spec} splits dimension {dim} into "
                        f"{size} parts; that dimension must exist and divide evenly (change "
                        "the regex, the spec or the variable's shape)."
                    )
            return spec
    return PartitionSpec()


def state_shardings(state, mesh, partitions: dict | None):
    """A pytree of ``NamedSharding``s for ``state`` (a ``TrainState`` or its abstract).

    Variables matching a ``variable_partitions`` regex get its spec; an optimizer slot
    gets its variable's spec when it has the variable's shape (FTRL's accumulators,
    Adagrad's sums, Adam's moments); everything else is replicated.

    Raises:
      ValueError: a spec that does not split its variable evenly over the mesh.
    """
    replicated = NamedSharding(mesh, PartitionSpec())
    if not partitions:
        return jax.tree.map(lambda _: replicated, state)
    compiled = [(re.compile(k), v) for k, v in partitions.items()]
    specs = {}
    for group in (state.trainable, state.non_trainable):
        for name, value in group.items():
            specs[name] = (tuple(value.shape), _spec_for(name, tuple(value.shape), compiled, mesh))

    def variables(group):
        return {name: NamedSharding(mesh, specs[name][1]) for name in group}

    def slot(path, leaf):
        for entry in reversed(path):
            key = getattr(entry, "key", None)
            if key in specs and specs[key][0] == tuple(leaf.shape):
                return NamedSharding(mesh, specs[key][1])
        return replicated

    return type(state)(
        variables(state.trainable),
        variables(state.non_trainable),
        jax.tree_util.tree_map_with_path(slot, state.opt_state),
        replicated,
        replicated,
    )
