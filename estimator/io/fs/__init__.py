"""Local paths and storage URLs through one seam: every file the package reads or writes,
from ``model_dir`` to data files, goes through the functions here, and nothing outside
``estimator.io.fs`` asks whether a path is a URL.

TF's file system layer accepted ``gs://bucket/dir`` wherever a path went; so does this
package: ``model_dir``, export directories, ``warm_start_from``, checkpoint paths, event
files and data files may be ``gs://`` (gcsfs), ``s3://`` (s3fs) or any other protocol that
fsspec implements and whose package is installed (``memory://`` always is). A path is
resolved by ``fsspec.core.url_to_fs`` into a file system and a path on it; a local path
(str, bytes, PathLike, ``file://...``) is served by fsspec's local file system, and keeps
the form it was given in (relative stays relative; ``os.path`` never sees a URL, which it
would turn from ``gs://b/m`` into a local ``gs:/b/m``). Endpoints and credentials come from
the standard environment those clients read (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY``, ``STORAGE_EMULATOR_HOST``, application default credentials), so
a job points at MinIO or an emulator without code changes. :func:`check` refuses a URL
whose protocol cannot be served, naming the package to install, before anything is
created; every other function raises the same error when it meets one.

Object stores have no directories, no rename and no append: a "directory" is a key prefix.
The two ways a reader is kept from seeing part of a write are named functions:

* :func:`replace_atomically`: a local file written under a temporary name beside its
  target and renamed over it (``os.replace``); :func:`publish_tree` moves a local tree into
  place with one rename;
* :func:`upload_tree`: a tree uploaded file by file with its completion marker last (a
  reader that waits for the marker sees a complete tree); a single object is published by
  one upload (:func:`write_bytes`), which the store shows whole or not at all.

Where the right one depends on the storage, the functions here choose:
:func:`write_bytes`, :func:`atomic_write`, :func:`publish_tree` (with
:func:`staging_dir`), :class:`Mirror` (a local directory kept in step with a remote one,
for writers of local files only), :func:`local_copy`, :func:`complete`, and
:func:`exclusive_lock` (an OS file lock locally, a lease on a store;
``estimator.io.locks``).

What lives where: ``_paths`` (a path's parts, its protocol, :func:`check`, and the
resolution of a path into fsspec's file system and the path on it), ``_files`` (queries,
changes, opening and reading), ``_writes`` (a file written whole: the atomic local replace
and the functions that choose it or one upload; copies and moves), ``_trees`` (the upload
with its marker last, and trees staged, published, checked, downloaded or mirrored) and
``_lock`` (:func:`exclusive_lock`).

Synopsis::

    from estimator.io import fs

    fs.check("s3://bucket/models/ctr", "model_dir")   # gives the package to install, if any
    fs.write_bytes(fs.join("s3://bucket/models/ctr", "hello"), b"hi")
    assert fs.listdir("s3://bucket/models/ctr") == ["hello"]
"""

from estimator.io.fs._files import exists as exists
from estimator.io.fs._files import glob as glob
from estimator.io.fs._files import isdir as isdir
from estimator.io.fs._files import isfile as isfile
from estimator.io.fs._files import listdir as listdir
from estimator.io.fs._files import makedirs as makedirs
from estimator.io.fs._files import mkdir as mkdir
from estimator.io.fs._files import open_file as open_file
from estimator.io.fs._files import read_bytes as read_bytes
from estimator.io.fs._files import remove as remove
from estimator.io.fs._files import rmtree as rmtree
from estimator.io.fs._files import stat as stat
from estimator.io.fs._files import walk as walk
from estimator.io.fs._lock import exclusive_lock as exclusive_lock
from estimator.io.fs._paths import ProtocolUnavailableError as ProtocolUnavailableError
from estimator.io.fs._paths import abspath as abspath
from estimator.io.fs._paths import as_str as as_str
from estimator.io.fs._paths import basename as basename
from estimator.io.fs._paths import check as check
from estimator.io.fs._paths import dirname as dirname
from estimator.io.fs._paths import join as join
from estimator.io.fs._paths import local_path as local_path
from estimator.io.fs._paths import protocol as protocol
from estimator.io.fs._trees import Mirror as Mirror
from estimator.io.fs._trees import complete as complete
from estimator.io.fs._trees import download_tree as download_tree
from estimator.io.fs._trees import local_copy as local_copy
from estimator.io.fs._trees import publish_tree as publish_tree
from estimator.io.fs._trees import staging_dir as staging_dir
from estimator.io.fs._trees import upload_tree as upload_tree
from estimator.io.fs._writes import append_bytes as append_bytes
from estimator.io.fs._writes import atomic_write as atomic_write
from estimator.io.fs._writes import copy as copy
from estimator.io.fs._writes import move as move
from estimator.io.fs._writes import replace_atomically as replace_atomically
from estimator.io.fs._writes import write_bytes as write_bytes

__all__ = [
    "Mirror",
    "ProtocolUnavailableError",
    "abspath",
    "append_bytes",
    "as_str",
    "atomic_write",
    "basename",
    "check",
    "complete",
    "copy",
    "dirname",
    "download_tree",
    "exclusive_lock",
    "exists",
    "glob",
    "isdir",
    "isfile",
    "join",
    "listdir",
    "local_copy",
    "local_path",
    "makedirs",
    "mkdir",
    "move",
    "open_file",
    "protocol",
    "publish_tree",
    "read_bytes",
    "remove",
    "replace_atomically",
    "rmtree",
    "stat",
    "staging_dir",
    "upload_tree",
    "walk",
    "write_bytes",
]
