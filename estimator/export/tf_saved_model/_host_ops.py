"""The host phase (``estimator.preprocessing``) rebuilt as TensorFlow ops (internal).

Each declarative op of an export's ``InputTransform`` becomes the TF ops TF 2.15's feature
columns use for it, computing the same dense layout as the NumPy host phase
(``InputTransform.apply``): ``float32 [batch_size, *shape]`` for dense ops, ``int32
[batch_size, k]`` ids with -1 for "no id" for categorical ops.

=================  =========================================================================
op                 TensorFlow
=================  =========================================================================
Numeric            ``tf.cast`` to float32; NaN -> ``default_value`` (``tf.where``)
Bucketize          ``Bucketize`` (a value equal to a boundary goes to the upper bucket)
VocabularyList     ``tf.lookup.StaticHashTable`` (``default_value``) or, with OOV buckets,
                   ``tf.lookup.StaticVocabularyTable`` (``Fingerprint64 % num_oov_buckets``;
                   integers hashed as their decimal string), as
                   ``index_table_from_tensor``
VocabularyFile     the same tables from a ``TextFileInitializer`` on the vocabulary asset
HashBucket         ``tf.strings.to_hash_bucket_fast`` (integers through ``as_string``)
Identity           the ids; out of range: ``default_value``, else dropped (negative) or an
                   ``InvalidArgumentError`` (``>= num_buckets``), as TF
Cross              ``tf.sparse.cross_hashed`` (``FingerprintCat64``, ``hash_key``)
Weighted           the weight feature aligned with the ids (0 where there is no id)
BatchSize          ``float32 [batch_size, 0]``
=================  =========================================================================

Missing values (``""`` and ``-1`` in dense input, absent values of a ``VarLenFeature``)
give no id, as in the NumPy host phase. A cross's ids come in ``tf.sparse.cross_hashed``'s
order (the NumPy phase lists every combination, with -1 for those with a missing value):
the same ids per example, which the device phase sums or averages.

Anything else (a custom op registered with ``register_op``) has no TF form: export to a
TF SavedModel refuses it (:func:`check_supported`).
"""

from __future__ import annotations

import os

import numpy as np

from estimator.preprocessing import DEFAULT_CROSS_HASH_KEY as _DEFAULT_CROSS_HASH_KEY
from estimator.preprocessing import (
    BatchSize,
    Bucketize,
    Cross,
    HashBucket,
    Identity,
    InputTransform,
    Numeric,
    Op,
    VocabularyFile,
    VocabularyList,
    Weighted,
)

SUPPORTED = (
    Numeric,
    Bucketize,
    VocabularyList,
    VocabularyFile,
    HashBucket,
    Identity,
    Cross,
    Weighted,
    BatchSize,
)


def _ops_of(op: Op):
    yield op
    children = ()
    if isinstance(op, Bucketize):
        children = (op.source,)
    elif isinstance(op, Weighted):
        children = (op.categorical_op,)
    elif isinstance(op, Cross):
        children = tuple(k for k in op.keys if isinstance(k, Op))
    for child in children:
        yield from _ops_of(child)


def check_supported(transform: InputTransform | None) -> None:
    """Raises ``ValueError`` naming the first op of ``transform`` with no TF form.

    Runs without TensorFlow, before anything is built.
    """
    if transform is None:
        return
    for name, top in transform.outputs:
        for op in _ops_of(top):
            if type(op) not in SUPPORTED:
                known = ", ".join(cls.__name__ for cls in SUPPORTED)
                raise ValueError(
                    f"The input transform's entry {name!r} uses {op.describe()}, which has no "
                    f"TensorFlow equivalent: a TF SavedModel can rebuild only the declarative "
                    f"host ops ({known}). Serve this export with estimator.export.load or "
                    "python -m estimator.serve, or express the feature with those ops."
                )


