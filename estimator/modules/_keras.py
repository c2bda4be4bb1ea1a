"""Keras 3 layers and models inside ``model_fn``: :func:`keras`."""

from __future__ import annotations

import contextlib
import copy
import re
import weakref
import zlib
from typing import Any

import jax
import jax.numpy as jnp

from estimator.model import dtype_policy
from estimator.model.variables import next_rng_key
from estimator.modules import _common

__all__ = ["keras"]

#: The initialisers of layers this adapter built: ``{layer: {id(variable): initializer}}``.
#: Keras initialises a layer's variables when it is built (with its own seeds); these are
#: kept to draw the Estimator's initial values from the same initialisers with its seed.
_INITIALIZERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

_BACKEND_MESSAGE = (
    "estimator.modules.keras needs Keras 3 on the JAX backend, but Keras was imported with "
    "the {backend!r} backend. Keras reads the backend once, when it is first imported "
    "(importing TensorFlow imports Keras with the TensorFlow backend): set the environment "
    "variable KERAS_BACKEND=jax before anything imports keras or tensorflow (in the shell, "
    "or os.environ['KERAS_BACKEND'] = 'jax' at the top of the program), or call "
    "keras.config.set_backend('jax') and build your layers afterwards (layers made "
    "before the switch keep the old backend)."
)


def keras(layer: Any, *inputs: Any, name: str | None = None, **call_kwargs: Any):
    """Runs a Keras 3 layer or model (JAX backend) inside ``model_fn``, its weights as
    Estimator variables.

    The layer (``keras.layers.Dense(10)``, a ``keras.Sequential``, a functional or
    subclassed ``keras.Model``) may be made once outside ``model_fn`` or on every call.
    An unbuilt layer is built on the inputs' shapes; the Estimator's initial values are
    then drawn from the layer's own initialisers, seeded from the Estimator's seed. A
    layer that was already built (pre-trained weights, ``model.load_weights``) starts
    from its current weights instead. Weights become Estimator variables named
    ``<scope>/<variable path>`` (``mlp/dense/kernel``, ``mlp/dense_1/bias``): Keras'
    paths without the layer's own name, the automatic numbering of inner layers restarted
    for each call (``dense``, ``dense_1``, ... as in a fresh process), so a layer made
    inside ``model_fn`` gets the same names on every call. Trainable weights are
    trainable variables; non-trainable weights (``BatchNormalization``'s moving
    statistics) are non-trainable variables, updated by a TRAIN call and kept with
    ``est.assign``. Random layers (``Dropout``) draw from ``est.next_rng_key()``: their
    ``SeedGenerator`` states are set from it on every call and not stored.

    The layer is called as ``layer(*inputs, training=mode == ModeKeys.TRAIN,
    **call_kwargs)`` inside a ``keras.StatelessScope`` holding the Estimator's values
    (Keras' ``stateless_call``). Regularization losses of the layer (``kernel_regularizer``,
    ``add_loss``) are added to ``est.get_regularization_loss()``. Under a mixed dtype
    policy, layers whose own policy is ``"float32"`` run under the Estimator's
    (``"mixed_bfloat16"``/``"mixed_float16"``: float32 weights, lower-precision compute, as
    Keras does); a layer with a policy of its own keeps it.

    Keras must use the JAX backend: set ``KERAS_BACKEND=jax`` before ``keras`` (or
    ``tensorflow``, which imports it) is first imported.

    Args:
      layer: a ``keras.Layer`` (models are layers).
      *inputs: the layer's positional inputs.
      name: the variable scope; default the layer's name without Keras' numbering
        (``sequential_3`` -> ``sequential``), made unique as layers' names are.
      **call_kwargs: keyword arguments of the layer's call (``training=`` overrides the
        mode's flag).

    Returns:
      What the layer returns.

    Raises:
      ImportError: Keras is not installed (``pip install 'jax-estimator[keras]'``).
      RuntimeError: Keras runs on another backend than JAX (see above), or outside
        ``model_fn``.
      TypeError: ``layer`` is not a Keras layer.
      ValueError: two weights of the layer would get the same name.
    """
    keras_lib = _common.require("keras", "keras", "keras")
    if keras_lib.backend.backend() != "jax":
        raise RuntimeError(_BACKEND_MESSAGE.format(backend=keras_lib.backend.backend()))
    frame = _common.model_frame("keras")
    if not isinstance(layer, keras_lib.Layer):
        raise TypeError(
            "estimator.modules.keras(layer, ...) takes a Keras 3 layer or model such as "
            f"keras.layers.Dense(10); got {type(layer).__name__}."
        )
    policy = dtype_policy.current_policy()
    with _policy(layer, policy):
        if not layer.built:
            _build(keras_lib, layer, inputs, call_kwargs)
        weights = list(layer.trainable_weights) + list(layer.non_trainable_weights)
        names = _names(layer, weights)
        trainable = {names[id(v)]: _spec(v) for v in layer.trainable_weights}
        non_trainable = {names[id(v)]: _spec(v) for v in layer.non_trainable_weights}
        initializers = _INITIALIZERS.get(layer, {})

        def initial(key):
            values = {}
            for v in weights:
                path = names[id(v)]
                init = initializers.get(id(v))
                if init is None:  # built before: its current weights
                    values[path] = jnp.asarray(v.value)
                else:
                    seed = jax.random.key_data(
                        jax.random.fold_in(key, zlib.crc32(path.encode()) >> 1)
                    )
                    values[path] = _seeded(init, seed)(tuple(v.shape), dtype=v.dtype)
            return values

        scope = _common.scope_name(name, re.sub(r"_\d+$", "", layer.name), "keras")
        binding = _common.bind("keras", frame, scope, trainable, non_trainable, initial)
        weight_ids = {id(v) for v in weights}
        seeds = [v for v in layer.non_trainable_variables if id(v) not in weight_ids]
        mapping = [(v, binding.trainable[names[id(v)]]) for v in layer.trainable_weights]
        mapping += [(v, binding.non_trainable[names[id(v)]]) for v in layer.non_trainable_weights]
        mapping += [(v, jax.random.key_data(next_rng_key())) for v in seeds]
        kwargs = {"training": _common.training(frame), **call_kwargs}
        with keras_lib.StatelessScope(state_mapping=mapping, collect_losses=True) as scope_:
            outputs = layer(*inputs, **kwargs)
        frame.regularization.extend(scope_.losses)
        binding.update(
            {names[id(v)]: scope_.get_current_value(v) for v in layer.non_trainable_weights}
        )
    return outputs


