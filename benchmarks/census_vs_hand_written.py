"""The census models against the limit of our stack: the canned estimators beside the same
models written as a plain ``jax.jit`` + optax loop, in one run, in alternating paired rounds.

The three models of ``examples/census.py`` (UCI Adult, batch 256):

* linear: ``LinearClassifier`` on the tutorial's wide columns, FTRL at 0.2;
* dnn: ``DNNClassifier`` [100, 75, 50, 25] on the deep columns, Adagrad at 0.05;
* wide_deep: ``DNNLinearCombinedClassifier``, FTRL (0.005) for the wide part, Adagrad
  (0.05) for the deep part.

**Ours** is ``examples/census.py``'s ``make_model``: the default ``RunConfig`` (checkpoints
at the start and end of every ``train()`` and every 600 s, loss logging, the step counter
and summaries every 100 steps, ``steps_per_execution=32``), fed ``numpy_input_fn`` over the
raw rows (the feature columns' host phase runs inside ``train()``).

**Hand-written** is what a JAX user writes by hand for the same job: the features encoded
once before training with the feature columns' own host phase (the encoding is not what is
measured: it is timed apart and printed), then per step a host gather of the batch's rows
and one call of a ``jax.jit`` step (donated parameters and optimizer state; no checkpoints,
no logging, no host sync until the end). One concatenated weight table for the wide
columns; FTRL is the optax transformation :func:`ftrl` below (TF's kernel, with l1 = l2 = 0
as the canned models use it); Adagrad is ``optax.adagrad``; the deep columns' indicator
inputs are one-hot arrays made once with NumPy. Batches span epoch boundaries and the last
one is short, as ``numpy_input_fn``'s.

**Keras** (``--keras``): Keras 3 on JAX fed the same pre-encoded NumPy arrays, run as
keras.io recommends for small models: ``model.fit(x, y, batch_size=256, epochs=...,
shuffle=True)`` with ``compile(steps_per_execution=32)`` (jit on, ``verbose=0``). Keras
cannot train two parts with two optimizers, so its wide & deep uses Adagrad for both.

Figures, per model and side, medians over ``--rounds`` paired rounds (sides alternate
their order each round) with their spread (min-max):

* steady examples/s: ``(E_long - E_short) / (t_long - t_short)`` over a call training
  ``1 + --extra-epochs`` epochs and one training 1 epoch, on the same (warmed) model, so
  fixed per-call costs cancel (ours: ``train()`` on the same Estimator; its per-call
  checkpoint saves are printed apart as ``per-call s``: the short call's time minus its
  steps at the steady rate);
* cold seconds for 5 epochs: a fresh Python process per side and round, timed from
  building the model (imports and reading the CSV files not counted) to the trained
  weights on the host side, compiles included; ours with an empty persistent compilation
  cache of its own (``JAX_ESTIMATOR_CACHE_DIR``); the hand loop and Keras with none;
* accuracy and AUC on adult.test after those 5 epochs, computed the same way for every
  side from its predicted probabilities (AUC exact, from ranks).

The machine's load moves absolute figures; the ratios of one round are measured side by
side and move less. Record figures with the machine and the date (docs/performance).

Usage: ``python benchmarks/census_vs_hand_written.py [--model all] [--rounds 5]
[--keras] [--data-dir DIR]``; the data directory is ``--data-dir``, else
``$ADULT_DATA_DIR``, else the repository's ``data/adult``.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH = 256
COLD_EPOCHS = 5
MODELS = ("linear", "dnn", "wide_deep")
SIDES = ("ours", "hand", "keras")
#: Extra epochs of the long steady call: a few seconds of the hand loop's time each.
EXTRA_EPOCHS = {"linear": 24, "dnn": 4, "wide_deep": 4}


#: The event JAX records the seconds of each XLA compile under (``jax._src.dispatch``).
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


def data_dir(argument: str | None) -> str:
    """``--data-dir``, else ``$ADULT_DATA_DIR``, else the repository's ``data/adult``."""
    return argument or os.environ.get("ADULT_DATA_DIR") or os.path.join(ROOT, "data", "adult")


