"""Serving input receivers: what an exported model accepts (``tf.estimator.export``).

A receiver names the inputs of the exported signatures (``receiver_tensors``) and says
how the model's features come from them (``features``). Inputs are described by
``jax.ShapeDtypeStruct`` (a ``None`` dimension is symbolic: any size at serving time) or
by example arrays; strings are allowed (dtype ``object``/``str``) and are handled on the
host by the Estimator's ``input_transform``.

Differences from TF: there are no placeholders; ``features`` is either the inputs
themselves (same keys) or a function ``receiver_tensors -> features`` written in
``jax.numpy`` and exported with the model. TF's parsing receiver takes serialized
``tf.Example`` protos; here it takes the per-example feature values directly (as a
service receives them in JSON), with the parsing spec's defaults for missing features.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping
from typing import Any

import jax
import numpy as np

from estimator.preprocessing import FixedLenFeature, VarLenFeature

__all__ = [
    "ServingInputReceiver",
    "TensorServingInputReceiver",
    "build_raw_serving_input_receiver_fn",
    "build_parsing_serving_input_receiver_fn",
    "SupervisedInputReceiver",
    "build_raw_supervised_input_receiver_fn",
]

SINGLE_FEATURE_DEFAULT_NAME = "feature"
SINGLE_RECEIVER_DEFAULT_NAME = "input"
_DEFAULT_NAMES = {
    "feature": SINGLE_FEATURE_DEFAULT_NAME,
    "receiver_tensor": SINGLE_RECEIVER_DEFAULT_NAME,
    "receiver_tensors_alternative": SINGLE_RECEIVER_DEFAULT_NAME,
    "label": "label",
}


def as_spec(value, default_batch_size=None, *, keep_batch: bool = False) -> jax.ShapeDtypeStruct:
    """A ``ShapeDtypeStruct`` for a spec or an example array (internal).

    An example array's first dimension becomes ``default_batch_size`` (None: symbolic), as
    TF's ``_placeholder_from_tensor``.
    """
    if isinstance(value, jax.ShapeDtypeStruct):
        return value
    array = np.asarray(value)
    dtype = np.dtype(object) if array.dtype.kind in "OUS" else array.dtype
    shape = tuple(array.shape)
    if shape and not keep_batch:
        shape = (default_batch_size,) + shape[1:]
    return jax.ShapeDtypeStruct(shape, dtype)


def _is_spec(value) -> bool:
    return isinstance(value, (jax.ShapeDtypeStruct, np.ndarray, jax.Array))


def _wrap_and_check(tensors, field_name: str) -> dict:
    """TF's ``wrap_and_check_input_tensors``: a dict of str -> spec."""
    if tensors is None:
        raise ValueError(f"{field_name}s must be defined.")
    if not isinstance(tensors, Mapping):
        tensors = {_DEFAULT_NAMES[field_name]: tensors}
    checked = {}
    for name, value in tensors.items():
        if not isinstance(name, str):
            raise ValueError(f"{field_name} keys must be strings: {name}.")
        if not _is_spec(value):
            raise ValueError(
                f"{field_name} {name} must be a jax.ShapeDtypeStruct or an array (TF: a Tensor "
                f"or SparseTensor); got {value!r}."
            )
        checked[name] = as_spec(value, keep_batch=True)
    return checked


