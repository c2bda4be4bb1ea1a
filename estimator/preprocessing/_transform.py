"""InputTransform: the host phase of a set of feature columns, applied to every batch."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from estimator.io._specs import FixedLenFeature, VarLenFeature
from estimator.preprocessing._base import Op, op_from_config
from estimator.preprocessing._cross import Weighted
from estimator.preprocessing._specs import _merge_specs

_FORMAT = "jax_estimator.InputTransform"
_VERSION = 1


@dataclass(frozen=True)
class InputTransform:
    """The host phase for a set of feature columns: named ops applied to every batch.

    Built by ``canned.feature_column.input_transform(feature_columns)``, applied by the
    Estimator to each batch on the host before the batch enters the jitted step, and saved
    with exported models (``to_config``) so the loader can re-apply it without model code.

    Args:
      outputs: ``(name, op)`` pairs (or a ``{name: op}`` dict). See the module docstring
        for the names of the arrays each entry produces.

    Raises:
      TypeError: if an entry is not a ``(str, Op)`` pair.
      ValueError: if two entries produce the same output key.
    """

    outputs: tuple[tuple[str, Op], ...]

    def __post_init__(self):
        items = self.outputs.items() if isinstance(self.outputs, Mapping) else self.outputs
        outputs = tuple((name, op) for name, op in items)
        seen: dict[str, str] = {}
        for name, op in outputs:
            if not isinstance(name, str) or not isinstance(op, Op):
                raise TypeError(
                    f"InputTransform entries must be (name, Op) pairs; got ({name!r}, {op!r})."
                )
            for key in _output_keys(name, op):
                if key in seen:
                    raise ValueError(
                        f"InputTransform: output key {key!r} is produced by both {seen[key]} "
                        f"and {op.describe()}. Give each entry a distinct name."
                    )
                seen[key] = op.describe()
        object.__setattr__(self, "outputs", outputs)

    def apply(self, features: Mapping[str, Any], labels: Any = None) -> tuple[dict, Any]:
        """Transforms one batch: ``(features, labels) -> (features', labels)``.

        Args:
          features: raw features of a batch, ``{key: array}``; strings allowed.
          labels: returned unchanged (may be None).

        Returns:
          ``(features', labels)``: ``features'`` holds only the numeric arrays listed in the
          module docstring (``float32`` values and weights, ``int32`` ids), all with the
          same batch size.

        Raises:
          TypeError: if ``features`` is not a dict.
          ValueError: for a missing feature, a wrong dtype or shape (the message names the
            feature and what was expected), or outputs with different batch sizes.
        """
        return self.transform_features(features), labels

    __call__ = apply

    def transform_features(self, features: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """The features part of :meth:`apply`."""
        if not isinstance(features, Mapping):
            raise TypeError(
                "Feature columns need features as a dict {key: array}; got "
                f"{type(features).__name__}. Return a dict of features from input_fn."
            )
        cache: dict = {}
        result: dict[str, np.ndarray] = {}
        for name, op in self.outputs:
            value = op.apply(features, cache)
            if op.categorical:
                result[name + "/ids"] = value.ids
                if value.weights is not None:
                    result[name + "/weights"] = value.weights
            else:
                result[name] = value
        sizes = {k: v.shape[0] for k, v in result.items()}
        if len(set(sizes.values())) > 1:
            raise ValueError(
                f"Features have different batch sizes: {sizes}. Every feature of a batch must "
                "have the same first dimension."
            )
        return result

    @property
    def row_wise(self) -> bool:
        """Whether every op works row by row (``Op.row_wise``): then the transform may run
        once over all rows of an in-memory input instead of on each batch."""
        return all(_row_wise(op) for _, op in self.outputs)

    def output_keys(self) -> tuple[str, ...]:
        """Keys of ``features'`` (weights keys only for :class:`Weighted` entries)."""
        return tuple(k for name, op in self.outputs for k in _output_keys(name, op))

    def input_spec(self) -> dict[str, FixedLenFeature | VarLenFeature]:
        """The raw features expected, as parsing specs (``make_parse_example_spec``).

        Raises:
          ValueError: if two ops read the same key with different specs.
        """
        spec: dict = {}
        for _, op in self.outputs:
            _merge_specs(spec, op.input_spec())
        return spec

    def assets(self) -> tuple[str, ...]:
        """Paths of the files the ops read (vocabulary files), without duplicates.

        An exporter copies each to ``assets/<basename>``; :meth:`from_config` with
        ``assets_dir`` reads them from there.

        Raises:
          ValueError: if two different files have the same basename.
        """
        paths = list(dict.fromkeys(a for _, op in self.outputs for a in op.assets()))
        by_name: dict[str, str] = {}
        for path in paths:
            other = by_name.setdefault(os.path.basename(path), path)
            if other != path:
                raise ValueError(
                    f"Vocabulary files {other} and {path} have the same file name; exported "
                    "assets are stored by file name. Rename one of them."
                )
        return tuple(paths)

    def to_config(self) -> dict[str, Any]:
        """JSON-able description (``json.dumps`` works on it)."""
        return {
            "format": _FORMAT,
            "version": _VERSION,
            "outputs": [{"name": name, "op": op.to_config()} for name, op in self.outputs],
        }

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], *, assets_dir: str | None = None
    ) -> InputTransform:
        """Rebuilds a transform from :meth:`to_config` (e.g. in an export loader).

        Args:
          config: the dict from :meth:`to_config` (possibly through JSON).
          assets_dir: directory holding the vocabulary files by basename (an exported
            model's ``assets/``); None reads them from their original paths.

        Raises:
          ValueError: for a config of another format or version, or an unknown op.
        """
        if config.get("format") != _FORMAT or config.get("version") != _VERSION:
            raise ValueError(
                f"Not an InputTransform config of version {_VERSION}: format="
                f"{config.get('format')!r}, version={config.get('version')!r}."
            )
        memo: dict = {}
        return cls(
            tuple(
                (entry["name"], op_from_config(entry["op"], assets_dir=assets_dir, _memo=memo))
                for entry in config["outputs"]
            )
        )


def _row_wise(op: Op) -> bool:
    if not type(op).row_wise:
        return False
    parts = (*getattr(op, "keys", ()), getattr(op, "categorical_op", None))
    return all(_row_wise(p) for p in parts if isinstance(p, Op))


def _output_keys(name: str, op: Op) -> tuple[str, ...]:
    if not op.categorical:
        return (name,)
    return (name + "/ids", name + "/weights") if isinstance(op, Weighted) else (name + "/ids",)