def load_census():
    spec = importlib.util.spec_from_file_location(
        "census", os.path.join(ROOT, "examples", "census.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_data(census, directory: str):
    train_x, train_y = census.load(os.path.join(directory, "adult.data"))
    test_x, test_y = census.load(os.path.join(directory, "adult.test"))
    return train_x, train_y, test_x, test_y


# ----- metrics (the same for every side) -----------------------------------------------------


def accuracy_auc(probabilities: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """Accuracy at 0.5 and the exact ROC AUC (Mann-Whitney, ties averaged)."""
    p = np.asarray(probabilities, np.float64).reshape(-1)
    y = np.asarray(labels).reshape(-1) > 0.5
    accuracy = float(np.mean((p > 0.5) == y))
    order = np.argsort(p, kind="mergesort")
    ranks = np.empty(len(p))
    sorted_p = p[order]
    # Average ranks over ties.
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_p)) + 1]
    ends = np.r_[starts[1:], len(p)]
    for s, e in zip(starts, ends, strict=True):
        ranks[order[s:e]] = (s + e + 1) / 2
    positives = int(y.sum())
    negatives = len(y) - positives
    auc = (ranks[y].sum() - positives * (positives + 1) / 2) / (positives * negatives)
    return accuracy, float(auc)


# ----- the features, encoded once -----------------------------------------------------------


def encode(census, kind: str, x: dict, y: np.ndarray, stats: dict) -> dict:
    """The model's inputs as NumPy arrays, one row per example, from the feature columns'
    own host phase run once over all rows: ``{"wide": int32 [n, 8] ids into one
    concatenated table, "dense": float32 [n, 43] standardized numeric + one-hot, "occupation":
    int32 [n] ids, "label": float32 [n]}`` (the parts the model uses)."""
    from canned import feature_column as fc

    out = {"label": (y == census.LABELS[1]).astype(np.float32)}
    if kind in ("linear", "wide_deep"):
        columns = census.wide_columns()
        encoded, _ = fc.input_transform(columns).apply(x, None)
        ids, offset = [], 0
        for column in columns:
            column_ids = encoded[f"{column.name}/ids"][:, 0]
            assert column_ids.min() >= 0, "no missing ids in UCI Adult's wide columns"
            ids.append(column_ids + offset)
            offset += column.num_buckets
        out["wide"] = np.stack(ids, axis=1).astype(np.int32)
        out["wide_rows"] = offset
    if kind in ("dnn", "wide_deep"):
        columns = census.deep_columns(stats)
        encoded, _ = fc.input_transform(columns).apply(x, None)
        dense = []
        for column in columns:
            if isinstance(column, fc.NumericColumn):
                mean, std = stats[column.key]
                dense.append((encoded[column.key] - mean) / std)
            elif isinstance(column, fc.IndicatorColumn):
                ids = encoded[f"{column.categorical_column.name}/ids"][:, 0]
                dense.append(np.eye(column.categorical_column.num_buckets, dtype=np.float32)[ids])
            else:  # the occupation embedding
                out["occupation"] = encoded[f"{column.categorical_column.name}/ids"][:, 0]
                out["embedding_rows"] = column.categorical_column.num_buckets
        out["dense"] = np.concatenate(dense, axis=1).astype(np.float32)
    return out


def inputs_of(kind: str, data: dict) -> tuple:
    """The per-example arrays a model's step takes, label last."""
    names = {"linear": ("wide",), "dnn": ("dense", "occupation")}.get(
        kind, ("wide", "dense", "occupation")
    )
    return tuple(data[n] for n in names) + (data["label"],)


# ----- the hand-written loop ------------------------------------------------------------------


def ftrl(learning_rate: float, initial_accumulator_value: float = 0.1):
    """FTRL-Proximal as TF's kernel runs it with l1 = l2 = 0 and power -0.5 (NOTES.md):
    ``n' = n + g²``, ``z' = z + g - (√n' - √n)/α · w``, ``w' = -z' / (√n'/α)``."""
    import jax
    import jax.numpy as jnp
    import optax

    def init(params):
        n = jax.tree.map(lambda p: jnp.full_like(p, initial_accumulator_value), params)
        return n, jax.tree.map(jnp.zeros_like, params)

    def update(grads, state, params):
        n, z = state
        new_n = jax.tree.map(lambda g, n: n + g * g, grads, n)
        new_z = jax.tree.map(
            lambda g, w, n, m, z: z + g - (jnp.sqrt(m) - jnp.sqrt(n)) / learning_rate * w,
            grads, params, n, new_n, z,
        )  # fmt: skip
        new_w = jax.tree.map(lambda m, z: -z / (jnp.sqrt(m) / learning_rate), new_n, new_z)
        return jax.tree.map(jnp.subtract, new_w, params), (new_n, new_z)

    return optax.GradientTransformation(init, update)


