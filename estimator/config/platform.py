"""Everything this package changes in JAX for the whole process, and every code path it
takes only on the CPU backend: one module, each with a switch.

Process-wide settings, made once, by the first ``Estimator`` built (:func:`configure`):

* **The persistent compilation cache** (on by default, so a rerun compiles nothing):
  ``jax.jit`` compiles every program anew in each process; JAX can keep compiled programs on
  disk, keyed by the program, the jax/jaxlib version and the device. The directory is
  ``RunConfig(compilation_cache_dir=...)``, by default ``$JAX_ESTIMATOR_CACHE_DIR`` or
  ``~/.cache/jax-estimator/xla``; ``None`` turns it off, and a process that chose a cache
  directory itself (``jax.config.update("jax_compilation_cache_dir", ...)`` or
  ``$JAX_COMPILATION_CACHE_DIR``) keeps its own. Every program is cached
  (``jax_persistent_cache_min_compile_time_secs = 0``), at most 2 GiB of them: each process
  that enables the directory prunes it once, in a background thread, when it holds more,
  least recently used entries first (file access times), down to 1.5 GiB
  (:func:`prune_compilation_cache`). JAX's own size cap (``jax_compilation_cache_max_size``)
  is left off: with it, every write of a new program lists the whole directory and reads
  each entry's access-time file under a lock (``jax/_src/lru_cache.py``), a cost linear in
  the entries that a run compiling thousands of programs pays at each of them
  (``benchmarks/cache_writes.py`` measures it with and without the cap). A damaged or
  half-written entry is read as a miss (JAX warns and compiles). A process with JAX's size
  cap on in the same directory cannot write there: its scan expects an access-time file
  beside every entry (jax-ml/jax#39880).
* **Threefry unrolled on the CPU** (``JAX_ESTIMATOR_UNROLL_THREEFRY=0`` turns it off): JAX
  lowers its ``threefry2x32`` primitive (every ``jax.random`` draw with the default key) on
  the CPU as a ``while`` loop over the hash's five groups of four rounds, and on other
  platforms as the unrolled twenty rounds. On XLA's CPU backend the rolled form is the slow
  one to compile and to run (several times slower to compile, about twice as slow to draw
  a dropout mask; ``benchmarks/cold_start.py`` counts the compile time). JAX's own unrolled
  lowering is registered for the CPU: the same Threefry-2x32 hash (Salmon et al., "Parallel
  random numbers: as easy as 1, 2, 3", SC 2011), so every random value is bit-for-bit what
  JAX draws otherwise. The rule's name is JAX's internal one; a JAX version that lacks it
  keeps the rolled form.
* **Convolutions in the CPU's canonical layout** (``JAX_ESTIMATOR_CANONICAL_CONVOLUTIONS=0``
  turns it off): XLA's CPU backend has fast convolutions (a library call, or a library
  fusion for a weight gradient) for one layout, its canonical one: batch, spatial...,
  feature for the input and the output; spatial..., input feature, output feature for the
  kernel (``NHWC``, ``HWIO``). Its canonicalization pass transposes other convolutions into
  it, but only at a program's top level. Inside a loop's body (an ``Estimator`` runs
  ``steps_per_execution`` steps in one ``lax.fori_loop``), a convolution in another layout,
  as every kernel gradient is, stays as written and runs several times slower
  (``benchmarks/conv_layout.py`` measures one SGD step of a small convolution at the top
  level and in the loop). The lowering registered for the CPU writes each such convolution
  as transposes around a canonical one, as that pass does, so the step in the loop runs as
  fast as at the top level, with the same values. The rule wraps JAX's own CPU rule
  (``jax._src`` internals, like Threefry's); a JAX whose internals differ keeps its own.

* **Dependencies' logs at WARNING**: orbax logs every step of every checkpoint save at
  INFO through absl (the ``"absl"`` Python logger, a dozen lines a save), and JAX logs its
  backend search at INFO (the ``"jax"`` logger); with ``logging.basicConfig(level=INFO)``
  they would bury the Estimator's own lines (the loss every ``log_step_count_steps``,
  ``global_step/sec``, checkpoint saves, evaluation results, all on the ``"estimator"``
  logger). Each logger of :data:`DEPENDENCY_LOGGERS` whose level nobody set is set to
  WARNING (:func:`quiet_dependency_logs`); a level set on it, before or after, wins:
  ``logging.getLogger("absl").setLevel(logging.INFO)`` shows orbax's lines again.
* **The root logger left to the program**: orbax logs through absl while it is imported,
  and absl's first message calls ``logging.basicConfig()`` when the root logger has no
  handler, which makes the program's own ``logging.basicConfig(level=logging.INFO)`` after
  ``import estimator`` do nothing. ``import estimator`` removes the root handlers its
  imports added (:func:`release_root_logger`).

Storage clients (:func:`storage_environment`, applied when this module is imported and
again whenever a ``model_dir`` is set, both idempotent; the user's own values win):

* ``EPATH_USE_TF=false``: orbax lists and renames ``gs://`` checkpoints through
  ``etils.epath``, which serves ``gs://`` and ``s3://`` with TensorFlow's file system whenever
  TensorFlow is installed (importing it) and decides once per process. Library code never
  imports TensorFlow, and gcsfs follows the same emulator and credentials as the rest of
  ``estimator.io.fs``: fsspec, unless the user chose otherwise.
* ``TENSORSTORE_GCS_HTTP_URL`` from ``STORAGE_EMULATOR_HOST``: orbax writes ``gs://``
  checkpoints through TensorStore (which reads the former), the rest goes through gcsfs
  (which reads the latter): one emulator for all, never the emulator for some files and
  Google's servers for others.

Code paths for the CPU backend alone (:func:`on_cpu`; other backends run the standard
``lax`` operations and XLA's default options):

* ``JAX_ESTIMATOR_CPU_CONVOLUTIONS=0``: ``estimator.layers.convolution``'s patch-matrix
  convolutions and reshaped max pooling (XLA's CPU convolution gradients over few channels
  are slow; on a GPU they would bypass cuDNN).
* ``JAX_ESTIMATOR_CPU_COMPILE_OPTIONS=0``: programs run once or a few times compiled with
  XLA's older CPU loop emitters and lower optimization (``estimator.engine.compiler``).
* batches passed to a program on one CPU device as host arrays, without a transfer
  (``estimator.engine.input_pipeline.host_batches``): no switch, it changes nothing but
  the dispatch.

A switch is read when the decision is made (the environment of the process), so a test or
a program can set it before building its Estimator.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading

import jax
import jax.numpy as jnp

__all__ = [
    "CANONICAL_CONVOLUTIONS",
    "CPU_COMPILE_OPTIONS",
    "CPU_CONVOLUTIONS",
    "DEPENDENCY_LOGGERS",
    "EPATH_USE_TF",
    "UNROLL_THREEFRY",
    "configure",
    "canonical_convolutions",
    "cpu_path",
    "default_cache_dir",
    "enable_compilation_cache",
    "on_cpu",
    "prune_compilation_cache",
    "quiet_dependency_logs",
    "release_root_logger",
    "storage_environment",
    "unroll_threefry",
]

logger = logging.getLogger("estimator")
# The root logger's handlers before this package's dependencies were imported
# (release_root_logger).
_ROOT_HANDLERS = tuple(logging.root.handlers)

UNROLL_THREEFRY = "JAX_ESTIMATOR_UNROLL_THREEFRY"
CANONICAL_CONVOLUTIONS = "JAX_ESTIMATOR_CANONICAL_CONVOLUTIONS"
CPU_CONVOLUTIONS = "JAX_ESTIMATOR_CPU_CONVOLUTIONS"
CPU_COMPILE_OPTIONS = "JAX_ESTIMATOR_CPU_COMPILE_OPTIONS"
#: The loggers of the libraries underneath whose INFO lines are kept out of a program's log
#: (orbax and grain log through absl's ``"absl"`` logger).
DEPENDENCY_LOGGERS = ("absl", "jax", "jaxlib", "orbax")
_MAX_CACHE_BYTES = 2 << 30
_CACHE_SUFFIX = "-cache"  # JAX's name for a cache entry's file (jax/_src/lru_cache.py)
_threefry_unrolled = False
_convolutions_canonical = False


EPATH_USE_TF = "EPATH_USE_TF"
STORAGE_EMULATOR_HOST = "STORAGE_EMULATOR_HOST"
TENSORSTORE_GCS_HTTP_URL = "TENSORSTORE_GCS_HTTP_URL"


def storage_environment() -> None:
    """Sets the storage clients' process-wide variables (see the module docstring) where
    the environment does not set them already."""
    os.environ.setdefault(EPATH_USE_TF, "false")
    emulator = os.environ.get(STORAGE_EMULATOR_HOST, "")
    if emulator and emulator != "default":
        if not emulator.startswith(("http://", "https://")):
            emulator = "http://" + emulator
        os.environ.setdefault(TENSORSTORE_GCS_HTTP_URL, emulator)


storage_environment()  # before orbax's etils.epath makes its once-per-process choice


def on_cpu() -> bool:
    """Whether JAX's default backend is the CPU (the one place that decides it)."""
    return jax.default_backend() == "cpu"


