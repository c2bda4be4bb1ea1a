"""The cloud clients tensorboardX imports, deferred until someone uses them.

tensorboardX's record writer imports ``boto3`` and Google Cloud Storage's client
(``from google.cloud import storage``) when they are installed, for its own S3 and GCS
event writers, which this package never uses: it writes event files in object stores
through ``estimator.io.fs`` (``estimator.events.files``). Importing them is most of
tensorboardX's import time, paid in the first ``train()`` of a process (gcsfs, the ``gcs``
extra, installs the GCS client; boto3 is common where S3 is), on the cores the step's
compile needs (``docs/performance.md``, the census section, measures the cold run).

:func:`defer` registers such a module in ``sys.modules`` without running its code, which
runs on the first read of an attribute the module does not have yet, by anyone: an
``import`` of it binds the module at once, ``boto3.client`` or ``storage.Client`` then loads
it. This is what ``importlib.util.LazyLoader`` does, but safe for threads on every Python
this package supports (the first readers wait for one load under a lock; Python 3.11's
``LazyLoader`` lets a second thread see the module half loaded, python/cpython#114763),
and an ``import`` statement does not load it (it reads the module's ``__spec__``, which
would load a ``LazyLoader`` module at once).
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import types

__all__ = ["TENSORBOARDX_CLIENTS", "defer"]

#: What tensorboardX's record writer imports when installed (``tensorboardX/record_writer.py``).
TENSORBOARDX_CLIENTS = ("boto3", "google.cloud.storage")

_LOCK = "__deferred_lock__"  # in a deferred module's namespace until it is loaded
_LOADING = "__deferred_loading__"  # the thread running its code, while it runs


class _Deferred(types.ModuleType):
    """A module whose code has not run yet: it runs on the first read of a missing
    attribute, once, under the module's lock; the module is then an ordinary one."""

    def __getattr__(self, attribute: str):
        namespace = self.__dict__
        lock = namespace.get(_LOCK)
        special = attribute.startswith("__") and attribute != "__all__"  # import * reads it
        if lock is None or special or namespace.get(_LOADING) == threading.get_ident():
            # Loaded; a special name the import machinery probes for; or its own code,
            # running, reading a name it has not defined yet.
            raise AttributeError(f"module {self.__name__!r} has no attribute {attribute!r}")
        with lock:
            if namespace.get(_LOCK) is lock:  # not loaded by a thread that held the lock
                _load(self)
        return getattr(self, attribute)


def _load(module: _Deferred) -> None:
    namespace = module.__dict__
    namespace[_LOADING] = threading.get_ident()
    try:
        module.__spec__.loader.exec_module(module)
    except BaseException:
        if sys.modules.get(module.__name__) is module:  # as a failed import leaves it
            del sys.modules[module.__name__]
        raise
    finally:
        del namespace[_LOADING], namespace[_LOCK]
        module.__class__ = types.ModuleType


def defer(name: str) -> bool:
    """Registers module ``name`` as deferred (see the module docstring) when it is installed
    and not imported yet; its parent packages are imported (``find_spec`` does).

    Returns:
      Whether ``name`` was deferred.
    """
    if name in sys.modules:
        return False
    try:
        spec = importlib.util.find_spec(name)
    except ImportError:  # a parent package is missing
        return False
    if spec is None or not hasattr(spec.loader, "exec_module"):
        return False
    module = importlib.util.module_from_spec(spec)
    module.__class__ = _Deferred
    module.__dict__[_LOCK] = threading.RLock()
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)  # as an import binds a submodule
    return True