def hand_model(census, kind: str, data: dict):
    """``(init(key) -> params, logits(params, *inputs), optimizer)`` of the hand-written
    model."""
    import jax
    import jax.numpy as jnp
    import optax

    def init(key):
        params = {}
        if kind in ("linear", "wide_deep"):
            params["wide"] = {"w": jnp.zeros((data["wide_rows"], 1)), "b": jnp.zeros((1,))}
        if kind in ("dnn", "wide_deep"):
            key, k_emb = jax.random.split(key)
            dims = [data["dense"].shape[1] + 8, *census.HIDDEN_UNITS, 1]
            layers = []
            for fan_in, fan_out in zip(dims[:-1], dims[1:], strict=True):
                key, k = jax.random.split(key)
                kernel = jax.nn.initializers.glorot_uniform()(k, (fan_in, fan_out))
                layers.append({"w": kernel, "b": jnp.zeros((fan_out,))})
            embedding = jax.nn.initializers.truncated_normal(1 / np.sqrt(8))(
                k_emb, (data["embedding_rows"], 8)
            )
            params["deep"] = {"embedding": embedding, "layers": layers}
        return params

    def wide_logits(p, ids):
        return jnp.sum(p["w"][ids, 0], axis=1) + p["b"][0]

    def deep_logits(p, dense, occupation):
        h = jnp.concatenate([dense, p["embedding"][occupation]], axis=1)
        for i, layer in enumerate(p["layers"]):
            h = h @ layer["w"] + layer["b"]
            if i < len(p["layers"]) - 1:
                h = jax.nn.relu(h)
        return h[:, 0]

    adagrad = optax.adagrad(0.05, initial_accumulator_value=0.1, eps=1e-7)
    if kind == "linear":
        return init, lambda p, ids: wide_logits(p["wide"], ids), ftrl(0.2)
    if kind == "dnn":
        return init, lambda p, dense, occ: deep_logits(p["deep"], dense, occ), adagrad

    def logits(p, ids, dense, occupation):
        return wide_logits(p["wide"], ids) + deep_logits(p["deep"], dense, occupation)

    # TF's wide & deep: FTRL at min(0.005, 1/sqrt(8 columns)) for the wide part.
    optimizer = optax.multi_transform(
        {"wide": ftrl(0.005), "deep": adagrad}, {"wide": "wide", "deep": "deep"}
    )
    return init, logits, optimizer


def epoch_order(n: int, epochs: int, rng: np.random.Generator) -> list[np.ndarray]:
    """The example indices of each batch: ``epochs`` shuffled passes, cut into batches that
    may span a pass's end (the last one shorter), as ``numpy_input_fn``'s."""
    order = np.concatenate([rng.permutation(n) for _ in range(epochs)])
    return [order[i : i + BATCH] for i in range(0, len(order), BATCH)]


class HandLoop:
    """The hand-written training loop of one model."""

    def __init__(self, census, kind: str, data: dict, seed: int) -> None:
        import jax
        import optax

        self.kind = kind
        self.arrays = inputs_of(kind, data)
        self.rng = np.random.default_rng(seed)
        init, self.logits, optimizer = hand_model(census, kind, data)

        def loss_fn(params, *batch):
            *inputs, labels = batch
            logits = self.logits(params, *inputs)
            return optax.sigmoid_binary_cross_entropy(logits, labels).mean()

        def step(params, opt_state, *batch):
            loss, grads = jax.value_and_grad(loss_fn)(params, *batch)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss

        self.step = jax.jit(step, donate_argnums=(0, 1))

        def initial(key):
            params = init(key)
            return params, optimizer.init(params)

        # One program for the initial variables and optimizer state (op by op, each random
        # initializer and slot would be a program of its own).
        self.params, self.opt_state = jax.jit(initial)(jax.random.key(seed))
        self.predict = jax.jit(lambda p, *inputs: jax.nn.sigmoid(self.logits(p, *inputs)))

    def train(self, epochs: int) -> None:
        import jax

        params, opt_state = self.params, self.opt_state
        for index in epoch_order(len(self.arrays[-1]), epochs, self.rng):
            params, opt_state, _ = self.step(params, opt_state, *(a[index] for a in self.arrays))
        self.params, self.opt_state = jax.block_until_ready((params, opt_state))

    def probabilities(self, data: dict) -> np.ndarray:
        return np.asarray(self.predict(self.params, *inputs_of(self.kind, data)[:-1]))


