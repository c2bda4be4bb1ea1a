"""Several processes (``estimator.distribute``): TF_CONFIG clusters on ``jax.distributed``.

The multi-process tests run ``tests/jobs/multihost_job.py``'s job in localhost processes, each
with a timeout, so a hang fails the test instead of stalling the suite. The processes are
forked from the suite's server (``tests/support/forkserver.py``), which has imported the job's
module and this one (and with them JAX and this package, but started no JAX backend: each
process starts its own, with its own device count), so that each of the ~45 processes of
this file starts in a few hundredths of a second rather than the 2-3 s an interpreter takes
to import them. One test runs its job as fresh interpreters
(``python multihost_job.py ...``), the way a cluster starts its processes."""

import atexit
import faulthandler
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

import forkserver
import jax
import multihost_job
import numpy as np
import optax
import pytest
from damage import flip, largest_data_file

import estimator as est
from estimator import distribute

JOB = pathlib.Path(__file__).parent.parent / "jobs" / "multihost_job.py"


# ----- joining the cluster (in process: jax.distributed.initialize is recorded) -----------


@pytest.fixture
def initialize_calls(monkeypatch):
    calls = []
    monkeypatch.setattr(jax.distributed, "is_initialized", lambda: False)
    monkeypatch.setattr(jax.distributed, "initialize", lambda **kw: calls.append(kw))
    return calls


def _tf_config(monkeypatch, task_type, index, cluster=None):
    cluster = cluster or {
        "chief": ["host0:2222"],
        "worker": ["host1:2222", "host2:2222"],
        "evaluator": ["host3:2222"],
    }
    task = {"type": task_type, "index": index}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": task}))


def model_fn(features, labels, mode):
    w = est.get_variable("w", [1], initializer=est.initializers.zeros_initializer())
    loss = (features["x"] @ w - labels).mean() ** 2
    return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.1), predictions=loss)


@pytest.mark.parametrize(
    ("task_type", "index", "process_id", "tf_global_id"),
    [("chief", 0, 0, 0), ("worker", 0, 1, 2), ("worker", 1, 2, 3)],
)
def test_a_tf_config_cluster_starts_jax_distributed(
    tmp_path, monkeypatch, initialize_calls, task_type, index, process_id, tf_global_id
):
    # JAX process ids: the chief 0, then the workers. TF's global ids (TF 2.15's
    # _get_global_id_in_cluster) number the evaluator job before the workers.
    _tf_config(monkeypatch, task_type, index)
    config = est.RunConfig(model_dir=str(tmp_path))
    est.Estimator(model_fn, config=config)
    assert config.global_id_in_cluster == tf_global_id
    assert len(initialize_calls) == 1
    call = initialize_calls[0]
    assert call["coordinator_address"] == "host0:2222"
    assert call["num_processes"] == 3  # chief + 2 workers; the evaluator stays outside
    assert call["process_id"] == process_id
    assert call["heartbeat_timeout_seconds"] == distribute.cluster.DEFAULT_HEARTBEAT_SECS
    assert call["shutdown_timeout_seconds"] == distribute.cluster.DEFAULT_SHUTDOWN_SECS


def test_evaluator_no_cluster_and_an_initialised_job_do_not_initialise(
    tmp_path, monkeypatch, initialize_calls
):
    _tf_config(monkeypatch, "evaluator", 0)
    est.Estimator(model_fn, config=est.RunConfig(model_dir=str(tmp_path / "a")))
    monkeypatch.delenv("TF_CONFIG")
    est.Estimator(model_fn, config=est.RunConfig(model_dir=str(tmp_path / "b")))
    _tf_config(monkeypatch, "worker", 0)
    monkeypatch.setattr(jax.distributed, "is_initialized", lambda: True)  # the user's own
    est.Estimator(model_fn, config=est.RunConfig(model_dir=str(tmp_path / "c")))
    assert initialize_calls == []


def test_parameter_servers_are_refused_with_the_alternative(tmp_path, monkeypatch):
    cluster = {"chief": ["h:1"], "worker": ["h:2"], "ps": ["h:3"]}
    _tf_config(monkeypatch, "worker", 0, cluster)
    with pytest.raises(ValueError, match="no parameter servers here.*Remove the ps tasks"):
        est.Estimator(model_fn, config=est.RunConfig(model_dir=str(tmp_path)))


def test_input_context_is_tfs():
    # From TF 2.15.1: tf.distribute.InputContext(2, 1, 4): str, 8 -> 2, and 6 raises.
    context = distribute.InputContext(2, 1, 4)
    assert str(context) == "tf.distribute.InputContext(input pipeline id 1, total: 2)"
    assert context.get_per_replica_batch_size(8) == 2
    with pytest.raises(ValueError) as err:
        context.get_per_replica_batch_size(6)
    assert str(err.value) == (
        "The `global_batch_size` 6 is not divisible by `num_replicas_in_sync` 4 "
    )


