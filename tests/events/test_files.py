"""Event files: tensorboardX imported without loading the cloud client it would import."""

from __future__ import annotations

import subprocess
import sys

import pytest

from estimator.events import files

pytest.importorskip(files.LAZY_CLIENT)  # installed with gcsfs (the gcs and test extras)

# In a fresh interpreter: what importing tensorboardX through this package leaves loaded,
# then whether the client still works when someone uses it.
_CHILD = """
import os, sys, tempfile
import estimator
from estimator.events import files
writer = files.EventWriter(tempfile.mkdtemp())
writer.add_scalar("loss", 1.5, 3)
writer.close()
events = [n for n in os.listdir(writer.logdir) if n.startswith("events.out.tfevents.")]
loaded_before = "google.cloud.storage.client" in sys.modules
from google.cloud import storage
print(len(events), "tensorboardX.record_writer" in sys.modules, loaded_before,
      storage.Client.__name__, "google.cloud.storage.client" in sys.modules)
"""


def test_writing_events_leaves_the_cloud_storage_client_unloaded_until_used():
    """tensorboardX's record writer imports ``google.cloud.storage`` when installed; through
    ``tensorboardx_module`` it gets a lazy module: the client's code (its ``client``
    submodule) runs only when someone uses it, and then works. Imported directly, as
    before, the client was loaded with tensorboardX."""
    result = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["1", "True", "False", "Client", "True"]


def test_the_summary_proto_of_compat_is_tensorboardxs():
    from tensorboardX.proto.summary_pb2 import Summary

    from estimator.compat.v1 import summary

    assert summary.Summary is Summary