class HostPhase:
    """Builds one batch's host phase as TF ops (graph or eager mode).

    Args:
      tf: the ``tensorflow`` module.
      features: raw features: dense ``tf.Tensor`` (``[batch_size, ...]``) or
        ``tf.SparseTensor`` (``[batch_size, k]``, a parsed ``VarLenFeature``).
      batch_size: scalar int32 tensor.
      assets_dir: where vocabulary files are written for ``TextFileInitializer`` (each
        becomes an asset of the SavedModel).
    """

    def __init__(self, tf, features: dict, batch_size, assets_dir: str) -> None:
        self.tf = tf
        self.features = features
        self.batch_size = batch_size
        self.assets_dir = assets_dir
        self._cache: dict[int, object] = {}

    def apply(self, transform: InputTransform) -> dict:
        """``{output key: tensor}`` with the keys of ``InputTransform.apply``."""
        check_supported(transform)
        result = {}
        for name, op in transform.outputs:
            value = self._op(op)
            if op.categorical:
                ids, weights = value
                result[name + "/ids"] = ids
                if weights is not None:
                    result[name + "/weights"] = weights
            else:
                result[name] = value
        return result

    # ----- raw inputs --------------------------------------------------------------------
    def _raw(self, key: str, who: str):
        if key not in self.features:
            raise ValueError(
                f"Feature {key} is not in features dictionary (needed by {who}). Keys "
                f"present: {sorted(self.features)}."
            )
        return self.features[key]

    def _dense(self, value, fill):
        """A SparseTensor (parsed VarLenFeature) as ``[batch_size, max(k, 1)]``."""
        tf = self.tf
        if isinstance(value, tf.SparseTensor):
            value = tf.sparse.to_dense(value, default_value=fill)
            return self._at_least_one_column(value, fill)
        return value

    def _at_least_one_column(self, value, fill):
        """Pads ``[batch, 0]`` to ``[batch, 1]``: a symbolic dimension of the device
        function is at least 1 (the NumPy phase pads the same way)."""
        tf = self.tf
        width = tf.shape(value)[1]
        pad = tf.maximum(1 - width, 0)
        return tf.pad(value, [[0, 0], [0, pad]], constant_values=fill)

    def _categorical(self, key: str, who: str):
        """``([batch_size, k] values, missing mask, "string" | "int")``."""
        tf = self.tf
        value = self._raw(key, who)
        if value.dtype == tf.string:
            x = self._dense(value, "")
            kind, missing = "string", None
        elif value.dtype.is_integer:
            x = tf.cast(self._dense(value, -1), tf.int64)
            kind, missing = "int", None
        else:
            raise ValueError(
                f"{who}: feature {key!r} has dtype {value.dtype.name}; expected strings or "
                "integers (a categorical feature)."
            )
        x = tf.reshape(x, tf.stack([tf.shape(x)[0], tf.reduce_prod(tf.shape(x)[1:])]))
        missing = tf.equal(x, "" if kind == "string" else tf.constant(-1, tf.int64))
        return x, missing, kind

    # ----- ops ---------------------------------------------------------------------------
    def _op(self, op: Op):
        if id(op) not in self._cache:
            method = getattr(self, "_" + type(op).__name__.lower())
            self._cache[id(op)] = method(op)
        return self._cache[id(op)]

    def _numeric(self, op: Numeric):
        tf = self.tf
        if op.key not in self.features and op.default_value is not None:
            default = tf.constant(np.asarray(op.default_value, np.float32))
            return tf.broadcast_to(default, tf.concat([[self.batch_size], list(op.shape)], 0))
        value = self._raw(op.key, op.describe())
        if value.dtype == tf.string:
            raise ValueError(
                f"{op.describe()}: feature {op.key!r} holds strings; expected numbers."
            )
        x = tf.cast(self._dense(value, 0), tf.float32)
        x = tf.reshape(x, [-1, *op.shape])
        if op.default_value is not None:
            default = tf.constant(np.asarray(op.default_value, np.float32))
            x = tf.where(tf.math.is_nan(x), tf.broadcast_to(default, tf.shape(x)), x)
        return x

    def _bucketize(self, op: Bucketize):
        tf = self.tf
        x = self._op(op.source)
        buckets = tf.raw_ops.Bucketize(input=x, boundaries=list(op.boundaries))
        offsets = (len(op.boundaries) + 1) * tf.range(tf.shape(x)[1])
        return tf.cast(buckets + offsets[None, :], tf.int32), None

    def _vocabulary(self, op, initializer):
        tf = self.tf
        x, missing, kind = self._categorical(op.key, op.describe())
        if (kind == "string") != (op.dtype == "string"):
            raise ValueError(
                f"Column dtype and input dtype must be compatible. key: {op.key}, column "
                f"dtype: {op.dtype}, input kind: {kind} ({op.describe()})."
            )
        if op.num_oov_buckets:
            table = tf.lookup.StaticVocabularyTable(initializer, op.num_oov_buckets)
        else:
            table = tf.lookup.StaticHashTable(initializer, default_value=op.default_value)
        ids = tf.where(missing, tf.constant(-1, tf.int64), table.lookup(x))
        return tf.cast(ids, tf.int32), None

    def _key_dtype(self, op):
        return self.tf.string if op.dtype == "string" else self.tf.int64

    def _vocabularylist(self, op: VocabularyList):
        tf = self.tf
        initializer = tf.lookup.KeyValueTensorInitializer(
            tf.constant(list(op.vocabulary_list), self._key_dtype(op)),
            tf.range(len(op.vocabulary_list), dtype=tf.int64),
        )
        return self._vocabulary(op, initializer)

    def _vocabularyfile(self, op: VocabularyFile):
        tf = self.tf
        values = op._vocabulary()  # as the NumPy phase reads it: line ends removed, checked
        # The asset holds exactly the entries the NumPy phase uses, one per line ("\n"),
        # so TF's TextFileInitializer reads the same vocabulary.
        os.makedirs(self.assets_dir, exist_ok=True)
        path = os.path.join(self.assets_dir, os.path.basename(op.vocabulary_file))
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(f"{v}\n" for v in values))
        initializer = tf.lookup.TextFileInitializer(
            path,
            key_dtype=self._key_dtype(op),
            key_index=tf.lookup.TextFileIndex.WHOLE_LINE,
            value_dtype=tf.int64,
            value_index=tf.lookup.TextFileIndex.LINE_NUMBER,
            vocab_size=len(values),
        )
        return self._vocabulary(op, initializer)

    def _hashbucket(self, op: HashBucket):
        tf = self.tf
        x, missing, kind = self._categorical(op.key, op.describe())
        strings = x if kind == "string" else tf.strings.as_string(x)
        ids = tf.strings.to_hash_bucket_fast(strings, op.hash_bucket_size)
        return tf.cast(tf.where(missing, tf.constant(-1, tf.int64), ids), tf.int32), None

    def _identity(self, op: Identity):
        tf = self.tf
        x, missing, kind = self._categorical(op.key, op.describe())
        if kind != "int":
            raise ValueError(f"Invalid input, not integer. key: {op.key} ({op.describe()}).")
        out_of_range = tf.logical_and(
            tf.logical_or(x < 0, x >= op.num_buckets), tf.logical_not(missing)
        )
        if op.default_value is not None:
            ids = tf.where(out_of_range, tf.constant(op.default_value, tf.int64), x)
        else:
            check = tf.debugging.assert_less(
                x,
                tf.constant(op.num_buckets, tf.int64),
                message=f"{op.describe()}: a value of feature {op.key!r} is out of range "
                f"[0, {op.num_buckets}). Increase num_buckets, or set default_value.",
            )
            with tf.control_dependencies([check]):
                ids = tf.where(out_of_range, tf.constant(-1, tf.int64), x)
        ids = tf.where(missing, tf.constant(-1, tf.int64), ids)
        return tf.cast(ids, tf.int32), None

    def _sparse(self, values, present):
        tf = self.tf
        indices = tf.where(present)
        return tf.SparseTensor(
            indices, tf.gather_nd(values, indices), tf.cast(tf.shape(values), tf.int64)
        )

    def _cross(self, op: Cross):
        tf = self.tf
        parts = []
        for key in op.keys:
            if isinstance(key, str):
                x, missing, _ = self._categorical(key, op.describe())
                parts.append(self._sparse(x, tf.logical_not(missing)))
            else:
                ids, _ = self._op(key)
                parts.append(self._sparse(tf.cast(ids, tf.int64), ids >= 0))
        hash_key = _DEFAULT_CROSS_HASH_KEY if op.hash_key is None else op.hash_key
        crossed = tf.sparse.cross_hashed(parts, num_buckets=op.hash_bucket_size, hash_key=hash_key)
        ids = tf.sparse.to_dense(crossed, default_value=-1)  # [batch_size, most crosses]
        return tf.cast(self._at_least_one_column(ids, -1), tf.int32), None

    def _weighted(self, op: Weighted):
        tf = self.tf
        ids, _ = self._op(op.categorical_op)
        value = self._raw(op.weight_feature_key, op.describe())
        if value.dtype == tf.string:
            raise ValueError(
                f"{op.describe()}: weight feature {op.weight_feature_key!r} holds strings; "
                "expected numbers."
            )
        w = tf.cast(self._dense(value, 0), tf.float32)
        check = tf.debugging.assert_equal(
            tf.size(w),
            tf.size(ids),
            message=f"{op.describe()}: give one weight per categorical value.",
        )
        with tf.control_dependencies([check]):
            w = tf.reshape(w, tf.shape(ids))
        return ids, tf.where(ids >= 0, w, tf.zeros_like(w))

    def _batchsize(self, op: BatchSize):
        tf = self.tf
        return tf.zeros(tf.stack([self.batch_size, 0]), tf.float32)
