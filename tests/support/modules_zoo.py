"""An MLP, a small CNN and a transformer block written with each module library, run two
ways: inside a ``model_fn`` through ``estimator.modules`` and in the library's own
hand-written ``jax.jit`` + optax training loop (``tests/model/test_modules_numbers.py``,
``benchmarks/modules.py``).

Every model maps a batch to ``[batch, classes]`` logits (the CNN's convolution has no
bias: batch normalization follows it, and Adam would turn that bias's zero gradient,
rounding noise, into steps of the learning rate) and is trained with softmax cross
entropy and one optax transformation. The hand-written loops are the libraries' own
idioms (NNX ``split``/``merge``, Linen ``apply(..., mutable=...)``, Equinox
``partition``/``combine`` with ``jax.vmap``, Keras ``stateless_call``), one jitted step
per batch with the state donated; they start from the parameters the Estimator started
from, read by name, which they name themselves (``"/".join`` of each library's path).

Keras needs ``KERAS_BACKEND=jax`` before it is imported; it is imported only by the Keras
cases (``keras_case``), never at this module's import.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

import estimator as est

LIBRARIES = ("nnx", "linen", "equinox", "keras")
ARCHITECTURES = ("mlp", "cnn", "transformer")


@dataclasses.dataclass(frozen=True)
class Size:
    batch: int
    features: int  # MLP inputs
    hidden: int  # MLP width
    image: int  # CNN inputs: [image, image, 1]
    channels: int  # CNN filters
    seq: int  # transformer inputs: [seq, model]
    model: int
    heads: int
    classes: int


SMALL = Size(
    batch=8, features=6, hidden=16, image=6, channels=4, seq=5, model=8, heads=2, classes=3
)
BENCH = Size(
    batch=128, features=64, hidden=256, image=16, channels=16, seq=16, model=64, heads=4, classes=10
)


def batches(
    arch: str, size: Size, count: int, seed: int = 0
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``count`` batches ``(x, y)`` of the architecture's inputs and int32 labels."""
    rng = np.random.default_rng(seed)
    shape = {
        "mlp": (size.features,),
        "cnn": (size.image, size.image, 1),
        "transformer": (size.seq, size.model),
    }[arch]
    out = []
    for _ in range(count):
        x = rng.normal(size=(size.batch, *shape)).astype(np.float32)
        y = rng.integers(0, size.classes, size=size.batch).astype(np.int32)
        out.append((x, y))
    return out


def cross_entropy(logits, labels):
    return optax.softmax_cross_entropy_with_integer_labels(
        logits.astype(jnp.float32), labels
    ).mean()


@dataclasses.dataclass
class Case:
    """One library and architecture.

    Attributes:
      scope: the variable scope the Estimator names the module's variables under.
      logits: ``x -> logits`` inside ``model_fn`` (through ``estimator.modules``).
      hand_loop: ``(initial variables by Estimator name, optax transformation) -> Loop``.
    """

    library: str
    arch: str
    size: Size
    scope: str
    logits: Callable
    hand_loop: Callable


class Loop:
    """A hand-written training loop: ``step(batch)`` runs one jitted step; ``variables()``
    gives ``{Estimator name: value}`` of the current parameters and state."""

    def __init__(self, step, state, names: Callable[[Any], dict]) -> None:
        self._step = jax.jit(step, donate_argnums=0)
        self.state = state
        self._names = names

    def step(self, x, y) -> None:
        self.state = self._step(self.state, x, y)

    def variables(self) -> dict:
        return {k: np.asarray(v) for k, v in self._names(self.state).items()}


def model_fn_for(case: Case, make_tx: Callable[[], optax.GradientTransformation]):
    """The ``model_fn`` training ``case``'s module with ``make_tx()``."""

    def model_fn(features, labels, mode):
        logits = case.logits(features)
        predictions = {"class_ids": jnp.argmax(logits, -1)}
        if mode == est.ModeKeys.PREDICT:
            return est.EstimatorSpec(mode, predictions=predictions)
        return est.EstimatorSpec(
            mode, loss=cross_entropy(logits, labels), predictions=predictions, train_op=make_tx()
        )

    return model_fn