def test_input_fn_gets_this_process_input_context(tmp_path):
    seen = []

    def input_fn(input_context):
        seen.append(input_context)
        return {"x": np.ones((4, 1), np.float32)}, np.ones((4,), np.float32)

    mesh = jax.sharding.Mesh(np.array(jax.devices()[:2]), ("data",))
    e = est.Estimator(model_fn, str(tmp_path), est.RunConfig(mesh=mesh))
    e.train(input_fn, steps=1)
    context = seen[0]
    assert (context.num_input_pipelines, context.input_pipeline_id) == (1, 0)
    assert context.num_replicas_in_sync == 2


def test_uneven_process_batch_names_the_fix():
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:4]), ("data",))
    place = distribute.process_local_placement(mesh)
    placed = place({"x": np.arange(8.0).reshape(8, 1)})
    assert placed["x"].shape == (8, 1) and len(placed["x"].sharding.device_set) == 4
    with pytest.raises(ValueError, match=r"split evenly over its 4 devices.*\(6, 1\)"):
        place({"x": np.zeros((6, 1))})


# ----- real jobs: processes x devices ------------------------------------------------------


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ",".join(map(str, ports))


def _run_job(argv: list, env: dict, out: str, err: str) -> None:
    """A forked process: the environment and output files a fresh interpreter would get
    from ``_launch``, the job, and its end as an interpreter's: an uncaught exception's
    traceback, then the ``atexit`` functions (JAX's ``jax.distributed`` shutdown among
    them, which a forked process would skip), then the exit status."""
    os.environ.clear()
    os.environ.update(env)
    for fd, path in ((1, out), (2, err)):
        opened = os.open(path, os.O_WRONLY | os.O_TRUNC)
        os.dup2(opened, fd)
        os.close(opened)
    # A hung job's threads' stacks, written to its error output on SIGUSR1 (see _result).
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    try:
        multihost_job.main(argv)
        status = 0
    except SystemExit as exit_:
        status = exit_.code
    except BaseException:
        sys.excepthook(*sys.exc_info())
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()
    sys.exit(status)


class _Forked:
    """A job's process forked from the server, with the part of ``subprocess.Popen``'s
    interface the tests use (text output, read when it has ended)."""

    def __init__(self, argv: list, env: dict, scratch: pathlib.Path) -> None:
        scratch.mkdir(parents=True, exist_ok=True)
        self._paths = [tempfile.mkstemp(suffix=s, dir=scratch)[1] for s in (".out", ".err")]
        self._process = forkserver.context().Process(
            target=_run_job, args=(argv, env, *self._paths)
        )
        self._process.start()
        self._output = None

    @property
    def returncode(self):
        return self._process.exitcode

    def poll(self):
        return self._process.exitcode

    def send_signal(self, sig: int) -> None:
        os.kill(self._process.pid, sig)

    def kill(self) -> None:
        self._process.kill()
        self._process.join()

    def output(self) -> tuple[str, str]:
        """What the process has written so far (also while it runs)."""
        return tuple(pathlib.Path(p).read_text(errors="replace") for p in self._paths)

    def communicate(self, timeout=None) -> tuple[str, str]:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired("multihost_job", timeout)
        if self._output is None:
            self._output = tuple(pathlib.Path(p).read_text(errors="replace") for p in self._paths)
        return self._output


