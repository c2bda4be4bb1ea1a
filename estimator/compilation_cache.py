"""JAX's persistent compilation cache, on by default, so a rerun compiles nothing.

``jax.jit`` compiles every program anew in each process; for a canned model that is most
of a short job's wall time (seconds per program on a CPU). JAX can keep compiled programs
on disk, keyed by the program, the jax/jaxlib version and the device. An Estimator turns
that on when it is built, unless the process already chose a cache directory
(``jax.config.update("jax_compilation_cache_dir", ...)`` or ``$JAX_COMPILATION_CACHE_DIR``):

* ``RunConfig(compilation_cache_dir=...)``: the directory; the default is
  ``$JAX_ESTIMATOR_CACHE_DIR``, else ``~/.cache/jax-estimator/xla``; ``None`` turns it off.
* Every program is cached (``jax_persistent_cache_min_compile_time_secs = 0``); the cache
  is capped at 2 GiB (``jax_compilation_cache_max_size``, least recently used first out).

The setting is process-wide (it is JAX's): other jitted code in the process uses the cache
too. Reading a cached program is safe when another process writes the same entry.
"""

from __future__ import annotations

import logging
import os

import jax

__all__ = ["default_dir", "enable"]

logger = logging.getLogger("estimator")
_MAX_BYTES = 2 << 30


def default_dir() -> str:
    """``$JAX_ESTIMATOR_CACHE_DIR``, else ``~/.cache/jax-estimator/xla``."""
    return os.environ.get("JAX_ESTIMATOR_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "jax-estimator", "xla"
    )


def enable(directory: str | None) -> None:
    """Points JAX's persistent cache at ``directory`` unless one is set already (the
    process's own choice wins) or ``directory`` is None."""
    if directory is None or jax.config.jax_compilation_cache_dir:
        return
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as err:
        logger.warning("Compilation cache disabled: cannot create %s (%s).", directory, err)
        return
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_compilation_cache_max_size", _MAX_BYTES)
    logger.info("Persistent compilation cache: %s", directory)