def case(library: str, arch: str, size: Size = SMALL) -> Case:
    return {"nnx": nnx_case, "linen": linen_case, "equinox": equinox_case, "keras": keras_case}[
        library
    ](arch, size)


# --- Flax NNX ----------------------------------------------------------------------------


def nnx_case(arch: str, size: Size) -> Case:
    from flax import nnx

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.l1 = nnx.Linear(size.features, size.hidden, rngs=rngs)
            self.l2 = nnx.Linear(size.hidden, size.hidden, rngs=rngs)
            self.out = nnx.Linear(size.hidden, size.classes, rngs=rngs)

        def __call__(self, x):
            return self.out(nnx.relu(self.l2(nnx.relu(self.l1(x)))))

    class CNN(nnx.Module):
        def __init__(self, rngs):
            self.conv = nnx.Conv(1, size.channels, (3, 3), use_bias=False, rngs=rngs)
            self.bn = nnx.BatchNorm(size.channels, rngs=rngs)
            flat = size.channels * (size.image // 2) ** 2
            self.out = nnx.Linear(flat, size.classes, rngs=rngs)

        def __call__(self, x):
            x = nnx.relu(self.bn(self.conv(x)))
            x = nnx.avg_pool(x, (2, 2), strides=(2, 2))
            return self.out(x.reshape(x.shape[0], -1))

    class Transformer(nnx.Module):
        def __init__(self, rngs):
            d = size.model
            self.ln1 = nnx.LayerNorm(d, rngs=rngs)
            self.attention = nnx.MultiHeadAttention(size.heads, d, decode=False, rngs=rngs)
            self.ln2 = nnx.LayerNorm(d, rngs=rngs)
            self.up = nnx.Linear(d, 2 * d, rngs=rngs)
            self.down = nnx.Linear(2 * d, d, rngs=rngs)
            self.out = nnx.Linear(d, size.classes, rngs=rngs)

        def __call__(self, x):
            x = x + self.attention(self.ln1(x))
            x = x + self.down(nnx.gelu(self.up(self.ln2(x))))
            return self.out(x.mean(axis=1))

    cls = {"mlp": MLP, "cnn": CNN, "transformer": Transformer}[arch]
    scope = {"mlp": "mlp", "cnn": "cnn", "transformer": "transformer"}[arch]

    def logits(features):
        return est.modules.nnx(cls, features["x"])

    def hand_loop(initial: dict, tx):
        graphdef, params, rest = nnx.split(cls(nnx.Rngs(0)), nnx.Param, ...)

        def fill(state):
            return nnx.from_flat_state(
                [
                    (path, v.replace(value=jnp.asarray(initial[_name(scope, path)])))
                    for path, v in nnx.to_flat_state(state)
                ]
            )

        params, rest = fill(params), fill(rest)

        def step(state, x, y):
            params, rest, opt_state = state

            def loss_fn(params):
                # Fresh Variable objects for the state, made in this trace: NNX lets a
                # module update (batch statistics) only the Variables of its own trace.
                model = nnx.merge(graphdef, params, jax.tree.map(lambda v: v, rest))
                model.train()
                loss = cross_entropy(model(x), y)
                return loss, nnx.state(model, nnx.Not(nnx.Param))

            grads, new_rest = jax.grad(loss_fn, has_aux=True)(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), new_rest, opt_state

        def names(state):
            out = {}
            for part in state[:2]:
                for path, v in nnx.to_flat_state(part):
                    out[_name(scope, path)] = v.get_value()
            return out

        return Loop(step, (params, rest, tx.init(params)), names)

    return Case("nnx", arch, size, scope, logits, hand_loop)


def _name(scope: str, path) -> str:
    return "/".join([scope, *map(str, path)])


# --- Flax Linen --------------------------------------------------------------------------


def linen_case(arch: str, size: Size) -> Case:
    import flax.linen as nn
    from flax import traverse_util

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.relu(nn.Dense(size.hidden)(x))
            x = nn.relu(nn.Dense(size.hidden)(x))
            return nn.Dense(size.classes)(x)

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool):
            x = nn.Conv(size.channels, (3, 3), use_bias=False)(x)
            x = nn.relu(nn.BatchNorm(use_running_average=not train)(x))
            x = nn.avg_pool(x, (2, 2), strides=(2, 2))
            return nn.Dense(size.classes)(x.reshape(x.shape[0], -1))

    class Transformer(nn.Module):
        @nn.compact
        def __call__(self, x):
            d = size.model
            x = x + nn.MultiHeadDotProductAttention(size.heads)(nn.LayerNorm()(x))
            x = x + nn.Dense(d)(nn.gelu(nn.Dense(2 * d)(nn.LayerNorm()(x))))
            return nn.Dense(size.classes)(x.mean(axis=1))

    module = {"mlp": MLP, "cnn": CNN, "transformer": Transformer}[arch]()
    scope = {"mlp": "mlp", "cnn": "cnn", "transformer": "transformer"}[arch]
    train_kwargs = {"train": True} if arch == "cnn" else {}

    def logits(features):
        return est.modules.linen(module, features["x"])

    def hand_loop(initial: dict, tx):
        x0 = jnp.zeros((size.batch, *_input_shape(arch, size)), jnp.float32)
        variables = jax.eval_shape(lambda: module.init(jax.random.key(0), x0, **train_kwargs))
        filled = {
            c: traverse_util.unflatten_dict(
                {
                    p: jnp.asarray(initial[f"{scope}/{p}"])
                    for p in traverse_util.flatten_dict(v, sep="/")
                },
                sep="/",
            )
            for c, v in variables.items()
        }
        params = filled.pop("params")

        def step(state, x, y):
            params, others, opt_state = state

            def loss_fn(params):
                if not others:
                    return cross_entropy(module.apply({"params": params}, x), y), others
                out, updates = module.apply(
                    {"params": params, **others}, x, mutable=list(others), **train_kwargs
                )
                return cross_entropy(out, y), updates

            grads, others = jax.grad(loss_fn, has_aux=True)(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), others, opt_state

        def names(state):
            out = {}
            for tree in (state[0], *state[1].values()):
                for p, v in traverse_util.flatten_dict(tree, sep="/").items():
                    out[f"{scope}/{p}"] = v
            return out

        return Loop(step, (params, filled, tx.init(params)), names)

    return Case("linen", arch, size, scope, logits, hand_loop)