# ----- ours -----------------------------------------------------------------------------------


class Ours:
    """The canned estimator of ``examples/census.py`` (default ``RunConfig``)."""

    def __init__(self, census, kind: str, raw: tuple, stats: dict, seed: int) -> None:
        self.census, self.raw = census, raw
        self.model_dir = tempfile.mkdtemp(prefix=f"bench_{kind}_")
        self.model = census.make_model(kind, self.model_dir, seed, stats)

    def train(self, epochs: int) -> None:
        import estimator as est

        train_x, train_y = self.raw[0], self.raw[1]
        self.model.train(
            est.inputs.numpy_input_fn(
                train_x, train_y, batch_size=BATCH, num_epochs=epochs, shuffle=True
            )
        )

    def close(self) -> None:
        shutil.rmtree(self.model_dir, ignore_errors=True)

    def probabilities(self, _data: dict) -> np.ndarray:
        import estimator as est

        test_x = self.raw[2]
        batches = self.model.predict(
            est.inputs.numpy_input_fn(test_x, batch_size=4096, shuffle=False),
            predict_keys=["logistic"],
            yield_single_examples=False,
        )
        return np.concatenate([b["logistic"].reshape(-1) for b in batches])


# ----- Keras ----------------------------------------------------------------------------------


def _bias_layer(keras):
    """A layer adding one trained bias (zeros to start), as the linear model's."""

    class Bias(keras.layers.Layer):
        def build(self, input_shape):
            self.bias = self.add_weight(shape=(1,), initializer="zeros")

        def call(self, x):
            return x + self.bias

    return Bias()


class KerasSide:
    """Keras 3 on JAX fed the pre-encoded NumPy arrays (``model.fit``)."""

    def __init__(self, census, kind: str, data: dict, seed: int) -> None:
        import keras

        keras.utils.set_random_seed(seed)
        self.kind = kind
        self.arrays = inputs_of(kind, data)
        inputs, logits = [], []
        if kind in ("linear", "wide_deep"):
            ids = keras.Input((data["wide"].shape[1],), dtype="int32")
            weights = keras.layers.Embedding(data["wide_rows"], 1, embeddings_initializer="zeros")
            summed = keras.ops.sum(weights(ids), axis=1)  # [batch, 1]
            logits.append(_bias_layer(keras)(summed))
            inputs.append(ids)
        if kind in ("dnn", "wide_deep"):
            dense = keras.Input((data["dense"].shape[1],))
            occupation = keras.Input((), dtype="int32")
            embedded = keras.layers.Embedding(
                data["embedding_rows"],
                8,
                embeddings_initializer=keras.initializers.TruncatedNormal(stddev=1 / np.sqrt(8)),
            )(occupation)
            h = keras.layers.Concatenate()([dense, embedded])
            for units in census.HIDDEN_UNITS:
                h = keras.layers.Dense(units, activation="relu")(h)
            logits.append(keras.layers.Dense(1)(h))
            inputs += [dense, occupation]
        output = logits[0] if len(logits) == 1 else keras.layers.Add()(logits)
        self.model = keras.Model(inputs, output)
        optimizer = (
            keras.optimizers.Ftrl(0.2, initial_accumulator_value=0.1)
            if kind == "linear"
            else keras.optimizers.Adagrad(0.05, initial_accumulator_value=0.1, epsilon=1e-7)
        )
        self.model.compile(
            optimizer=optimizer,
            loss=keras.losses.BinaryCrossentropy(from_logits=True),
            steps_per_execution=32,
        )

    def train(self, epochs: int) -> None:
        *inputs, labels = self.arrays
        self.model.fit(
            list(inputs), labels[:, None], batch_size=BATCH, epochs=epochs, shuffle=True, verbose=0
        )

    def probabilities(self, data: dict) -> np.ndarray:
        inputs = list(inputs_of(self.kind, data)[:-1])
        logits = self.model.predict(inputs, batch_size=4096, verbose=0)
        return 1 / (1 + np.exp(-logits.reshape(-1)))


# ----- one side of one model --------------------------------------------------------------------


