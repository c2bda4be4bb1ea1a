"""Data-parallel scaling: 1, 2 and 4 CPU devices in one process, and 2 processes x 2.

Each setting runs in fresh subprocesses (the device count is fixed when JAX starts;
``--xla_force_host_platform_device_count``); the 2 x 2 job is a TF_CONFIG cluster of a
chief and a worker on localhost (``jax.distributed``). Weak scaling: every device gets
``--per-device-batch`` examples, so the global batch grows with the devices; each process
feeds its own rows (``input_fn(input_context)``). Models:

* ``mlp`` — 100 -> 256 -> 256 -> 1 (ReLU), Adam, synthetic data;
* ``logistic`` — 100 -> 1, Adam, the same data: a step so small that the per-call costs
  (dispatch, the multi-process runtime) are most of it;
* ``linear`` — the census ``LinearClassifier`` of ``examples/census.py`` (wide columns,
  FTRL) on UCI Adult.

Figures are steady state: a second ``train()`` of ``--steps`` steps on the same Estimator
(default ``RunConfig``: checkpoints at its start and end included). Per-device efficiency
is examples/s per device relative to one device. CPU devices here share the machine's
cores, so this measures the overhead of sharding and of the multi-process runtime, not a
speed-up.

``--steps-per-execution-rounds N`` instead compares, at 2 processes x 1 device (the common
cluster shape), ``RunConfig(steps_per_execution=1)`` (every step its own device call, as
multi-process jobs ran before) with the default ``RunConfig`` (up to 32 steps per call) in
N alternating paired rounds, and prints each one's steps/s (median and range over the
rounds) and the median and range of the per-round ratio. A shared machine makes single
rounds noisy: read the medians, and compare only figures from one run.

Usage: ``python benchmarks/scaling.py [--steps 200] [--models mlp,linear]
[--steps-per-execution-rounds 5]``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTINGS = [(1, 1), (1, 2), (1, 4), (2, 2)]  # (processes, devices per process)


def worker(args) -> None:
    """One process of a setting: trains, prints the steady figures (process 0)."""
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={args.devices}"
    import jax
    import numpy as np
    import optax

    import estimator as est

    if args.model == "linear":
        sys.path.insert(0, os.path.join(ROOT, "examples"))
        import census

        features, labels = census.load(os.path.join(census.data_dir(args.data_dir), "adult.data"))
        n_rows = len(labels)
    else:
        rng = np.random.default_rng(0)
        features = {"x": rng.normal(size=(8192, 100)).astype(np.float32)}
        labels = (features["x"] @ rng.normal(size=100) > 0).astype(np.float32)
        n_rows = len(labels)

    hidden = (256, 256) if args.model == "mlp" else ()

    def model_fn(features, labels, mode):
        h = features["x"]
        for i, width in enumerate(hidden):
            h = jax.nn.relu(est.layers.dense(h, width, name=f"dense_{i}"))
        logits = est.layers.dense(h, 1, name="logits")[:, 0]
        loss = optax.sigmoid_binary_cross_entropy(logits, labels).mean()
        return est.EstimatorSpec(mode, loss=loss, train_op=optax.adam(1e-3))

    def input_fn(input_context):
        local = args.per_device_batch * jax.local_device_count()
        offset = input_context.input_pipeline_id * local
        global_batch = local * input_context.num_input_pipelines
        step = 0
        while True:
            start = (step * global_batch) % (n_rows - global_batch) + offset
            rows = slice(start, start + local)
            yield {k: v[rows] for k, v in features.items()}, labels[rows]
            step += 1

    model_dir = args.model_dir  # one directory for all processes of a job
    mesh = None  # a TF_CONFIG job makes its global mesh; JAX must not start before it joins
    if "TF_CONFIG" not in os.environ and args.devices > 1:
        mesh = jax.sharding.Mesh(np.array(jax.devices()), ("data",))
    fused = (
        {}
        if args.steps_per_execution is None
        else {"steps_per_execution": args.steps_per_execution}
    )
    config = est.RunConfig(tf_random_seed=0, mesh=mesh, **fused)
    if args.model == "linear":
        import canned

        model = canned.LinearClassifier(
            feature_columns=census.wide_columns(),
            model_dir=model_dir,
            label_vocabulary=census.LABELS,
            config=config,
        )
    else:
        model = est.Estimator(model_fn, model_dir, config)
    model.train(input_fn, steps=20)  # compiles
    start = time.perf_counter()
    model.train(input_fn, steps=args.steps)
    seconds = time.perf_counter() - start
    if jax.process_index() == 0:
        examples = args.steps * args.per_device_batch * jax.device_count()
        print(
            "RESULT "
            + json.dumps(
                {"steps_per_s": args.steps / seconds, "examples_per_s": examples / seconds}
            ),
            flush=True,
        )


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def run_setting(
    args, model: str, processes: int, devices: int, steps_per_execution: int | None = None
) -> dict:
    """The steady figures of one setting (``steps_per_execution``: None for the
    ``RunConfig`` default)."""
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        "--model",
        model,
        "--devices",
        str(devices),
        "--steps",
        str(args.steps),
        "--per-device-batch",
        str(args.per_device_batch),
        "--model-dir",
        tempfile.mkdtemp(prefix="bench_scaling_"),
    ] + (["--data-dir", args.data_dir] if args.data_dir else [])
    if steps_per_execution is not None:
        command += ["--steps-per-execution", str(steps_per_execution)]
    envs = [dict(os.environ)]
    if processes > 1:
        ports = _free_ports(processes)
        cluster = {
            "chief": [f"localhost:{ports[0]}"],
            "worker": [f"localhost:{p}" for p in ports[1:]],
        }
        tasks = [("chief", 0)] + [("worker", i) for i in range(processes - 1)]
        envs = [
            {
                **os.environ,
                "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": t, "index": i}}),
            }
            for t, i in tasks
        ]
    # Output goes to files: a full pipe of one process must not stall the others.
    logs = [tempfile.TemporaryFile("w+") for _ in envs]
    procs = [
        subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
        for env, log in zip(envs, logs, strict=True)
    ]
    outputs = []
    for p, log in zip(procs, logs, strict=True):
        p.wait(timeout=1800)
        log.seek(0)
        outputs.append(log.read())
        if p.returncode != 0:
            raise RuntimeError(f"setting {processes}x{devices} failed:\n{outputs[-1][-3000:]}")
    line = next(x for x in outputs[0].splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def compare_steps_per_execution(args) -> None:
    """2 processes x 1 device: ``steps_per_execution=1`` against the default ``RunConfig``,
    in alternating paired rounds (which one goes first alternates too)."""
    default = None  # RunConfig's default steps_per_execution
    print(
        f"2 processes x 1 device, {args.steps_per_execution_rounds} paired rounds of "
        f"{args.steps} steps (steps/s: median [min-max])",
        flush=True,
    )
    print("{:8} {:>24} {:>24} {:>24}".format("model", "1 step per call", "default", "ratio"))
    for model in args.models.split(","):
        rates: dict = {1: [], default: []}
        ratios = []
        for round_ in range(args.steps_per_execution_rounds):
            order = (1, default) if round_ % 2 == 0 else (default, 1)
            figures = {k: run_setting(args, model, 2, 1, k)["steps_per_s"] for k in order}
            for k, rate in figures.items():
                rates[k].append(rate)
            ratios.append(figures[default] / figures[1])
            print(
                f"  round {round_ + 1}: {model} 1 step per call {figures[1]:.1f}, default "
                f"{figures[default]:.1f} steps/s",
                flush=True,
            )
        print(
            f"{model:8} {_spread(rates[1]):>24} {_spread(rates[default]):>24} "
            f"{_spread(ratios, '.2f'):>24}",
            flush=True,
        )


def _spread(values: list, spec: str = ".1f") -> str:
    """``median [min-max]`` of ``values``."""
    return f"{statistics.median(values):{spec}} [{min(values):{spec}}-{max(values):{spec}}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--per-device-batch", type=int, default=256)
    parser.add_argument("--models", default="mlp,linear")
    parser.add_argument("--data-dir", default=os.path.join(ROOT, "data", "adult"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--devices", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", help=argparse.SUPPRESS)
    parser.add_argument("--steps-per-execution", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--steps-per-execution-rounds",
        type=int,
        default=0,
        help="compare steps_per_execution=1 with the default at 2 x 1 in this many paired rounds",
    )
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    if args.steps_per_execution_rounds:
        compare_steps_per_execution(args)
        return
    header = ("model", "setting", "devices", "steps/s", "examples/s", "per-device eff.")
    print("{:8} {:>14} {:>7} {:>9} {:>11} {:>16}".format(*header))
    for model in args.models.split(","):
        base = None
        for processes, devices in SETTINGS:
            figures = run_setting(args, model, processes, devices)
            total = processes * devices
            per_device = figures["examples_per_s"] / total
            base = base or per_device
            setting = f"{processes} proc x {devices}"
            print(
                f"{model:8} {setting:>14} {total:7d} {figures['steps_per_s']:9.1f} "
                f"{figures['examples_per_s']:11,.0f} {per_device / base:16.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