def _switched_on(name: str) -> bool:
    return os.environ.get(name, "1").strip().lower() not in ("0", "false", "no", "off")


def cpu_path(switch: str) -> bool:
    """Whether to take the CPU-only code path behind ``switch`` (one of this module's
    environment variables): on the CPU backend, unless the variable turns it off."""
    return on_cpu() and _switched_on(switch)


def configure(compilation_cache_dir: str | None) -> None:
    """The process-wide settings (the module docstring), made when an Estimator is built:
    the compilation cache in ``compilation_cache_dir`` (None: none), Threefry unrolled and
    convolutions in the canonical layout on the CPU (each unless switched off). Repeated
    calls change nothing already set. Dependencies' loggers are quieted first
    (:func:`quiet_dependency_logs`), before anything here logs."""
    quiet_dependency_logs()
    enable_compilation_cache(compilation_cache_dir)
    if _switched_on(UNROLL_THREEFRY):
        unroll_threefry()
    if _switched_on(CANONICAL_CONVOLUTIONS):
        canonical_convolutions()


def quiet_dependency_logs() -> list[str]:
    """Sets each logger of :data:`DEPENDENCY_LOGGERS` whose level is unset (``NOTSET``) to
    WARNING, and leaves every logger with a level of its own as it is (the module
    docstring says why).

    Returns:
      The names of the loggers set to WARNING by this call.
    """
    quieted = []
    for name in DEPENDENCY_LOGGERS:
        dependency = logging.getLogger(name)
        if dependency.level == logging.NOTSET:
            dependency.setLevel(logging.WARNING)
            quieted.append(name)
    return quieted


