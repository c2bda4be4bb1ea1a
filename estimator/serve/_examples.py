"""``tf.Example`` messages -> a signature's input columns (for Classify, Regress and
MultiInference).

An export made with a parsing receiver records its feature spec; each example's features
are read with it (a ``FixedLenFeature`` missing from an example takes its default, a
``VarLenFeature`` keeps its list), and the signature's own checks name any bad value. A
signature without a feature spec (a raw receiver) takes each input from the feature of the
same name, one value per example, reshaped to the input's shape without the batch dimension.
"""

import numpy as np


def _values(feature) -> list:
    kind = feature.WhichOneof("kind")
    return [] if kind is None else list(getattr(feature, kind).value)


def columns(signature, examples: list) -> dict:
    """The columns ``signature(**columns)`` takes for a batch of ``tf.Example`` messages.

    Args:
      signature: an ``estimator.export.Signature``.
      examples: ``tensorflow.Example`` messages, one per row.

    Returns:
      ``{input name: [one value (or list of values) per example]}``; ``None`` where an example
      lacks a feature (the signature applies the feature spec's default or refuses it).

    Raises:
      ValueError: for a signature input that no spec and no example provides.
    """
    spec = getattr(signature, "_parse_spec", None)
    names = sorted(spec) if spec is not None else sorted(signature.inputs)
    result: dict = {name: [] for name in names}
    for example in examples:
        features = example.features.feature
        for name in names:
            if name not in features:
                result[name].append(None)
                continue
            values = _values(features[name])
            shape = _example_shape(signature, spec, name)
            if shape is None:  # VarLenFeature: every value of the example
                result[name].append(values)
            elif shape == ():
                result[name].append(values[0] if len(values) == 1 else values)
            else:
                result[name].append(_reshape(values, shape))
    if spec is None:
        missing = [n for n, column in result.items() if all(v is None for v in column)]
        if missing:
            raise ValueError(
                f"The examples have no feature {missing}: signature {signature.name!r} "
                f"takes {sorted(signature.inputs)} (one feature per input)."
            )
    return {name: column for name, column in result.items() if any(v is not None for v in column)}


def _example_shape(signature, spec, name: str):
    if spec is not None:
        feature = spec[name]
        return tuple(feature.shape) if hasattr(feature, "shape") else None
    shape = signature.inputs[name]["shape"][1:]
    return tuple(shape) if all(isinstance(d, int) for d in shape) else None


def _reshape(values: list, shape: tuple):
    count = int(np.prod(shape))
    if len(values) != count:
        return values  # the signature's shape check names the input and the sizes
    return np.asarray(values, dtype=object).reshape(shape).tolist()
