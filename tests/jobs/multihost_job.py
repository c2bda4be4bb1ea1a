"""One process of a small multi-process job (run by tests/distribute/test_multihost.py).

Usage: ``python multihost_job.py MODEL_DIR TASK_TYPE INDEX PORTS [--steps N]`` with
``TF_CONFIG`` built from ``PORTS`` (comma-separated: chief, then workers), or
``python multihost_job.py MODEL_DIR single 0 - --devices 4`` for one process with 4 devices.
``--devices`` is each process's device count (2 by default; 1 is the common cluster shape,
one process per accelerator); ``PORTS`` has one port per process of the training job.
``TASK_TYPE`` ``own`` starts ``jax.distributed`` itself, without TF_CONFIG (process
``INDEX`` of 2). ``--train-and-evaluate`` runs ``train_and_evaluate`` instead
(``TASK_TYPE`` may then be ``evaluator``, a task outside the training job). Prints one
JSON line: the process's weights and evaluation, and the steps each device call of its
training ran (``--steps-per-execution`` fuses steps).

``main(argv)`` runs the same job in a process that imported this module first (the tests
fork their processes from a server that has imported it: see ``tests/support/forkserver.py``).
"""

import argparse
import json
import os
import signal
import sys
import time

import jax  # its backend starts, reading XLA_FLAGS, only when main() first uses it
import jax.numpy as jnp
import numpy as np
import optax

import canned
import estimator as est
from estimator.model.rows import lookup_rows

parser = argparse.ArgumentParser()
args = None
parser.add_argument("model_dir")
parser.add_argument("task_type")
parser.add_argument("index", type=int)
parser.add_argument("ports")
parser.add_argument("--devices", type=int, default=2)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--forever", action="store_true")
parser.add_argument("--batches", type=int, default=40, help="batches this process feeds")
parser.add_argument("--train-and-evaluate", action="store_true")
parser.add_argument("--partition", action="store_true", help="shard w over the data axis")
parser.add_argument("--export", action="store_true", help="export after training")
parser.add_argument(
    "--every-n-steps",
    type=int,
    default=None,
    help="with --train-and-evaluate: EvalSpec(every_n_steps=N) on the chief and workers, a "
    "BestExporter, and an early-stopping hook that fires at the first evaluation after 0",
)
parser.add_argument(
    "--restore-fallback",
    type=float,
    default=None,
    metavar="SECONDS",
    help="RunConfig(restore_fallback=True); the processes other than the chief start reading "
    "each checkpoint they check SECONDS late (a slower host)",
)
parser.add_argument(
    "--fail-in",
    choices=("input", "hook", "model"),
    default=None,
    help="this process raises ValueError in its input_fn (at batch --fail-at), a hook (after "
    "step --fail-at) or model_fn (when it is traced)",
)
parser.add_argument(
    "--tables",
    action="store_true",
    help="model_fn also looks up two small tables trained by the canned FTRL (one array in "
    "the step: estimator.engine.table_groups)",
)
parser.add_argument("--fail-at", type=int, default=5)
parser.add_argument(
    "--block-at",
    type=int,
    default=None,
    help="this process's main thread blocks for good after that step (as in a collective "
    "that does not notice a dead peer)",
)
parser.add_argument(
    "--max-steps",
    type=int,
    default=None,
    help="train(max_steps=N) from the latest checkpoint, the input resuming at that step's "
    "batch (a restarted job reads the batches an uninterrupted one would)",
)
parser.add_argument(
    "--sigterm-in",
    choices=("step", "save"),
    default=None,
    help="this process sends itself SIGTERM as a scheduler would: before the step after "
    "global step --sigterm-at, or in the first periodic save at or after it",
)
parser.add_argument("--sigterm-at", type=int, default=4)
parser.add_argument(
    "--steps-per-execution", type=int, default=None, help="RunConfig(steps_per_execution=N)"
)
parser.add_argument("--log-steps", type=int, default=1, help="RunConfig(log_step_count_steps=N)")
parser.add_argument("--save-steps", type=int, default=3, help="RunConfig(save_checkpoints_steps=N)")
parser.add_argument(
    "--save-secs", type=float, default=None, help="RunConfig(save_checkpoints_secs=S) instead"
)
parser.add_argument(
    "--summary-steps", type=int, default=100, help="RunConfig(save_summary_steps=N)"
)
parser.add_argument(
    "--chief-hook",
    action="store_true",
    help="model_fn gives a training_chief_hook that fetches the loss every other step",
)
parser.add_argument(
    "--live-eval",
    action="store_true",
    help="evaluate in training every 3 steps (uneven shards), training metrics every 3 steps",
)

