"""Helpers that damage or slow down checkpoints, shared by the checkpoint, multi-process and
training tests."""

import os
import time

import orbax.checkpoint as ocp


def largest_data_file(checkpoint, item):
    files = [
        os.path.join(root, name)
        for root, _, names in os.walk(os.path.join(checkpoint, item))
        for name in names
        if os.sep + "d" + os.sep in os.path.join(root, name) + os.sep or root.endswith("/d")
    ]
    return max(files, key=os.path.getsize)


def flip(path, offset=None, mask=0x10):
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2 if offset is None else offset] ^= mask
    open(path, "wb").write(bytes(data))


def slow_finalize(monkeypatch, seconds: float = 0.5) -> list:
    """Keeps each orbax save in progress ``seconds`` longer (its finalization waits) and
    records the steps that ``CheckpointManager.save`` was asked to write."""
    manager = ocp.CheckpointManager
    assert hasattr(manager, "_finalize"), "orbax renamed the save's finalization"
    finalize, save, saved = manager._finalize, manager.save, []

    def slow(self, *args, **kwargs):
        time.sleep(seconds)
        return finalize(self, *args, **kwargs)

    def recording(self, step, *args, **kwargs):
        saved.append(int(step))
        return save(self, step, *args, **kwargs)

    monkeypatch.setattr(manager, "_finalize", slow)
    monkeypatch.setattr(manager, "save", recording)
    return saved