def encode_side(census, kind: str, raw: tuple) -> tuple:
    """``(train encoding, test encoding, encoding seconds)``: the features encoded once with
    NumPy, as the hand loop and Keras take them."""
    stats = census.numeric_stats(raw[0])
    start = time.perf_counter()
    train = encode(census, kind, raw[0], raw[1], stats)
    test = encode(census, kind, raw[2], raw[3], stats)
    return train, test, time.perf_counter() - start


def build_side(side: str, census, kind: str, raw: tuple, train: dict | None, seed: int):
    """One side's model, built (the hand loop's and Keras's variables initialised; ours
    initialises its variables in ``train()``). ``train``: the hand loop's and Keras's
    encoded training data (:func:`encode_side`)."""
    if side == "ours":
        return Ours(census, kind, raw, census.numeric_stats(raw[0]), seed)
    if side == "hand":
        return HandLoop(census, kind, train, seed)
    return KerasSide(census, kind, train, seed)


def cold_child(side: str, kind: str, seed: int, directory: str) -> None:
    """A fresh process's 5 epochs; prints ``{"cold_s", "accuracy", "auc", "encode_s"}``."""
    census = load_census()
    raw = load_data(census, directory)
    import jax  # imported before the clock starts, as estimator is

    import estimator  # noqa: F401

    if side == "keras":
        import keras  # noqa: F401
    compiles = []  # seconds of each XLA compile (JAX's own record, any thread)

    def record(event: str, seconds: float, **_) -> None:
        if event == COMPILE_EVENT:
            compiles.append(seconds)

    jax.monitoring.register_event_duration_secs_listener(record)
    train = test = None
    encoding = 0.0  # ours: inside train() (the feature columns' host phase)
    if side != "ours":
        # The encoding first, not counted; the model is built (its variables initialised,
        # their programs compiled) inside the timed part, as ours is in train().
        train, test, encoding = encode_side(census, kind, raw)
    start = time.perf_counter()
    model = build_side(side, census, kind, raw, train, seed)
    model.train(COLD_EPOCHS)
    cold = time.perf_counter() - start
    accuracy, auc = accuracy_auc(model.probabilities(test), test_labels(census, raw))
    if side == "ours":
        model.close()
    compiled = sorted(compiles, reverse=True)
    print(
        json.dumps(
            {
                "cold_s": cold,
                "accuracy": accuracy,
                "auc": auc,
                "encode_s": encoding,
                "compiles_s": compiled,
            }
        )
    )


def test_labels(census, raw: tuple) -> np.ndarray:
    return (raw[3] == census.LABELS[1]).astype(np.float32)