GLOBAL_BATCH = 12  # splits evenly over 1, 2, 3 and 4 devices, and 1 to 3 processes
RNG = np.random.default_rng(0)
X = RNG.normal(size=(GLOBAL_BATCH * 4, 4)).astype(np.float32)
Y = (X @ np.array([1.0, -2.0, 0.5, 0.25], np.float32) + 0.3).astype(np.float32)


TABLES = {"tables/a": 6, "tables/b": 9}  # --tables


def model_fn(features, labels, mode):
    if args is not None and args.fail_in == "model":
        print("failing at", time.time(), flush=True)
        raise ValueError("model_fn failed on this process")
    w = est.get_variable("w", [4], initializer=est.initializers.zeros_initializer())
    b = est.get_variable("b", [], initializer=est.initializers.zeros_initializer())
    prediction = features["x"] @ w + b
    train_op = optax.sgd(0.1)
    if args is not None and args.tables:
        # Ids from the first two inputs (some out of a table's range: no row).
        ids = jnp.floor((features["x"][:, :2] + 3.0) * 1.5).astype(jnp.int32)
        for name, rows in TABLES.items():
            table = est.get_variable(
                name, [rows, 1], initializer=est.initializers.zeros_initializer()
            )
            prediction = prediction + jnp.sum(lookup_rows(table, ids), axis=(1, 2))
        sgd = optax.sgd(0.1)
        train_op = est.train_op_by_scope({"tables": canned.ftrl(0.2), "w": sgd, "b": sgd})
    if mode == est.ModeKeys.PREDICT:
        return est.EstimatorSpec(mode, predictions={"y": prediction})
    loss = jnp.mean((prediction - labels) ** 2)
    return est.EstimatorSpec(
        mode,
        predictions={"y": prediction},
        loss=loss,
        train_op=train_op,
        eval_metric_ops={"mae": est.metrics.mean_absolute_error(labels, prediction)},
        training_chief_hooks=[LossEveryOtherStep()] if args is not None and args.chief_hook else [],
    )


class LossEveryOtherStep(est.SessionRunHook):
    """``--chief-hook``: fetches the loss at every other step (on the chief alone)."""

    def before_run(self, run_context):
        if run_context.session.global_step % 2:
            return est.SessionRunArgs("loss")
        return None


def input_fn(input_context):
    """Global batch j is X[12j:12j+12]; pipeline i of n reads its 12/n rows of each."""
    n, i = input_context.num_input_pipelines, input_context.input_pipeline_id
    local = GLOBAL_BATCH // n
    j = 0
    if args.max_steps is not None:  # the batch of the step training resumes from
        latest = est.checkpoint.latest_checkpoint(args.model_dir)
        j = est.checkpoint.checkpoint_step(latest) if latest else 0
    while True:
        start = (j % 4) * GLOBAL_BATCH + i * local
        if args.fail_in == "input" and j == args.fail_at:
            print("failing at", time.time(), flush=True)
            raise ValueError(f"input_fn failed at batch {j}")
        yield {"x": X[start : start + local]}, Y[start : start + local]
        j += 1
        if not args.forever and args.max_steps is None and j == args.batches:
            return


def eval_input_fn(input_context):
    n, i = input_context.num_input_pipelines, input_context.input_pipeline_id
    local = GLOBAL_BATCH // n
    for j in range(4):
        start = j * GLOBAL_BATCH + i * local
        yield {"x": X[start : start + local]}, Y[start : start + local]


# An evaluation set that splits unevenly: 50 rows in batches of 8 (6 full, one of 2), each
# process reading whole batches (batch j goes to process j mod n): 4 and 3 for 2 processes.
EVAL_X = RNG.normal(size=(50, 4)).astype(np.float32)
EVAL_Y = (EVAL_X @ np.array([1.0, -2.0, 0.5, 0.25], np.float32) + 0.3).astype(np.float32)
EVAL_BATCHES = 7


def live_eval_input_fn(input_context=None):
    n = 1 if input_context is None else input_context.num_input_pipelines
    i = 0 if input_context is None else input_context.input_pipeline_id
    for j in range(i, EVAL_BATCHES, n):
        yield {"x": EVAL_X[8 * j : 8 * j + 8]}, EVAL_Y[8 * j : 8 * j + 8]