class ServingInputReceiver(
    collections.namedtuple(
        "ServingInputReceiver", ["features", "receiver_tensors", "receiver_tensors_alternatives"]
    )
):
    """What ``serving_input_receiver_fn`` returns (``tf.estimator.export.ServingInputReceiver``).

    Args:
      features: the model's features: a spec or dict of specs whose keys are inputs of
        ``receiver_tensors`` (passed through), or a function
        ``receiver_tensors -> features`` written in ``jax.numpy`` (exported with the model).
      receiver_tensors: the signature's inputs: a spec or ``{name: spec}`` (a single spec
        is named ``"input"``). Specs are ``jax.ShapeDtypeStruct`` (``None`` dimensions are
        symbolic) or example arrays.
      receiver_tensors_alternatives: ``{name: spec or {name: spec}}``: more input groups,
        each exported as extra signatures ``"<name>:<signature>"`` (TF's rule).

    Raises:
      ValueError: TF's messages for missing or badly keyed features/receiver tensors.
    """

    def __new__(cls, features, receiver_tensors, receiver_tensors_alternatives=None):
        if features is None:
            raise ValueError("features must be defined.")
        if not callable(features):
            features = _wrap_and_check(features, "feature")
        receiver_tensors = _wrap_and_check(receiver_tensors, "receiver_tensor")
        if receiver_tensors_alternatives is not None:
            if not isinstance(receiver_tensors_alternatives, Mapping):
                raise ValueError(
                    "receiver_tensors_alternatives must be a dict: "
                    f"{receiver_tensors_alternatives}."
                )
            receiver_tensors_alternatives = {
                name: _wrap_and_check(group, "receiver_tensors_alternative")
                for name, group in receiver_tensors_alternatives.items()
            }
        return super().__new__(cls, features, receiver_tensors, receiver_tensors_alternatives)


class TensorServingInputReceiver(ServingInputReceiver):
    """A receiver whose model takes one array, not a dict
    (``tf.estimator.export.TensorServingInputReceiver``).

    Args:
      features: one spec (the model's ``features`` is that array) or a function
        ``receiver_tensors -> array``.
      receiver_tensors, receiver_tensors_alternatives: as :class:`ServingInputReceiver`.
    """

    def __new__(cls, features, receiver_tensors, receiver_tensors_alternatives=None):
        if features is None:
            raise ValueError("features must be defined.")
        if isinstance(features, Mapping):
            raise ValueError(
                "TensorServingInputReceiver takes a single feature spec, not a dict; use "
                "ServingInputReceiver for dict features."
            )
        receiver = ServingInputReceiver(
            features if callable(features) else {SINGLE_FEATURE_DEFAULT_NAME: features},
            receiver_tensors,
            receiver_tensors_alternatives,
        )
        return tuple.__new__(cls, tuple(receiver))


class ParsingServingInputReceiver(ServingInputReceiver):
    """A receiver built from a parsing spec; carries the spec for defaults (internal)."""

    feature_spec: dict

    def __new__(cls, feature_spec: dict, default_batch_size=None):
        specs = {
            name: _spec_from_parsing(name, spec, default_batch_size)
            for name, spec in feature_spec.items()
        }
        obj = super().__new__(cls, dict(specs), dict(specs))
        obj.feature_spec = dict(feature_spec)
        return obj


def _spec_from_parsing(name, spec, batch) -> jax.ShapeDtypeStruct:

    if isinstance(spec, FixedLenFeature):
        return jax.ShapeDtypeStruct((batch,) + tuple(spec.shape), spec.dtype)
    if isinstance(spec, VarLenFeature):
        return jax.ShapeDtypeStruct((batch, None), spec.dtype)
    raise ValueError(
        f"feature_spec[{name!r}] must be a FixedLenFeature or VarLenFeature; got {spec!r}."
    )


def build_raw_serving_input_receiver_fn(
    features, default_batch_size: int | None = None
) -> Callable[[], ServingInputReceiver]:
    """A receiver function taking the features as they are
    (``tf.estimator.export.build_raw_serving_input_receiver_fn``).

    Args:
      features: a spec or example array (the model takes one array), or a dict of them.
        Example arrays fix the non-batch dimensions; their batch dimension becomes
        ``default_batch_size``.
      default_batch_size: the batch size of the signatures; None accepts any.

    Returns:
      A function returning a :class:`ServingInputReceiver` (or
      :class:`TensorServingInputReceiver` for a single array) whose inputs are the features.
    """

    def serving_input_receiver_fn():
        if isinstance(features, Mapping):
            specs = {
                k: _batch(as_spec(v, default_batch_size), default_batch_size)
                for k, v in features.items()
            }
            return ServingInputReceiver(specs, specs)
        spec = _batch(as_spec(features, default_batch_size), default_batch_size)
        return TensorServingInputReceiver(spec, {SINGLE_RECEIVER_DEFAULT_NAME: spec})

    return serving_input_receiver_fn