def run_cold(side: str, kind: str, seed: int, directory: str) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cache = tempfile.mkdtemp(prefix="bench_cold_cache_")
    env["JAX_ESTIMATOR_CACHE_DIR"] = cache
    env["KERAS_BACKEND"] = "jax"
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    command = [sys.executable, os.path.abspath(__file__), "--cold-child", side, kind]
    command += ["--seed", str(seed), "--data-dir", directory]
    out = subprocess.run(command, capture_output=True, text=True, env=env)
    shutil.rmtree(cache, ignore_errors=True)
    if out.returncode != 0:
        raise RuntimeError(f"cold run {side} {kind} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ----- steady: paired rounds in this process -------------------------------------------------


def timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def steady_rounds(sides: dict, n: int, extra: int, rounds: int) -> dict:
    """``{side: [(examples/s, per-call s), ...]}``: per round, each side's short (1 epoch)
    and long (``1 + extra`` epochs) call, sides in an order that rotates each round."""
    names = list(sides)
    for side in sides.values():  # warm-up: every batch shape compiled, the first checkpoint
        side.train(1)
        side.train(1 + extra)
    results = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            short = timed(sides[name].train, 1)
            long = timed(sides[name].train, 1 + extra)
            rate = extra * n / (long - short)
            results[name].append((rate, short - n / rate))
    return results


def spread(values: list[float], fmt: str) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir")
    parser.add_argument("--model", choices=[*MODELS, "all"], default="all")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keras", action="store_true", help="Keras 3 on JAX as a third side")
    parser.add_argument("--no-cold", action="store_true", help="steady figures only")
    parser.add_argument("--no-steady", action="store_true", help="cold figures only")
    parser.add_argument("--extra-epochs", type=int, help="the long steady call's extra epochs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cold-child", nargs=2, metavar=("SIDE", "MODEL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    directory = data_dir(args.data_dir)
    logging.getLogger("estimator").setLevel(logging.WARNING)
    if args.cold_child:
        cold_child(*args.cold_child, args.seed, directory)
        return
    os.environ.setdefault("KERAS_BACKEND", "jax")
    cache = tempfile.mkdtemp(prefix="bench_xla_cache_")
    os.environ["JAX_ESTIMATOR_CACHE_DIR"] = cache
    import jax

    census = load_census()
    raw = load_data(census, directory)
    n = len(raw[1])
    kinds = MODELS if args.model == "all" else (args.model,)
    side_names = SIDES if args.keras else SIDES[:2]
    print(
        f"jax {jax.__version__}, backend {jax.default_backend()}, {os.cpu_count()} CPUs, "
        f"batch {BATCH}, {n} training examples, {args.rounds} paired rounds; data {directory}"
    )
    table = {}
    for kind in kinds:
        extra = args.extra_epochs or EXTRA_EPOCHS[kind]
        steady = {name: [] for name in side_names}
        if not args.no_steady:
            train = encode_side(census, kind, raw)[0]
            sides = {
                name: build_side(name, census, kind, raw, train, args.seed) for name in side_names
            }
            steady = steady_rounds(sides, n, extra, args.rounds)
            sides["ours"].close()
            del sides
            gc.collect()  # the previous model's objects freed now, not in a timed call
        cold = {name: [] for name in side_names}
        if not args.no_cold:
            for r in range(args.rounds):
                order = side_names[r % len(side_names) :] + side_names[: r % len(side_names)]
                for name in order:
                    cold[name].append(run_cold(name, kind, args.seed + r, directory))
        table[kind] = (steady, cold)
        report(kind, side_names, steady, cold, extra)
    shutil.rmtree(cache, ignore_errors=True)
    print("\nRatios (ours / hand-written; ours / Keras), medians of the paired rounds' ratios:")
    for kind, (steady, cold) in table.items():
        line = f"  {kind:10s}"
        for other in side_names[1:]:
            if steady["ours"]:
                ratios = [o[0] / h[0] for o, h in zip(steady["ours"], steady[other], strict=True)]
                line += f"  steady vs {other} {spread(ratios, '.2f')}"
            if cold["ours"]:
                ratios = [
                    o["cold_s"] / h["cold_s"]
                    for o, h in zip(cold["ours"], cold[other], strict=True)
                ]
                line += f"  cold vs {other} {spread(ratios, '.2f')}"
        print(line)


def report(kind: str, side_names, steady: dict, cold: dict, extra: int) -> None:
    print(f"\n{kind} (steady: 1 vs {1 + extra} epochs; cold: {COLD_EPOCHS} epochs, fresh process)")
    print(
        f"  {'side':6s} {'steady examples/s':>28s} {'per-call s':>20s} {'cold s':>20s} "
        f"{'accuracy':>24s} {'AUC':>24s}"
    )
    for name in side_names:
        rates = [r for r, _ in steady[name]]
        fixed = [f for _, f in steady[name]]
        print(
            f"  {name:6s} {spread(rates, ',.0f'):>28s} {spread(fixed, '.3f'):>20s} "
            f"{spread([c['cold_s'] for c in cold[name]], '.2f'):>20s} "
            f"{spread([c['accuracy'] for c in cold[name]], '.4f'):>24s} "
            f"{spread([c['auc'] for c in cold[name]], '.4f'):>24s}"
        )
    if cold[side_names[0]]:
        print("  XLA compiles in the cold run (JAX's backend compile record), medians:")
        for name in side_names:
            longest = [c["compiles_s"][0] if c["compiles_s"] else 0.0 for c in cold[name]]
            total = [sum(c["compiles_s"]) for c in cold[name]]
            count = statistics.median(len(c["compiles_s"]) for c in cold[name])
            print(
                f"    {name:6s} longest {statistics.median(longest):.2f} s, all "
                f"{statistics.median(total):.2f} s ({count:.0f} programs)"
            )
    encodes = [c["encode_s"] for name in side_names if name != "ours" for c in cold[name]]
    if encodes:
        print(
            f"  (encoding the features once, outside the hand/Keras cold time: "
            f"{statistics.median(encodes):.3f} s)"
        )


if __name__ == "__main__":
    main()