def train_with_live_evaluation(e):
    """``{"live": {step: evaluation}, "validation": {step: evaluation}, "train_metrics":
    {step: report}}`` of a training with an InMemoryEvaluatorHook every 3 steps, a
    ValidationHandler every 3 batches and training metrics every 3 steps."""
    live, reports, validation = {}, {}, {}

    class Recording(est.InMemoryEvaluatorHook):
        def _after_evaluation(self, session, results, at_end):
            live[int(results["global_step"])] = {k: float(v) for k, v in results.items()}

    class Reports(est.handlers.BatchEnd, est.handlers.TrainEnd):
        def batch_end(self, session, **kwargs):
            for prefix, seen in (("train/", reports), ("validation/", validation)):
                values = {k: float(v) for k, v in session.logs.items() if k.startswith(prefix)}
                if values and values not in seen.values():
                    seen[session.global_step] = values

        def train_end(self, session, **kwargs):
            self.batch_end(session)

    hook = Recording(e, live_eval_input_fn, every_n_iter=3, name="live")
    handler = est.handlers.ValidationHandler(
        live_eval_input_fn, epoch_period=None, batch_period=3, name="val"
    )
    e.train(input_fn, hooks=[hook, handler, Reports()], steps=args.steps)
    return {"live": live, "validation": validation, "train_metrics": reports}


SIGNALLED = []  # when this process sent itself SIGTERM


def sigterm() -> None:
    SIGNALLED.append(time.time())
    os.kill(os.getpid(), signal.SIGTERM)


class Faults(est.SessionRunHook):
    """The faults of ``--fail-in hook``, ``--block-at`` and ``--sigterm-in step``; records
    the last step.
    After a SIGTERM, steps take 0.1 s: JAX's notifier looks for SIGTERM once a second, so
    the job agrees on a step within ~15 steps (and well before ``--max-steps``)."""

    def __init__(self):
        self.last_step = None

    def before_run(self, run_context):
        if args.sigterm_in == "step" and run_context.session.global_step == args.sigterm_at:
            sigterm()  # lands while the next step runs

    def after_run(self, run_context, run_values):
        self.last_step = run_context.session.global_step
        if SIGNALLED:
            time.sleep(0.1)
        if self.last_step == args.block_at:
            time.sleep(3600)
        if args.fail_in == "hook" and self.last_step == args.fail_at:
            print("failing at", time.time(), flush=True)
            raise ValueError(f"a hook failed after step {self.last_step}")


class SigtermInSave(est.CheckpointSaverListener):
    """``--sigterm-in save``: SIGTERM in the first periodic save at or after
    ``--sigterm-at``."""

    def before_save(self, session, global_step_value):
        if args.sigterm_in == "save" and global_step_value >= args.sigterm_at:
            args.sigterm_in = None  # once
            sigterm()  # lands while the save is written


def train_until_preempted(e) -> dict:
    """``train(max_steps=...)`` with ``Faults``: ``{"exit": status, "last_step": step}``,
    the status a preemption exits with (its SystemExit), or 0."""
    faults = Faults()
    try:
        e.train(
            input_fn, hooks=[faults], max_steps=args.max_steps, saving_listeners=[SigtermInSave()]
        )
    except SystemExit as exit_:
        return {"exit": exit_.code, "last_step": faults.last_step}
    return {"exit": 0, "last_step": faults.last_step}


def record_calls(e) -> list[int]:
    """The number of steps of each device call the training programs make (without training
    metrics), filled as they run."""
    calls = []
    compiler = e.runtime.compiler(est.ModeKeys.TRAIN)
    multi = compiler.multi

    def recorded(*args, **kwargs):
        calls.append(len(args[-1]))
        return multi(*args, **kwargs)

    compiler.multi = recorded
    return calls


def configure(argv: list[str]) -> None:
    """Reads the arguments and sets the process up, before JAX's backend starts: the device
    count and, for a task of a cluster, ``TF_CONFIG``."""
    global args
    args = parser.parse_args(argv)
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={args.devices}"
    os.environ.pop("TF_CONFIG", None)
    if args.task_type not in ("single", "own"):
        ports = args.ports.split(",")
        cluster = {
            "chief": [f"localhost:{ports[0]}"],
            "worker": [f"localhost:{p}" for p in ports[1:]],
        }
        if args.train_and_evaluate:
            cluster["evaluator"] = ["localhost:1"]  # outside the training job: never contacted
        task = {"type": args.task_type, "index": args.index}
        os.environ["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": task})