def release_root_logger() -> None:
    """Removes from the root logger every handler added since this module was imported
    (``import estimator`` imports it before its dependencies and calls this after them; the
    module docstring says why)."""
    for handler in tuple(logging.root.handlers):
        if handler not in _ROOT_HANDLERS:
            logging.root.removeHandler(handler)


def default_cache_dir() -> str:
    """``$JAX_ESTIMATOR_CACHE_DIR``, else ``~/.cache/jax-estimator/xla``."""
    return os.environ.get("JAX_ESTIMATOR_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "jax-estimator", "xla"
    )


def enable_compilation_cache(directory: str | None) -> None:
    """Points JAX's persistent cache at ``directory`` unless one is set already (the
    process's own choice wins) or ``directory`` is None, and prunes it once in a
    background thread (:func:`prune_compilation_cache`; see the module docstring)."""
    if directory is None or jax.config.jax_compilation_cache_dir:
        return
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as err:
        logger.warning("Compilation cache disabled: cannot create %s (%s).", directory, err)
        return
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    threading.Thread(
        target=prune_compilation_cache,
        args=(directory,),
        name="compilation-cache-prune",
        daemon=True,
    ).start()
    home = os.path.expanduser("~")
    shown = "~" + directory[len(home) :] if directory.startswith(home + os.sep) else directory
    logger.info("Persistent compilation cache: %s", shown)