def _input_shape(arch: str, size: Size) -> tuple:
    return {
        "mlp": (size.features,),
        "cnn": (size.image, size.image, 1),
        "transformer": (size.seq, size.model),
    }[arch]


# --- Equinox -----------------------------------------------------------------------------


def equinox_case(arch: str, size: Size) -> Case:
    import equinox as eqx

    class MLP(eqx.Module):
        l1: eqx.nn.Linear
        l2: eqx.nn.Linear
        out: eqx.nn.Linear

        def __init__(self, key):
            k1, k2, k3 = jax.random.split(key, 3)
            self.l1 = eqx.nn.Linear(size.features, size.hidden, key=k1)
            self.l2 = eqx.nn.Linear(size.hidden, size.hidden, key=k2)
            self.out = eqx.nn.Linear(size.hidden, size.classes, key=k3)

        def __call__(self, x):  # one example
            return self.out(jax.nn.relu(self.l2(jax.nn.relu(self.l1(x)))))

    class CNN(eqx.Module):
        conv: eqx.nn.Conv2d
        bn: eqx.nn.BatchNorm
        pool: eqx.nn.AvgPool2d
        out: eqx.nn.Linear

        def __init__(self, key):
            k1, k2 = jax.random.split(key)
            self.conv = eqx.nn.Conv2d(1, size.channels, 3, padding=1, use_bias=False, key=k1)
            self.bn = eqx.nn.BatchNorm(size.channels, axis_name="batch", mode="ema")
            self.pool = eqx.nn.AvgPool2d(2, 2)
            self.out = eqx.nn.Linear(size.channels * (size.image // 2) ** 2, size.classes, key=k2)

        def __call__(self, x, state):  # one example, [H, W, 1]
            x, state = self.bn(self.conv(jnp.transpose(x, (2, 0, 1))), state)
            x = self.pool(jax.nn.relu(x))
            return self.out(x.reshape(-1)), state

    class Transformer(eqx.Module):
        ln1: eqx.nn.LayerNorm
        attention: eqx.nn.MultiheadAttention
        ln2: eqx.nn.LayerNorm
        up: eqx.nn.Linear
        down: eqx.nn.Linear
        out: eqx.nn.Linear

        def __init__(self, key):
            d = size.model
            k1, k2, k3, k4 = jax.random.split(key, 4)
            self.ln1 = eqx.nn.LayerNorm(d)
            self.attention = eqx.nn.MultiheadAttention(size.heads, d, key=k1)
            self.ln2 = eqx.nn.LayerNorm(d)
            self.up = eqx.nn.Linear(d, 2 * d, key=k2)
            self.down = eqx.nn.Linear(2 * d, d, key=k3)
            self.out = eqx.nn.Linear(d, size.classes, key=k4)

        def __call__(self, x):  # one example, [seq, model]
            h = jax.vmap(self.ln1)(x)
            x = x + self.attention(h, h, h)
            h = jax.vmap(self.up)(jax.vmap(self.ln2)(x))
            x = x + jax.vmap(self.down)(jax.nn.gelu(h))
            return self.out(x.mean(axis=0))

    cls = {"mlp": MLP, "cnn": CNN, "transformer": Transformer}[arch]
    make = eqx.nn.make_with_state(cls) if arch == "cnn" else cls
    scope = arch

    def logits(features):
        return est.modules.equinox(make, features["x"], vmap=True)

    def hand_loop(initial: dict, tx):
        made = make(jax.random.key(0))
        model, state = made if arch == "cnn" else (made, None)
        params, static = eqx.partition(model, eqx.is_inexact_array)
        params = jax.tree_util.tree_map_with_path(
            lambda p, _: jnp.asarray(initial[f"{scope}/{_eqx_path(p)}"]), params
        )
        indices = _state_indices(eqx, model)
        if state is not None:
            names = {
                id(leaf): f"{scope}/{path}/{_eqx_path(sub)}".rstrip("/")
                for path, index in indices.items()
                for sub, leaf in jax.tree_util.tree_flatten_with_path(state.get(index))[0]
            }
            state = jax.tree.map(lambda leaf: jnp.asarray(initial[names[id(leaf)]]), state)

        def step(carry, x, y):
            params, state, opt_state = carry

            def loss_fn(params):
                model = eqx.combine(params, static)
                if state is None:
                    return cross_entropy(jax.vmap(model)(x), y), state
                batched = jax.vmap(model, axis_name="batch", in_axes=(0, None), out_axes=(0, None))
                out, new_state = batched(x, state)
                return cross_entropy(out, y), new_state

            grads, state = jax.grad(loss_fn, has_aux=True)(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            return eqx.apply_updates(params, updates), state, opt_state

        def read(carry):
            params, state, _ = carry
            out = {
                f"{scope}/{_eqx_path(p)}": v
                for p, v in jax.tree_util.tree_flatten_with_path(params)[0]
            }
            for path, index in indices.items():
                for sub, leaf in jax.tree_util.tree_flatten_with_path(state.get(index))[0]:
                    out[f"{scope}/{path}/{_eqx_path(sub)}".rstrip("/")] = leaf
            return out

        return Loop(step, (params, state, tx.init(params)), read)

    return Case("equinox", arch, size, scope, logits, hand_loop)


def _eqx_path(path) -> str:
    parts = []
    for entry in path:
        for attr in ("name", "key", "idx"):
            if hasattr(entry, attr):
                parts.append(str(getattr(entry, attr)))
                break
    return "/".join(parts)


def _state_indices(eqx, model) -> dict:
    leaves = jax.tree_util.tree_flatten_with_path(
        model, is_leaf=lambda x: isinstance(x, eqx.nn.StateIndex)
    )[0]
    return {_eqx_path(p): leaf for p, leaf in leaves if isinstance(leaf, eqx.nn.StateIndex)}


# --- Keras 3 -----------------------------------------------------------------------------

#: The Estimator's names of the Keras models' weights, in ``model.weights`` order: the
#: layers' Keras names without the model's and with the numbering of a fresh process.
KERAS_NAMES = {
    "mlp": [
        f"{layer}/{w}" for layer in ("dense", "dense_1", "dense_2") for w in ("kernel", "bias")
    ],
    "cnn": [
        "conv2d/kernel",
        "batch_normalization/gamma",
        "batch_normalization/beta",
        "batch_normalization/moving_mean",
        "batch_normalization/moving_variance",
        "dense/kernel",
        "dense/bias",
    ],
}


def keras_case(arch: str, size: Size) -> Case:
    import keras

    def make_model():
        layers = keras.layers
        if arch == "mlp":
            return keras.Sequential(
                [
                    layers.Dense(size.hidden, activation="relu"),
                    layers.Dense(size.hidden, activation="relu"),
                    layers.Dense(size.classes),
                ],
                name="mlp",
            )
        if arch == "cnn":
            return keras.Sequential(
                [
                    layers.Conv2D(size.channels, 3, padding="same", use_bias=False),
                    layers.BatchNormalization(),
                    layers.ReLU(),
                    layers.AveragePooling2D(2),
                    layers.Flatten(),
                    layers.Dense(size.classes),
                ],
                name="cnn",
            )
        return KerasTransformer(size, name="transformer")

    model = make_model()  # made once: the Estimator and the hand-written loop share it
    scope = arch

    def logits(features):
        return est.modules.keras(model, features["x"])

    def hand_loop(initial: dict, tx):
        names = [f"{scope}/{n}" for n in keras_names(model)]
        by_id = dict(zip((id(v) for v in model.weights), names, strict=True))
        trainable = [jnp.asarray(initial[by_id[id(v)]]) for v in model.trainable_variables]
        non_trainable = [jnp.asarray(initial[by_id[id(v)]]) for v in model.non_trainable_variables]

        def step(state, x, y):
            trainable, non_trainable, opt_state = state

            def loss_fn(trainable):
                out, non_trainable_new = model.stateless_call(
                    trainable, non_trainable, x, training=True
                )
                return cross_entropy(out, y), non_trainable_new

            grads, non_trainable = jax.grad(loss_fn, has_aux=True)(trainable)
            updates, opt_state = tx.update(grads, opt_state, trainable)
            return optax.apply_updates(trainable, updates), non_trainable, opt_state

        def read(state):
            variables = list(model.trainable_variables) + list(model.non_trainable_variables)
            return {
                by_id[id(v)]: value
                for v, value in zip(variables, [*state[0], *state[1]], strict=True)
            }

        return Loop(step, (trainable, non_trainable, tx.init(trainable)), read)

    return Case("keras", arch, size, scope, logits, hand_loop)


def keras_names(model) -> list[str]:
    """The Estimator's names (without the scope) of ``model.weights``, in order."""
    if model.name in KERAS_NAMES:
        return KERAS_NAMES[model.name]
    return KERAS_TRANSFORMER_NAMES


KERAS_TRANSFORMER_NAMES = [
    "layer_normalization/gamma",
    "layer_normalization/beta",
    *[
        f"multi_head_attention/{part}/{w}"
        for part in ("query", "key", "value", "attention_output")
        for w in ("kernel", "bias")
    ],
    "layer_normalization_1/gamma",
    "layer_normalization_1/beta",
    "dense/kernel",
    "dense/bias",
    "dense_1/kernel",
    "dense_1/bias",
    "dense_2/kernel",
    "dense_2/bias",
]


@functools.cache
def _keras_transformer_class():
    import keras

    class Transformer(keras.Model):
        def __init__(self, size: Size, **kwargs):
            super().__init__(**kwargs)
            d = size.model
            self.ln1 = keras.layers.LayerNormalization()
            self.attention = keras.layers.MultiHeadAttention(size.heads, d // size.heads)
            self.ln2 = keras.layers.LayerNormalization()
            self.up = keras.layers.Dense(2 * d, activation="gelu")
            self.down = keras.layers.Dense(d)
            self.out = keras.layers.Dense(size.classes)

        def call(self, x, training=False):
            h = self.ln1(x)
            x = x + self.attention(h, h)
            x = x + self.down(self.up(self.ln2(x)))
            return self.out(keras.ops.mean(x, axis=1))

    return Transformer


def KerasTransformer(size: Size, name: str):  # noqa: N802 - a class made on first use
    return _keras_transformer_class()(size, name=name)
