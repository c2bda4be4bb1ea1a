"""What an export may point at, and the checksums that prove its files are the ones written.

An export is data *and* code: each ``functions/<sig>.jax`` holds StableHLO that the loader
compiles and runs. The manifest therefore names files only by paths relative to the export
directory, and lists the sha256 of every file in it; :func:`verify` checks both before
anything is deserialized (a bit-flipped ``jax.export`` blob can crash the process inside
the deserializer, which no ``try`` catches).
"""

from __future__ import annotations

import hashlib
import os
import posixpath

__all__ = ["checksums", "safe_path", "verify"]

MANIFEST = "manifest.json"
_CHUNK = 1 << 20


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _files(root: str) -> list[str]:
    """Every file under ``root`` but the manifest, as sorted POSIX paths relative to it."""
    out = []
    for directory, _, names in os.walk(root):
        for name in names:
            relative = os.path.relpath(os.path.join(directory, name), root)
            out.append(relative.replace(os.sep, "/"))
    return sorted(p for p in out if p != MANIFEST)


def checksums(root: str) -> dict[str, str]:
    """``{relative POSIX path: sha256 hex}`` of every file under ``root`` but the manifest."""
    return {relative: _sha256(os.path.join(root, relative)) for relative in _files(root)}


def safe_path(root: str, relative, what: str) -> str:
    """The absolute path of ``relative`` inside the export directory ``root``.

    Raises:
      ValueError: if ``relative`` is not a string, is absolute, is not normalized (``.``,
        ``..``, doubled or trailing ``/``, backslashes), or resolves (through symlinks)
        outside ``root``. The message names ``what`` (the manifest entry) and the path.
    """
    manifest = os.path.join(root, MANIFEST)
    if (
        not isinstance(relative, str)
        or not relative
        or "\\" in relative
        or posixpath.isabs(relative)
        or posixpath.normpath(relative) != relative
        or relative.split("/")[0] == ".."
    ):
        raise ValueError(
            f"{manifest}: {what} is {relative!r}; an export names its files by normalized "
            "paths relative to the export directory (no absolute paths, '.', '..' or "
            "backslashes). The manifest was not written by jax-estimator or was altered: "
            "re-export the model."
        )
    real_root = os.path.realpath(root)
    full = os.path.realpath(os.path.join(root, *relative.split("/")))
    if os.path.commonpath([real_root, full]) != real_root:
        raise ValueError(
            f"{manifest}: {what} {relative!r} resolves to {full}, outside the export "
            f"directory {real_root} (a symlink out of the export). Loading refuses it: copy "
            "the export with its files instead of linking them."
        )
    return full


def verify(root: str, listed) -> None:
    """Checks that the files under ``root`` are exactly the manifest's ``files`` with the
    same sha256 (symlinks followed only inside ``root``).

    Raises:
      ValueError: naming the first file that is missing, unlisted, outside the export or
        different from what was exported.
    """
    manifest = os.path.join(root, MANIFEST)
    if not isinstance(listed, dict):
        raise ValueError(
            f"{manifest} lists no file checksums (an export written before checksums were "
            "recorded, or an altered one). Re-export the model, or pass verify_files=False to "
            "load it without checking its files."
        )
    present = set(_files(root))
    for relative, expected in sorted(listed.items()):
        full = safe_path(root, relative, "the file")
        if relative not in present or not os.path.isfile(full):
            raise ValueError(f"{manifest} lists {relative}, but the export has no such file.")
        actual = _sha256(full)
        if actual != expected:
            raise ValueError(
                f"{os.path.join(root, relative)} is corrupt or was altered: its sha256 is "
                f"{actual}, the manifest says {expected}. Re-copy or re-export the model."
            )
    unlisted = sorted(present - set(listed))
    if unlisted:
        raise ValueError(
            f"{os.path.join(root, unlisted[0])} is in the export directory but not in "
            f"{MANIFEST}'s checksums ({len(unlisted)} such file(s)). Remove what was added "
            "to the export, or re-export the model."
        )