def _spec(variable) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(tuple(variable.shape), jnp.dtype(variable.dtype))


def _build(keras_lib, layer, inputs, call_kwargs) -> None:
    """Builds ``layer`` on symbolic inputs of the inputs' shapes, outside the trace
    ``model_fn`` runs in, and keeps its variables' initialisers (see ``_INITIALIZERS``)."""
    symbolic = jax.tree.map(
        lambda x: keras_lib.KerasTensor(jnp.shape(x), jnp.result_type(x)), inputs
    )
    with jax.ensure_compile_time_eval(), keras_lib.StatelessScope():
        layer(*symbolic, **call_kwargs)
        # Inside the scope the new variables are not initialised yet: their initialisers
        # are still there. Keras initialises them when the scope ends (eagerly here).
        _INITIALIZERS[layer] = {
            id(v): v._initializer  # noqa: SLF001 - Keras keeps no public handle on it
            for v in layer.weights
            if getattr(v, "_initializer", None) is not None
        }


def _seeded(initializer, seed: jax.Array):
    """``initializer`` drawing from ``seed`` (uint32 key data) instead of the seed Keras
    gave it; initialisers without randomness are returned as they are."""
    if not hasattr(initializer, "seed"):
        return initializer
    seeded = copy.copy(initializer)
    seeded.seed = seed  # Keras' JAX backend uses an array seed as the key itself
    return seeded


def _names(layer, weights) -> dict[int, str]:
    """``{id(variable): name}``: each weight's Keras path without the layer's own name,
    automatic ``_<n>`` numbering of sibling scopes restarted (see :func:`keras`).

    Raises:
      ValueError: two weights with one name.
    """
    paths = [v.path.split("/") for v in weights]
    if paths and all(len(p) > 1 and p[0] == layer.name for p in paths):
        paths = [p[1:] for p in paths]
    renamed: dict[tuple, str] = {}
    counts: dict[tuple, int] = {}
    names = {}
    for v, parts in zip(weights, paths, strict=True):
        new = []
        for i, part in enumerate(parts[:-1]):
            key = (tuple(parts[:i]), part)
            if key not in renamed:
                base = re.sub(r"_\d+$", "", part)
                count = counts.get((key[0], base), 0)
                counts[(key[0], base)] = count + 1
                renamed[key] = base if count == 0 else f"{base}_{count}"
            new.append(renamed[key])
        names[id(v)] = "/".join(new + [parts[-1]])
    seen: dict[str, str] = {}
    for v in weights:
        if names[id(v)] in seen:
            raise ValueError(
                f"estimator.modules.keras: the weights {seen[names[id(v)]]!r} and {v.path!r} "
                f"would both be named {names[id(v)]!r}. Give the layers or weights "
                "distinct names."
            )
        seen[names[id(v)]] = v.path
    return names


@contextlib.contextmanager
def _policy(layer, policy):
    """Runs the block with the Estimator's mixed policy on the layers whose own policy is
    float32; restores their policies afterwards."""
    if policy is None:
        yield
        return
    layers = list(layer._flatten_layers(include_self=True, recursive=True))  # noqa: SLF001
    changed = [(sub, sub.dtype_policy) for sub in layers if sub.dtype_policy.name == "float32"]
    try:
        for sub, _ in changed:
            sub.dtype_policy = policy.name
        yield
    finally:
        for sub, old in changed:
            sub.dtype_policy = old
