"""The four TF 1 programs of ``tests/compat/programs/`` end to end: jax-estimator (the
one-line port) against TensorFlow 2.15 running the unchanged file, at 1,000 and 10,000 steps.

Every run is a fresh process. Ours gets an empty persistent compilation cache of its own
(``JAX_ESTIMATOR_CACHE_DIR``), so compiling is part of the time, as TF's graph building
is part of its. Two times per run, both read from the program's ``RESULT`` line or the
clock around the process:

* **main**: from the start of the program's ``main`` (data loading, building the
  Estimator, training, evaluating, compiles included) to its end;
* **process**: the whole process, Python and the framework's import included (TF's import
  alone is ~2.5 s on this machine, jax's ~1 s).

Both import their framework from compiled bytecode: TensorFlow's and jax's modules were
compiled by ``pip install``; this project's (an editable install) are compiled once, before
the runs, into a temporary ``PYTHONPYCACHEPREFIX`` (see :func:`bytecode_env`).

The ratio is TF's time over ours (above 1: we are faster). With ``--warm`` a second run of
ours reads its compiled programs from the first run's cache (a rerun of the same job).
The target: at least 1 at 1,000 steps, at least 3 at 10,000 steps. Timings on a
shared machine are noisy; ``--repeat`` keeps the best of several runs of each.

Usage::

    python benchmarks/compat_programs.py [--tf-python /work/venvs/tf215/bin/python]
        [--programs iris mnist_conv regression wide] [--steps 1000 10000] [--repeat 1]
        [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = os.path.join(ROOT, "tests", "compat", "programs")
TF_IMPORT = "import tensorflow.compat.v1 as tf"
OUR_IMPORT = "import estimator.compat.v1 as tf"
DEFAULT_TF = "/work/venvs/tf215/bin/python"


def run_ported(path: str, argv: list[str]) -> None:
    """Runs the program at ``path`` with its TensorFlow import line replaced (in this
    process: the benchmark's child)."""
    with open(path) as f:
        source = f.read().replace(TF_IMPORT, OUR_IMPORT, 1)
    sys.path.append(os.path.dirname(path))  # as when run as a script: ``_report`` beside it
    module = types.ModuleType("__compat_program__")
    module.__file__ = path
    exec(compile(source, path, "exec"), module.__dict__)
    module.main([path, *argv])


def _result(stdout: str) -> dict:
    line = next(x for x in stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def _once(command: list[str], env: dict) -> dict:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    result = _result(done.stdout)
    result["process_seconds"] = wall
    return result


def _args(program: str, steps: int, model_dir: str, data_dir: str | None) -> list[str]:
    args = ["--train_steps", str(steps), "--model_dir", model_dir, "--seed", "1"]
    if program == "wide" and data_dir:
        args += ["--data_dir", data_dir]
    return args


def bytecode_env(prefix: str) -> dict:
    """The environment of a child with Python's bytecode cache under ``prefix``, filled
    now for this project's packages: what ``pip install`` gives TensorFlow's and jax's
    modules (an editable install compiles ours on first import, unless
    ``PYTHONDONTWRITEBYTECODE`` forbids it, and then in every process)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = prefix
    packages = [os.path.join(ROOT, name) for name in ("estimator", "canned")]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *packages], env=env, check=True)
    return env


def ours(
    program: str, steps: int, data_dir: str | None, warm: bool, env: dict
) -> tuple[dict, dict | None]:
    """A cold run (empty compilation cache) and, with ``warm``, a second run that reads its
    programs from that cache (what a rerun of a job sees)."""
    with tempfile.TemporaryDirectory() as work:
        env = dict(env, JAX_ESTIMATOR_CACHE_DIR=os.path.join(work, "xla"))
        path = os.path.join(PROGRAMS, f"{program}.py")
        command = [sys.executable, os.path.abspath(__file__), "--run-ported", path]
        runs = []
        for i in range(2 if warm else 1):
            model_dir = os.path.join(work, f"model{i}")
            runs.append(_once(command + _args(program, steps, model_dir, data_dir), env))
        return runs[0], (runs[1] if warm else None)


def theirs(tf_python: str, program: str, steps: int, data_dir: str | None) -> dict:
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(PROGRAMS, f"{program}.py")
        command = [tf_python, path] + _args(program, steps, os.path.join(work, "m"), data_dir)
        return _once(command, dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


def _best(runs: list[dict]) -> dict:
    return min(runs, key=lambda r: r["seconds"])


def _quality(result: dict) -> str:
    if "accuracy" in result:
        return f"acc {result['accuracy']:.4f}"
    return f"mse {result['mse']:.4f}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tf-python", default=DEFAULT_TF if os.path.exists(DEFAULT_TF) else None)
    parser.add_argument(
        "--programs", nargs="+", default=["iris", "mnist_conv", "regression", "wide"]
    )
    parser.add_argument("--steps", nargs="+", type=int, default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--warm", action="store_true", help="also rerun ours with its compilation cache filled"
    )
    parser.add_argument(
        "--data-dir",
        default=os.environ.get("ADULT_DATA_DIR")
        or os.path.join(ROOT, "..", "shared", "data", "adult"),
    )
    args = parser.parse_args(argv)
    header = (
        f"{'program':<11} {'steps':>6}  {'ours main s':>11} {'TF main s':>9} {'TF/ours':>7}"
        f"  {'ours proc s':>11} {'TF proc s':>9} {'TF/ours':>7}  quality ours / TF"
    )
    print(header)
    print("-" * len(header))
    pycache = tempfile.TemporaryDirectory()
    env = bytecode_env(pycache.name)
    for steps in args.steps:
        for program in args.programs:
            pairs = [
                ours(program, steps, args.data_dir, args.warm, env) for _ in range(args.repeat)
            ]
            mine = _best([cold for cold, _ in pairs])
            warm = _best([w for _, w in pairs]) if args.warm else None
            if args.tf_python:
                tf = _best(
                    [
                        theirs(args.tf_python, program, steps, args.data_dir)
                        for _ in range(args.repeat)
                    ]
                )
                print(
                    f"{program:<11} {steps:>6}  {mine['seconds']:>11.2f} {tf['seconds']:>9.2f} "
                    f"{tf['seconds'] / mine['seconds']:>7.2f}  {mine['process_seconds']:>11.2f} "
                    f"{tf['process_seconds']:>9.2f} "
                    f"{tf['process_seconds'] / mine['process_seconds']:>7.2f}  "
                    f"{_quality(mine)} / {_quality(tf)}",
                    flush=True,
                )
                if warm is not None:
                    print(
                        f"{'  rerun':<11} {steps:>6}  {warm['seconds']:>11.2f} {'':>9} "
                        f"{tf['seconds'] / warm['seconds']:>7.2f}  "
                        f"{warm['process_seconds']:>11.2f} {'':>9} "
                        f"{tf['process_seconds'] / warm['process_seconds']:>7.2f}  "
                        "(ours with the compilation cache of the run above)",
                        flush=True,
                    )
            else:
                print(
                    f"{program:<11} {steps:>6}  {mine['seconds']:>11.2f} {'-':>9} {'-':>7}  "
                    f"{mine['process_seconds']:>11.2f} {'-':>9} {'-':>7}  {_quality(mine)}",
                    flush=True,
                )


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--run-ported":
        run_ported(sys.argv[2], sys.argv[3:])
    else:
        main()
