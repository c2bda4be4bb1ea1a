"""``estimator.events.clients``: modules registered without running their code, which runs
once, on first use, whichever thread uses them first; and the cloud clients tensorboardX
would import, left unloaded by writing event files."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

from estimator.events import clients

# The module under test: its body is slow, counts its runs, and reads a name of its own
# before defining it (as a package's code may).
SLOW = """
import time, runs
runs.count += 1
time.sleep(0.2)
try:
    EARLY = LATE
except NameError:
    EARLY = "not yet"
LATE = 1
VALUE = 42
__all__ = ["VALUE"]
"""


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """A directory on ``sys.path`` with ``runs.py`` (a counter) and ``slow.py`` (SLOW);
    both are dropped from ``sys.modules`` afterwards."""
    (tmp_path / "runs.py").write_text("count = 0\n")
    (tmp_path / "slow.py").write_text(SLOW)
    (tmp_path / "broken.py").write_text("raise RuntimeError('broken on purpose')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("runs", "slow", "broken"):
        sys.modules.pop(name, None)


def test_a_deferred_module_runs_once_on_first_use_by_many_threads_at_once(modules):
    import runs

    assert clients.defer("slow") and not clients.defer("slow")  # once; then it is known
    import slow  # noqa: F401 - binds the module without running it

    assert runs.count == 0
    start = threading.Barrier(8)
    seen = []

    def use():
        start.wait()
        seen.append(sys.modules["slow"].VALUE)  # all 8 arrive while the body sleeps

    threads = [threading.Thread(target=use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [42] * 8 and runs.count == 1
    module = sys.modules["slow"]
    assert type(module).__name__ == "module" and module.EARLY == "not yet"
    with pytest.raises(AttributeError, match="module 'slow' has no attribute 'missing'"):
        _ = module.missing


def test_import_star_loads_a_deferred_module(modules):
    clients.defer("slow")
    namespace: dict = {}
    exec("from slow import *", namespace)
    assert namespace["VALUE"] == 42 and "LATE" not in namespace  # its __all__


def test_a_deferred_module_that_fails_raises_to_its_first_user_and_is_forgotten(modules):
    clients.defer("broken")
    module = sys.modules["broken"]
    with pytest.raises(RuntimeError, match="broken on purpose"):
        _ = module.anything
    assert "broken" not in sys.modules  # as a failed import leaves it: the next one retries


def test_what_is_missing_or_imported_already_is_not_deferred():
    assert not clients.defer("no_such_module_anywhere")
    assert not clients.defer("no_such_package.sub")
    assert not clients.defer("json")  # imported by pytest already


@pytest.mark.slow
def test_writing_events_leaves_the_cloud_clients_unloaded_until_used():
    """tensorboardX's record writer imports boto3 and ``google.cloud.storage`` when
    installed; through ``events.files`` neither one's code runs (their ``session`` and
    ``client`` submodules stay unimported) until a program uses them, from 8 threads at
    once here, and then they work. Imported directly, as before, both were loaded with
    tensorboardX."""
    for name in clients.TENSORBOARDX_CLIENTS:
        pytest.importorskip(name)  # boto3 with moto, the GCS client with gcsfs (test extras)
    code = textwrap.dedent("""
        import os, sys, tempfile, threading
        from estimator.events import files
        writer = files.EventWriter(tempfile.mkdtemp())
        writer.add_scalar("loss", 1.5, 3)
        writer.close()
        written = [n for n in os.listdir(writer.logdir) if n.startswith("events.out.tfevents.")]
        unloaded = [m not in sys.modules for m in ("boto3.session", "google.cloud.storage.client")]
        import boto3
        from google.cloud import storage
        found = []
        def use():
            found.append((boto3.client.__name__, storage.Client.__name__))
        threads = [threading.Thread(target=use) for _ in range(8)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        print(len(written), *unloaded, *set(found), "boto3.session" in sys.modules)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["1", "True", "True", "('client',", "'Client')", "True"]


def test_the_summary_proto_of_compat_is_tensorboardxs():
    from tensorboardX.proto.summary_pb2 import Summary

    from estimator.compat.v1 import summary

    assert summary.Summary is Summary