def prune_compilation_cache(directory: str, max_bytes: int = _MAX_CACHE_BYTES) -> int:
    """Deletes the least recently used entries of a persistent compilation cache when it
    holds more than ``max_bytes``, until it holds at most three quarters of that.

    An entry is JAX's ``<key>-cache`` file (with the ``<key>-atime`` file JAX's own size
    cap writes beside it, deleted with it); its last use is the later of the file's access
    and modification times. An entry another process deletes meanwhile is skipped; one it
    is reading stays readable (POSIX) or reads as a miss.

    Args:
      directory: the cache directory.
      max_bytes: the most the ``-cache`` files may take, in bytes.

    Returns:
      The bytes deleted (0 when the directory holds at most ``max_bytes``, or cannot be
      listed).
    """
    entries, total = [], 0
    try:
        with os.scandir(directory) as listing:
            for entry in listing:
                if entry.name.endswith(_CACHE_SUFFIX) and entry.is_file(follow_symlinks=False):
                    stat = entry.stat(follow_symlinks=False)
                    entries.append((max(stat.st_atime, stat.st_mtime), entry.path, stat.st_size))
                    total += stat.st_size
    except OSError as err:
        logger.debug("Compilation cache %s not pruned: %s", directory, err)
        return 0
    if total <= max_bytes:
        return 0
    deleted, target = 0, max_bytes * 3 // 4
    for _, path, size in sorted(entries):
        if total - deleted <= target:
            break
        for name in (path, path.removesuffix(_CACHE_SUFFIX) + "-atime"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(name)
        deleted += size
    logger.info("Compilation cache %s pruned: %d of %d bytes deleted.", directory, deleted, total)
    return deleted


def unroll_threefry() -> bool:
    """Registers JAX's unrolled Threefry lowering for the CPU (once per process).

    Returns:
      Whether the unrolled lowering is registered (False when this JAX version lacks it).
    """
    global _threefry_unrolled
    if _threefry_unrolled:
        return True
    try:
        from jax._src.random import threefry2x32 as threefry  # JAX's internal module
        from jax.interpreters import mlir

        rule = threefry._threefry2x32_lowering_rule  # the unrolled one (non-CPU default)
        mlir.register_lowering(threefry.threefry2x32_p, rule, platform="cpu")
    except Exception as err:  # noqa: BLE001 - another JAX: only compile time differs
        logger.debug("Threefry stays rolled on the CPU: %s", err)
        return False
    _threefry_unrolled = True
    return True


def _canonical_layout(spatial: int):
    """XLA CPU's canonical convolution layout for ``spatial`` spatial dimensions, as
    ``jax.lax.ConvDimensionNumbers``: input and output ``(batch, spatial..., feature)``
    (``NHWC`` for 2), kernel ``(spatial..., input feature, output feature)`` (``HWIO``)."""
    last = spatial + 1
    inner = tuple(range(1, last))
    return jax.lax.ConvDimensionNumbers(
        (0, last, *inner), (last, spatial, *range(spatial)), (0, last, *inner)
    )


def _in_canonical_layout(lhs, rhs, *, dimension_numbers, primitive, **params):
    """``primitive`` (``conv_general_dilated``) of ``lhs`` and ``rhs`` computed as a
    convolution in the canonical layout between transposes: the same sums, in the layout
    XLA's CPU backend runs fast wherever the convolution is."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    lhs = jax.lax.transpose(lhs, (lhs_spec[0], *lhs_spec[2:], lhs_spec[1]))
    rhs = jax.lax.transpose(rhs, (*rhs_spec[2:], rhs_spec[1], rhs_spec[0]))
    layout = _canonical_layout(len(lhs_spec) - 2)
    out = primitive.bind(lhs, rhs, dimension_numbers=layout, **params)
    # The canonical output's dimensions are (batch, spatial..., feature): put each where
    # ``out_spec`` wants it.
    order = (out_spec[0], *out_spec[2:], out_spec[1])
    return jax.lax.transpose(out, tuple(sorted(range(len(order)), key=order.__getitem__)))


def canonical_convolutions() -> bool:
    """Registers, for the CPU, a convolution lowering that writes every convolution in the
    canonical layout (once per process; the module docstring says why). Convolutions
    already canonical, complex ones (JAX splits them into real ones, which then come here)
    and ones with an explicit output sharding keep JAX's own lowering.

    Returns:
      Whether the lowering is registered (False when this JAX version's internals differ).
    """
    global _convolutions_canonical
    if _convolutions_canonical:
        return True
    try:
        from jax._src.lax import convolution as lax_convolution  # JAX's internal module
        from jax.interpreters import mlir

        primitive = lax_convolution.conv_general_dilated_p
        default = mlir._platform_specific_lowerings["cpu"][primitive].rule
        canonical = mlir.lower_fun(
            functools.partial(_in_canonical_layout, primitive=primitive),
            multiple_results=False,
        )

        def rule(ctx, lhs, rhs, *, dimension_numbers, **params):
            spatial = len(dimension_numbers.lhs_spec) - 2
            if (
                dimension_numbers == _canonical_layout(spatial)
                or params.get("out_sharding") is not None
                or jnp.issubdtype(ctx.avals_in[0].dtype, jnp.complexfloating)
            ):
                return default(ctx, lhs, rhs, dimension_numbers=dimension_numbers, **params)
            return canonical(ctx, lhs, rhs, dimension_numbers=dimension_numbers, **params)

        mlir.register_lowering(primitive, rule, platform="cpu")
    except Exception as err:  # noqa: BLE001 - another JAX: only speed differs
        logger.debug("Convolutions keep JAX's CPU lowering: %s", err)
        return False
    _convolutions_canonical = True
    return True