def _batch(spec: jax.ShapeDtypeStruct, batch) -> jax.ShapeDtypeStruct:
    if not spec.shape:
        return spec
    return jax.ShapeDtypeStruct((batch,) + tuple(spec.shape[1:]), spec.dtype)


def build_parsing_serving_input_receiver_fn(
    feature_spec: Mapping[str, Any], default_batch_size: int | None = None
) -> Callable[[], ServingInputReceiver]:
    """A receiver function for raw per-example feature values
    (``tf.estimator.export.build_parsing_serving_input_receiver_fn``).

    TF's version parses serialized ``tf.Example`` protos. The exported signatures here take
    one input per feature of ``feature_spec`` (e.g. from
    ``canned.feature_column.make_parse_example_spec(columns)``), strings included, as a
    service receives them in JSON: ``FixedLenFeature`` inputs may be omitted when the spec
    has a ``default_value``; ``VarLenFeature`` inputs are lists of any length per example.

    Args:
      feature_spec: ``{name: FixedLenFeature | VarLenFeature}``.
      default_batch_size: the batch size of the signatures; None accepts any.

    Returns:
      A function returning a receiver for ``export_saved_model``.

    Raises:
      ValueError: for entries that are not parsing specs.
    """
    if not isinstance(feature_spec, Mapping) or not feature_spec:
        raise ValueError(f"feature_spec must be a non-empty dict; got {feature_spec!r}.")

    def serving_input_receiver_fn():
        return ParsingServingInputReceiver(dict(feature_spec), default_batch_size)

    return serving_input_receiver_fn


class SupervisedInputReceiver(
    collections.namedtuple("SupervisedInputReceiver", ["features", "labels", "receiver_tensors"])
):
    """Inputs of a TRAIN or EVAL mode export: features and labels
    (``tf.estimator.export.SupervisedInputReceiver``).

    Args:
      features: a spec or ``{name: spec}`` (inputs passed to ``model_fn`` as features).
      labels: a spec (``model_fn`` gets the array) or ``{name: spec}``.
      receiver_tensors: the signature's inputs, covering the features and labels.
    """

    receiver_tensors_alternatives = None

    def __new__(cls, features, labels, receiver_tensors):
        single_label = not isinstance(labels, Mapping)
        features = _wrap_and_check(features, "feature")
        labels = _wrap_and_check(labels, "label")
        receiver_tensors = _wrap_and_check(receiver_tensors, "receiver_tensor")
        obj = super().__new__(cls, features, labels, receiver_tensors)
        obj.single_label = single_label
        return obj


def build_raw_supervised_input_receiver_fn(features, labels, default_batch_size=None):
    """A receiver function for TRAIN/EVAL exports taking features and labels as they are
    (``tf.estimator.experimental.build_raw_supervised_input_receiver_fn``).

    Raises:
      ValueError: "Features and labels must have distinct keys." (TF's message).
    """
    feature_dict = features if isinstance(features, Mapping) else {"feature": features}
    label_dict = labels if isinstance(labels, Mapping) else {"label": labels}
    overlap = set(feature_dict) & set(label_dict)
    if overlap:
        raise ValueError(
            f"Features and labels must have distinct keys. Found overlapping keys: {overlap}"
        )

    def receiver_fn():
        f = {
            k: _batch(as_spec(v, default_batch_size), default_batch_size)
            for k, v in feature_dict.items()
        }
        lab = {
            k: _batch(as_spec(v, default_batch_size), default_batch_size)
            for k, v in label_dict.items()
        }
        receiver = SupervisedInputReceiver(
            f if isinstance(features, Mapping) else f["feature"],
            lab if isinstance(labels, Mapping) else lab["label"],
            {**f, **lab},
        )
        return receiver

    return receiver_fn