def _launch(model_dir, task_type, index, ports, *extra, env=None, fresh=False):
    """A process of the job (``multihost_job.py``'s arguments), forked from the server, or
    with ``fresh`` a new interpreter."""
    argv = [str(model_dir), task_type, str(index), ports, *extra]
    env = {**os.environ, **(env or {})}
    if fresh:
        return subprocess.Popen(
            [sys.executable, str(JOB), *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
    return _Forked(argv, env, pathlib.Path(model_dir).parent / "output")


def _result(process, timeout=180):
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        shown = ""
        if isinstance(process, _Forked):  # its stacks (faulthandler, _run_job) and output
            process.send_signal(signal.SIGUSR1)
            time.sleep(1)
            out, err = process.output()
            shown = f"\n--- stdout:\n{out[-3000:]}\n--- stderr:\n{err[-12000:]}"
        process.kill()
        pytest.fail("a process of the job hung" + shown)
    assert process.returncode == 0, err[-3000:]
    line = next(x for x in out.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def _job(model_dir, *extra, own=False, processes=2, devices=2, fresh=False):
    """A chief and ``processes - 1`` workers (TF_CONFIG), each with ``devices`` devices,
    or with ``own`` two processes of a job the program starts itself
    (``jax.distributed.initialize``, no TF_CONFIG); ``fresh``: as new interpreters. Returns
    their results, chief first."""
    ports = _free_ports(processes)
    extra = (*extra, "--devices", str(devices))
    launched = [_launch(model_dir, "own" if own else "chief", 0, ports, *extra, fresh=fresh)]
    for index in range(processes - 1):
        task = ("own", index + 1) if own else ("worker", index)
        launched.append(_launch(model_dir, *task, ports, *extra, fresh=fresh))
    try:
        return [_result(p) for p in launched]
    finally:  # a failed or hung process leaves none of the job's others running
        for process in launched:
            if process.poll() is None:
                process.kill()


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """``single(*extra, devices=1)``: the result of the job's program run alone in one
    process (no cluster) with ``devices`` devices, the reference a job must equal; run
    once per module for each set of arguments."""
    results = {}

    def run(*extra, devices=1):
        key = (extra, devices)
        if key not in results:
            model_dir = tmp_path_factory.mktemp("single")
            process = _launch(model_dir, "single", 0, "-", *extra, "--devices", str(devices))
            results[key] = _result(process)
        return results[key]

    return run


def _assert_same_training(run, reference):
    np.testing.assert_allclose(run["w"], reference["w"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run["b"], reference["b"], rtol=1e-5)
    for key in ("mae", "loss", "global_step"):
        assert run["metrics"][key] == pytest.approx(reference["metrics"][key], rel=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("processes", "devices"), [(2, 1), (3, 1), (2, 2)], ids=["2x1", "3x1", "2x2"]
)
def test_cluster_shapes_train_as_one_process(tmp_path, single, processes, devices):
    """A chief and workers (TF_CONFIG) with one device each — one process per accelerator,
    the most common cluster shape, which crashed in orbax at the first save — or several:
    every process ends with the weights of one process reading the same global batches,
    and the job's checkpoints restore in a single process. The 2 x 1 job runs as fresh
    interpreters, as a cluster starts them."""
    reference = single()
    fresh = (processes, devices) == (2, 1)
    runs = _job(tmp_path / "multi", processes=processes, devices=devices, fresh=fresh)
    assert [(r["process"], r["processes"], r["devices"]) for r in runs] == [
        (i, processes, processes * devices) for i in range(processes)
    ]
    for run in runs:
        _assert_same_training(run, reference)
    assert [c for c in runs[0]["checkpoints"] if c.startswith("model.ckpt")] == [
        "model.ckpt_0",
        "model.ckpt_3",
        "model.ckpt_6",
    ]
    # The checkpoints restore here, in one process (with this suite's 4 devices).
    import multihost_job as job

    e = est.Estimator(job.model_fn, str(tmp_path / "multi"), est.RunConfig(tf_random_seed=3))
    np.testing.assert_allclose(e.get_variable_value("w"), runs[0]["w"], rtol=1e-6)
    restored = e.evaluate(job.eval_input_fn, name="restored")
    for key in ("mae", "loss", "global_step"):
        assert restored[key] == pytest.approx(runs[0]["metrics"][key], rel=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("partition", "own"),
    [(True, False), (False, True)],
    ids=["sharded", "own_init"],
)
def test_two_processes_train_as_one_with_four_devices(tmp_path, single, partition, own):
    """Sharded: ``w`` split over the 4 devices of the 2 processes (each process saves its
    shards); the checkpoint still reads back whole in one process. Own init: the program
    called ``jax.distributed.initialize`` itself; process 0 is the chief."""
    reference = single(devices=4)
    chief, worker = _job(tmp_path / "multi", *(["--partition"] if partition else []), own=own)
    assert (reference["processes"], reference["devices"]) == (1, 4)
    assert (chief["processes"], chief["devices"]) == (2, 4)
    assert (chief["process"], worker["process"]) == (0, 1)
    # The same global batches (each process fed its half): the same weights and metrics.
    for run in (chief, worker):
        _assert_same_training(run, reference)
    # One set of checkpoints (saved together at 0, 3 and 6) and the chief's event files.
    model_dir = tmp_path / "multi"
    assert [c for c in chief["checkpoints"] if c.startswith("model.ckpt")] == [
        "model.ckpt_0",
        "model.ckpt_3",
        "model.ckpt_6",
    ]
    assert len(list(model_dir.glob("events.out.tfevents.*"))) == 1
    assert len(list((model_dir / "eval").glob("events.out.tfevents.*"))) == 1


# RunConfig(steps_per_execution=4, log_step_count_steps=100, save_checkpoints_steps=5,
# save_summary_steps=7): a call ends after step 1 (the first logging, NaN check and summary
# fetch), at the saves of steps 5 and 10, at the summary of step 8 (the chief's summary
# hook: the worker fetches there too), after 4 steps, and at the last step.
FUSED = ("--steps-per-execution", "4", "--log-steps", "100", "--save-steps", "5")
FUSED += ("--summary-steps", "7")
# Checkpoints every 1 ms, decided every 4 steps (log_step_count_steps) by the chief's clock
# (SyncedTimer): saves at 4, 8 and 12, NaN checks and logging after steps 1, 5 and 9.
FUSED_SECS = ("--steps-per-execution", "4", "--log-steps", "4", "--save-secs", "0.001")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("extra", "calls", "job_calls", "checkpoints"),
    [
        # 12 steps: [1] [2 3 4 5] [6 7 8] [9 10] [11 12]; a save at 10 inside a call of 4.
        ((*FUSED, "--steps", "12"), [1, 4, 3, 2, 2], None, [0, 5, 10, 12]),
        # The input (11 batches on each process) ends inside a call: [9 10] [11].
        ((*FUSED, "--steps", "0", "--batches", "11"), [1, 4, 3, 2, 1], None, [0, 5, 10, 11]),
        # model_fn's training_chief_hooks (here: the loss after every even step) run on the
        # chief alone: a job runs one step per call; one process fuses [3 4] [7 8] ...
        (
            (*FUSED, "--steps", "12", "--chief-hook"),
            [1, 1, 2, 1, 1, 2, 2, 2],
            [1] * 12,
            [0, 5, 10, 12],
        ),
        # The job: [1] [2 3 4] [5] [6 7 8] [9] [10 11 12]; one process saves after every
        # step by its own clock, so each step is a call.
        ((*FUSED_SECS, "--steps", "12"), [1] * 12, [1, 3, 1, 3, 1, 3], [0, 4, 8, 12]),
    ],
    ids=["max_steps", "input_ends_in_a_call", "chief_hooks", "synced_timer"],
)
def test_fused_steps_in_a_job_train_as_one_process(
    tmp_path, single, extra, calls, job_calls, checkpoints
):
    """steps_per_execution=4 in a chief + worker job with one device each: both processes
    run the same device calls (each ends where some process's hooks fetch or save, at the
    last step, or at the end of the input), which are those one process reading the same
    global batches runs, and end with its weights and checkpoints."""
    reference = single(*extra)
    runs = _job(tmp_path / "multi", *extra, devices=1)
    assert reference["calls"] == calls
    for run in runs:
        assert run["calls"] == (job_calls or calls)
        _assert_same_training(run, reference)
    saved = [c for c in runs[0]["checkpoints"] if c.startswith("model.ckpt")]
    assert sorted(saved) == sorted(f"model.ckpt_{step}" for step in checkpoints)


@pytest.mark.slow
@pytest.mark.parametrize("devices", [1, 2], ids=["2x1", "2x2"])
def test_grouped_tables_in_a_job_train_as_one_process(tmp_path, single, devices):
    """Two small tables under the canned FTRL, updated as one array in the step and carried
    joined through fused calls of 4 steps (``estimator.engine.table_groups``): a chief and a
    worker with one device each, or two, end with the tables, weights and metrics of one
    process reading the same global batches."""
    extra = ("--tables", "--steps-per-execution", "4", "--log-steps", "100", "--steps", "12")
    reference = single(*extra)
    assert reference["calls"] == [1, 2, 3, 3, 3]  # fused: [1] [2 3] [4 5 6] ... (saves every 3)
    for run in _job(tmp_path / "multi", *extra, devices=devices):
        _assert_same_training(run, reference)
        assert set(run["tables"]) == {"tables/a", "tables/b"}
        for name, values in run["tables"].items():
            np.testing.assert_allclose(values, reference["tables"][name], rtol=1e-5, atol=1e-7)
            assert np.any(np.asarray(values) != 0)  # trained


@pytest.mark.slow
@pytest.mark.parametrize(("processes", "devices"), [(2, 1), (2, 2)], ids=["2x1", "2x2"])
def test_in_training_evaluation_of_a_job_is_the_whole_sets(tmp_path, single, processes, devices):
    """A chief and a worker train with an InMemoryEvaluatorHook (every 3 steps), a
    ValidationHandler and training metrics (every 3 steps). Each evaluation: every process
    its shard of 50 rows in batches of 8 (4 batches and 3, the last one of 2 rows), merged;
    it equals a single-process
    evaluate() of the whole set on the checkpoint of that step (saved every 3 steps), to
    1e-6, on every process; the chief alone wrote it. The training metrics equal those of
    one process reading the same global batches."""
    import multihost_job as job

    reference = single("--live-eval")
    chief, worker = _job(tmp_path / "multi", "--live-eval", processes=processes, devices=devices)
    assert sorted(chief["live"], key=int) == ["0", "3", "6"]  # at start, every 3, (end: 6)
    e = est.Estimator(job.model_fn, str(tmp_path / "multi"), est.RunConfig(tf_random_seed=3))
    for step, live in chief["live"].items():
        path = str(tmp_path / "multi" / f"model.ckpt_{step}")
        expected = e.evaluate(job.live_eval_input_fn, checkpoint_path=path, name="reference")
        assert expected["global_step"] == int(step)
        for key in ("mae", "loss"):
            assert live[key] == pytest.approx(expected[key], abs=1e-6), (step, key)
            assert worker["live"][step][key] == pytest.approx(live[key], abs=1e-7)
            assert reference["live"][step][key] == pytest.approx(live[key], abs=1e-6)
    # The ValidationHandler (every 3 batches) evaluates the same way.
    assert sorted(chief["validation"], key=int) == ["3", "6"]
    for step, results in chief["validation"].items():
        for key in ("mae", "loss"):
            assert results["validation/" + key] == pytest.approx(chief["live"][step][key], abs=1e-7)
    written = est.events.read_eval_metrics(str(tmp_path / "multi" / "eval_live"))
    assert sorted(written) == [0, 3, 6]
    assert len(list((tmp_path / "multi" / "eval_live").glob("events.out.tfevents.*"))) == 1
    assert sorted(chief["train_metrics"], key=int) == ["3", "6"]
    for step, report in chief["train_metrics"].items():
        for key in ("train/mae", "train/loss"):
            assert report[key] == pytest.approx(reference["train_metrics"][step][key], abs=1e-6)
            assert worker["train_metrics"][step][key] == pytest.approx(report[key], abs=1e-7)


@pytest.mark.slow
def test_a_killed_worker_fails_the_chief_quickly_and_a_restart_resumes(tmp_path):
    model_dir = tmp_path / "job"
    ports = _free_ports(2)
    env = {"JAX_ESTIMATOR_HEARTBEAT_SECS": "5"}
    chief = _launch(model_dir, "chief", 0, ports, "--forever", env=env)
    worker = _launch(model_dir, "worker", 0, ports, "--forever", env=env)
    deadline = time.time() + 120
    while not list(model_dir.glob("model.ckpt_[1-9]*")):  # training is under way
        assert time.time() < deadline and chief.poll() is None, "the job did not start"
        time.sleep(0.2)
    worker.send_signal(signal.SIGKILL)
    killed = time.time()
    try:
        _, err = chief.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        chief.kill()
        pytest.fail("the chief hung after its worker died")
    worker.communicate()
    assert chief.returncode != 0
    assert time.time() - killed < 60
    assert "heartbeat timeout" in err
    # Restart both: training resumes from the last complete checkpoint.
    complete = max(
        int(p.name.split("_")[1]) for p in model_dir.glob("model.ckpt_*") if p.name[11:].isdigit()
    )
    chief_result, _ = _job(model_dir, "--steps", "3")
    assert chief_result["metrics"]["global_step"] == complete + 3


@pytest.mark.parametrize("devices", [1, 2])
def test_restore_fallback_in_a_job_resumes_every_process_from_the_same_checkpoint(
    tmp_path, devices
):
    """RunConfig(restore_fallback=True) in a chief + worker job whose latest checkpoint is
    damaged: both resume from the intact one before it, and the chief alone moves the
    damaged one aside. The worker starts reading each checkpoint 1 s late (a slower host),
    when the chief has already moved the damaged one: a checkpoint gone reads as damaged
    (every read error is a DataLossError), so the worker falls back to the same one."""
    model_dir = tmp_path / "job"
    _job(model_dir, "--steps", "6", devices=devices)  # checkpoints at steps 0, 3 and 6
    damaged = model_dir / "model.ckpt_6"
    flip(largest_data_file(str(damaged), "variables"))
    chief, worker = _job(model_dir, "--steps", "3", "--restore-fallback", "1", devices=devices)
    # Resumed from step 3 (not 0, not the damaged 6): 3 more steps end at 6.
    assert chief["metrics"]["global_step"] == worker["metrics"]["global_step"] == 6
    assert chief["w"] == worker["w"]
    assert {"damaged.model.ckpt_6", "model.ckpt_6"} <= set(chief["checkpoints"])


@pytest.mark.slow
@pytest.mark.parametrize("devices", [1, 2])
def test_train_and_evaluate_with_an_evaluator_task(tmp_path, devices):
    """TF_CONFIG chief + worker train one job; the ``evaluator`` task, outside it, evaluates
    each new checkpoint, exports, and exits after the one at ``max_steps``; its metrics are
    those the training processes compute over the same data. All three exit 0, with one
    device each (one process per accelerator) as with two."""
    model_dir = tmp_path / "job"
    ports = _free_ports(2)
    extra = ("--train-and-evaluate", "--steps", "9", "--devices", str(devices))
    evaluator = _launch(model_dir, "evaluator", 0, ports, *extra)
    chief = _launch(model_dir, "chief", 0, ports, *extra)
    worker = _launch(model_dir, "worker", 0, ports, *extra)
    chief_result, _ = _result(chief), _result(worker)
    evaluated = _result(evaluator)
    assert evaluated["processes"] == 1 and chief_result["processes"] == 2
    assert chief_result["devices"] == 2 * devices
    assert evaluated["metrics"]["global_step"] == 9
    for key in ("mae", "loss"):
        assert evaluated["metrics"][key] == pytest.approx(chief_result["metrics"][key], rel=1e-5)
    assert list((model_dir / "export" / "latest").iterdir())  # the evaluator exported
    assert list((model_dir / "eval").glob("events.out.tfevents.*"))


@pytest.mark.slow
@pytest.mark.parametrize("devices", [1, 2])
def test_train_and_evaluate_every_n_steps_on_the_chief_and_workers(tmp_path, devices):
    """EvalSpec(every_n_steps=3) in a chief + worker job (no evaluator task): both evaluate
    their shards at step 3 and get the merged result; the early-stopping hook (the chief's
    decision, broadcast) stops both at that step; the chief alone exported (BestExporter)
    and wrote the evaluation."""
    model_dir = tmp_path / "job"
    chief, worker = _job(
        model_dir, "--train-and-evaluate", "--every-n-steps", "3", "--steps", "9", devices=devices
    )
    assert chief["metrics"]["global_step"] == worker["metrics"]["global_step"] == 3
    assert worker["metrics"]["mae"] == pytest.approx(chief["metrics"]["mae"], abs=1e-7)
    exports = [p for p in (model_dir / "export" / "best").iterdir() if p.name.isdigit()]
    assert len(exports) == 1  # beside BestExporter's best_eval_result.json
    assert sorted(est.events.read_eval_metrics(str(model_dir / "eval"))) == [3]


def test_joining_after_jax_started_says_what_to_do(tmp_path, monkeypatch):
    jax.devices()  # JAX has started in this process: too late to join a cluster
    _tf_config(monkeypatch, "worker", 0)
    with pytest.raises(
        RuntimeError, match=r"Could not join the TF_CONFIG cluster as worker:0"
    ) as e:
        est.Estimator(model_fn, config=est.RunConfig(model_dir=str(tmp_path)))
    assert "call jax.distributed.initialize(...) yourself first" in str(e.value)
    assert jax.process_count() == 1  # nothing half-joined


@pytest.mark.slow
def test_processes_with_different_model_dirs_fail_clearly(tmp_path):
    ports = _free_ports(2)
    chief = _launch(tmp_path / "a", "chief", 0, ports)
    worker = _launch(tmp_path / "b", "worker", 0, ports)
    for process in (chief, worker):
        try:
            _, err = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            pytest.fail("a process hung on a model_dir mismatch")
        assert process.returncode != 0
        assert "Every process of a multi-process job must use the same model_dir" in err


@pytest.mark.slow
def test_only_the_chief_writes_the_export_and_it_serves(tmp_path):
    chief, worker = _job(tmp_path, "--steps", "3", "--export")
    assert worker["exported"] is None
    exported = chief["exported"]
    assert [p.name for p in (tmp_path / "export").iterdir()] == [os.path.basename(exported)]
    # The export runs in this (single) process: predictions from the trained weights.
    x = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
    predictions = est.export.load(exported).signatures["serving_default"](x=x)
    expected = x @ np.array(chief["w"], np.float32) + chief["b"]
    np.testing.assert_allclose(predictions["y"], expected, rtol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("extra", "batches"), [((), 5), (FUSED, 6)], ids=["one_step_per_call", "fused"]
)
def test_a_process_whose_input_ends_early_fails_the_job_quickly(tmp_path, extra, batches):
    """The worker feeds 5 batches, the chief 40, training until the input ends: the worker
    names the mismatch and exits; the chief stops by the heartbeat timeout — no hang. Fused:
    steps_per_execution=4, the worker's input ending inside a call (its steps 6 to 9)."""
    ports = _free_ports(2)
    env = {
        "JAX_ESTIMATOR_HEARTBEAT_SECS": "5",
        "JAX_ESTIMATOR_INPUT_END_SECS": "5",
        "JAX_ESTIMATOR_SHUTDOWN_SECS": "5",
    }
    chief = _launch(tmp_path, "chief", 0, ports, "--steps", "0", *extra, env=env)
    worker = _launch(
        tmp_path, "worker", 0, ports, "--steps", "0", "--batches", str(batches), *extra, env=env
    )
    errors = []
    for process in (worker, chief):
        try:
            _, err = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            pytest.fail("a process hung after another's input ended")
        assert process.returncode != 0
        errors.append(err)
    assert f"The input of process 1 ended after {batches} batches" in errors[0]
    assert "must feed the same number of batches" in errors[0]


def test_chief_duties_in_a_multi_process_job(tmp_path):
    """TF's MonitoredTrainingSession: chief-only hooks on the chief; in a JAX job every
    process also saves checkpoints (a collective save) at steps they agree on, and only
    the chief logs the loss. With steps_per_execution > 1 the other processes fetch where
    the chief's summary hook does (a summary hook without an output directory)."""
    from estimator.engine.default_hooks import default_training_hooks
    from estimator.engine.steps import StepInfo

    config = est.RunConfig(model_dir=str(tmp_path), save_checkpoints_secs=600)
    info = StepInfo((), (), ("loss",), None)

    def kinds(chief, processes, config=config):
        hooks = default_training_hooks(
            config, info, [], [], lambda: None, chief=chief, processes=processes
        )
        return [type(h).__name__ for h in hooks]

    assert kinds(chief=False, processes=2) == [
        "CheckpointSaverHook",
        "SummarySaverHook",
        "NanTensorHook",
    ]
    one_step = config.replace(steps_per_execution=1)
    assert kinds(False, 2, one_step) == ["CheckpointSaverHook", "NanTensorHook"]
    assert kinds(chief=True, processes=2) == [
        "CheckpointSaverHook",
        "StepCounterHook",
        "SummarySaverHook",
        "NanTensorHook",
        "LoggingTensorHook",
    ]
    assert kinds(chief=False, processes=1) == ["NanTensorHook", "LoggingTensorHook"]  # as TF


def test_synced_timer_decides_time_only_at_agreed_steps():
    now = [0.0]
    timer = est.SecondOrStepTimer(every_secs=10, clock=lambda: now[0])
    synced = distribute.SyncedTimer(timer, every_secs=10, check_every=100)
    assert synced.should_trigger_for_step(0)  # the first step, as the plain timer
    synced.update_last_triggered_step(0)
    now[0] = 60.0  # 10 s passed long ago, but only a multiple of 100 steps checks
    assert [synced.should_trigger_for_step(s) for s in (1, 50, 99, 100)] == [0, 0, 0, 1]
    steps = distribute.SyncedTimer(est.SecondOrStepTimer(every_steps=3), None)
    steps.update_last_triggered_step(0)  # step intervals agree by themselves: no broadcast
    assert [steps.should_trigger_for_step(s) for s in (1, 2, 3)] == [0, 0, 1]


# ----- preemption: SIGTERM to one process of a job -----------------------------------------


def _ended(process, timeout=180):
    """``(exit status, RESULT or None, stderr)`` of a process of a job, once it has ended."""
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("a process of the job hung")
    lines = [x for x in out.splitlines() if x.startswith("RESULT ")]
    return process.returncode, json.loads(lines[0][len("RESULT ") :]) if lines else None, err


def _train_to(model_dir, processes, max_steps, faults=None, extra=()):
    """A chief and workers with one device each, training to ``max_steps`` from the latest
    checkpoint (``faults``: ``{process index: extra arguments}``; ``extra``: every
    process's); their ``_ended``."""
    ports = _free_ports(processes)
    launched = []
    for i in range(processes):
        task = ("chief", 0) if i == 0 else ("worker", i - 1)
        argv = ["--max-steps", str(max_steps), "--devices", "1", *extra]
        launched.append(_launch(model_dir, *task, ports, *argv, *(faults or {}).get(i, [])))
    try:
        return [_ended(p) for p in launched]
    finally:
        for process in launched:
            if process.poll() is None:
                process.kill()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("processes", "first", "second", "to_the_end", "extra"),
    [
        (2, (0, "step"), (1, "save"), True, ()),
        (3, (2, "step"), (0, "save"), False, ()),
        (2, (1, "step"), (0, "save"), True, ("--steps-per-execution", "4", "--log-steps", "100")),
    ],
    ids=["2x1", "3x1", "2x1-fused"],
)
def test_a_preempted_job_saves_one_step_everywhere_and_resumes_as_if_uninterrupted(
    tmp_path, single, processes, first, second, to_the_end, extra
):
    """SIGTERM to one process of a TF_CONFIG job (one device per process), as a scheduler
    sends it before preempting a host: every process stops after the step the job agrees
    on (JAX's preemption sync point), saves that step's checkpoint together and exits 143;
    the chief logs the step. Twice: first to one process while a step runs, then, in the
    restarted job, to another during a periodic save (2 x 1: the chief, then the worker;
    3 x 1: the last worker, then the chief; 2 x 1 fused: steps_per_execution=4, nothing
    fetched between the saves, so that the steps in between run as calls of several: the
    worker, then the chief). No step before the signal is lost. The 2 x 1 jobs restarted a
    third time reach max_steps with the weights of one uninterrupted process (the 3 x 1
    job's second run resumed from its first's checkpoint already)."""
    model_dir = tmp_path / "job"
    at = 4
    for target, moment in (first, second):
        fault = {target: ["--sigterm-in", moment, "--sigterm-at", str(at)]}
        runs = _train_to(model_dir, processes, 60, fault, extra)
        assert [code for code, _, _ in runs] == [143] * processes, runs[target][2][-3000:]
        (saved,) = {result["last_step"] for _, result, _ in runs}  # one step on every process
        (calls,) = {tuple(result["calls"]) for _, result, _ in runs}  # the same calls
        assert (max(calls) > 1) == bool(extra), calls  # fused: calls of several steps
        # The signal came while step at + 1 ran, or in the save of the first multiple of 3
        # from at (checkpoints every 3 steps): the agreed step is that one or later.
        assert saved >= (at + 1 if moment == "step" else -(-at // 3) * 3), (moment, at, saved)
        assert est.checkpoint.latest_checkpoint(str(model_dir)).endswith(f"model.ckpt_{saved}")
        assert (
            f"every process saves the checkpoint of step {saved}, the step they agreed on"
            in (runs[0][2])
        )
        at = saved + 2
    if not to_the_end:
        return
    final = _train_to(model_dir, processes, 60, extra=extra)
    reference = single("--max-steps", "60")
    for code, result, err in final:
        assert code == 0, err[-3000:]
        assert result["metrics"]["global_step"] == 60
        _assert_same_training(result, reference)


@pytest.mark.slow
def test_a_preempted_evaluator_exits_and_writes_nothing(tmp_path):
    """The evaluator task stays outside the training job: waiting for a checkpoint, it
    ends on SIGTERM at once (SIGTERM's default action; it has nothing to save) and leaves
    model_dir as it was."""
    model_dir = tmp_path / "job"
    evaluator = _launch(model_dir, "evaluator", 0, _free_ports(2), "--train-and-evaluate")
    deadline = time.time() + 120
    while "started" not in evaluator.output()[0]:
        assert time.time() < deadline and evaluator.poll() is None, evaluator.output()[1]
        time.sleep(0.1)
    time.sleep(1)  # in train_and_evaluate's wait for the first checkpoint
    evaluator.send_signal(signal.SIGTERM)
    sent = time.time()
    code, _, _ = _ended(evaluator, timeout=30)
    assert code == -signal.SIGTERM and time.time() - sent < 10
    assert not model_dir.exists() or not list(model_dir.iterdir())


# ----- a process that raises ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("devices", "failing", "fault", "error"),
    [
        (1, 1, ["--fail-in", "input"], "ValueError: input_fn failed at batch 5"),
        (1, 1, ["--fail-in", "model"], "ValueError: model_fn failed on this process"),
        (2, 0, ["--fail-in", "hook"], "ValueError: a hook failed after step 5"),
    ],
    ids=["2x1-worker-input_fn", "2x1-worker-model_fn", "2x2-chief-hook"],
)
def test_a_process_that_raises_ends_the_job_at_once_and_every_process_says_why(
    tmp_path, devices, failing, fault, error
):
    """A chief and a worker training for good; one raises (its input_fn at batch 5, its
    model_fn when traced, a hook after step 5). Every process ends within the heartbeat
    timeout + 10 s of the raise (JAX alone: the raising process waited 120 s at the
    shutdown barrier, then every process aborted), each with Python's status 1 and no
    native stack dump; the failing process's last error is its own, the other's last line
    names the failed task and that error: a JobFailedError, or (2 x 2: a main thread still
    blocked among its devices once the other process is gone) the log line of the
    process ended the heartbeat timeout later."""
    ports = _free_ports(2)
    env = {"JAX_ESTIMATOR_HEARTBEAT_SECS": "5"}
    extra = ("--forever", "--devices", str(devices))
    tasks = [("chief", 0), ("worker", 0)]
    launched = [
        _launch(tmp_path / "job", *task, ports, *extra, *(fault if i == failing else []), env=env)
        for i, task in enumerate(tasks)
    ]
    try:
        ended = _ends(launched, timeout=120)
    finally:
        for process in launched:
            if process.poll() is None:
                process.kill()
    outputs = [process.output() for process in launched]
    raised = min(
        float(line.split()[-1])
        for line in outputs[failing][0].splitlines()
        if line.startswith("failing at")
    )
    assert max(ended) - raised < 5 + 10, (max(ended) - raised, outputs)
    task = "chief:0 (process 0 of 2)" if failing == 0 else "worker:0 (process 1 of 2)"
    for i, (process, (_, err)) in enumerate(zip(launched, outputs, strict=True)):
        assert process.returncode == 1, err[-3000:]
        assert "Check failure stack trace" not in err and "Fatal Python error" not in err
        if i == failing:
            assert _last_error_line(err) == error
        else:  # a JobFailedError, or the log line of a process ended while still blocked
            assert f"{task} failed: {error}" in err.strip().splitlines()[-1]


def _last_error_line(err: str) -> str:
    """The last line of ``err`` that states an exception (``Type: message``)."""
    return [x for x in err.splitlines() if re.match(r"[\w.]+(Error|Exception)\b", x)][-1]


def _ends(processes, timeout):
    """The times (``time.time()``) at which each process ended."""
    ends = [None] * len(processes)
    deadline = time.time() + timeout
    while None in ends:
        for i, process in enumerate(processes):
            if ends[i] is None and process.poll() is not None:
                ends[i] = time.time()
        if time.time() > deadline:
            pytest.fail(f"the job did not end: {[p.output()[1][-2000:] for p in processes]}")
        time.sleep(0.05)
    return ends


@pytest.mark.slow
def test_a_process_blocked_when_another_fails_is_ended_and_says_why(tmp_path):
    """The worker's hook raises after step 5 while the chief's main thread is blocked for
    good after that step (as in a collective that does not notice a dead peer, as a GPU
    collective may not): the chief logs the failure at once and, the heartbeat timeout later, ends
    itself with status 1, its last line naming the failed task and its error."""
    ports = _free_ports(2)
    env = {"JAX_ESTIMATOR_HEARTBEAT_SECS": "3"}
    chief = _launch(tmp_path / "job", "chief", 0, ports, "--forever", "--block-at", "5", env=env)
    worker = _launch(
        tmp_path / "job", "worker", 0, ports, "--forever", "--fail-in", "hook", env=env
    )
    try:
        ended = _ends([chief, worker], timeout=120)
    finally:
        for process in (chief, worker):
            if process.poll() is None:
                process.kill()
    out, err = chief.output()
    raised = float(
        next(x for x in worker.output()[0].splitlines() if x.startswith("failing")).split()[-1]
    )
    assert 3 <= ended[0] - raised < 3 + 10
    assert chief.returncode == 1 and worker.returncode == 1
    assert "worker:0 (process 1 of 2) failed: ValueError: a hook failed after step 5. " in err
    assert (
        err.strip()
        .splitlines()[-1]
        .endswith(
            "ending it with status 1. worker:0 (process 1 of 2) failed: ValueError: a hook failed "
            "after step 5"
        )
    )