def main(argv: list[str]) -> None:
    """The process's job: ``argv`` as the command line's arguments (see the module
    docstring); ends the process (``sys.exit``)."""
    configure(argv)
    if args.task_type == "own":  # a job the user starts: jax.distributed, no TF_CONFIG
        port = args.ports.split(",")[0]
        jax.distributed.initialize(f"localhost:{port}", num_processes=2, process_id=args.index)
    partitions = {"^w$": jax.sharding.PartitionSpec("data")} if args.partition else None
    spe = (
        {}
        if args.steps_per_execution is None
        else {"steps_per_execution": args.steps_per_execution}
    )
    config = est.RunConfig(
        tf_random_seed=3,
        save_checkpoints_steps=None if args.save_secs else args.save_steps,
        save_checkpoints_secs=args.save_secs,
        log_step_count_steps=args.log_steps,
        save_summary_steps=args.summary_steps,
        variable_partitions=partitions,
        **spe,
        train_metrics_steps=3 if args.live_eval else None,
        restore_fallback=args.restore_fallback is not None,
    )
    if args.restore_fallback:
        verify = est.checkpoint.verify_checkpoint

        def late(path):
            if jax.process_index() != 0:
                time.sleep(args.restore_fallback)
            return verify(path)

        est.checkpoint.verify_checkpoint = late
    e = est.Estimator(model_fn, args.model_dir, config)
    print("started", jax.process_index(), jax.process_count(), jax.device_count(), flush=True)
    calls = record_calls(e)
    if args.train_and_evaluate and args.every_n_steps:
        receiver = est.export.build_raw_serving_input_receiver_fn({"x": X[:1]})
        # Fires at the first evaluation after step 0: every process must stop there.
        stop = est.early_stopping.stop_if_lower_hook(
            e, "mae", threshold=1e9, min_steps=1, run_every_secs=None, run_every_steps=1000
        )
        metrics, _ = est.train_and_evaluate(
            e,
            est.TrainSpec(input_fn, max_steps=args.steps, hooks=[stop]),
            est.EvalSpec(
                live_eval_input_fn,
                steps=None,
                exporters=[est.BestExporter("best", receiver)],
                every_n_steps=args.every_n_steps,
            ),
        )
    elif args.train_and_evaluate:
        exporter = est.LatestExporter(
            "latest", est.export.build_raw_serving_input_receiver_fn({"x": X[:1]})
        )
        metrics, _ = est.train_and_evaluate(
            e,
            est.TrainSpec(input_fn, max_steps=args.steps),
            est.EvalSpec(
                eval_input_fn, steps=None, exporters=[exporter], start_delay_secs=0, throttle_secs=1
            ),
        )
        if metrics is None:  # chief and worker: train only (TF's distributed semantics)
            metrics = e.evaluate(eval_input_fn, name="after")
    elif args.live_eval:
        live = train_with_live_evaluation(e)
        metrics = e.evaluate(eval_input_fn)
    elif args.max_steps is not None:
        live = train_until_preempted(e)
        metrics = {} if live["exit"] else e.evaluate(eval_input_fn)
    elif args.fail_in == "hook" or args.block_at is not None:
        e.train(input_fn, hooks=[Faults()], steps=None if args.forever else args.steps)
        metrics = e.evaluate(eval_input_fn)
    else:
        e.train(input_fn, steps=None if args.forever or args.steps <= 0 else args.steps)
        metrics = e.evaluate(eval_input_fn)
    exported = None
    if args.export:
        receiver = est.export.build_raw_serving_input_receiver_fn({"x": X[:1]})
        exported = e.export_saved_model(os.path.join(args.model_dir, "export"), receiver)
        exported = exported and exported.decode()
    result = {
        **(live if args.live_eval or args.max_steps is not None else {}),
        "exported": exported,
        "process": jax.process_index(),
        "processes": jax.process_count(),
        "devices": jax.device_count(),
        "w": e.get_variable_value("w").tolist(),
        "b": float(e.get_variable_value("b")),
        "tables": {n: e.get_variable_value(n).tolist() for n in TABLES} if args.tables else {},
        "metrics": {k: float(v) for k, v in metrics.items()},
        "checkpoints": sorted(os.listdir(args.model_dir)),
        "calls": calls,
    }
    print("RESULT " + json.dumps(result), flush=True)
    sys.exit(result.get("exit", 0))


if __name__ == "__main__":
    main(sys.argv[1:])
