"""Host-side input preprocessing: the NumPy phase of feature columns.

Strings cannot enter a jitted step, so TF's feature columns run here in two phases. This
module is the *host* phase: a small, declarative set of vectorized NumPy ops (vocabulary
lookup, hashing, bucketizing, crossing, ...) that turn a batch of raw features — strings
allowed — into numeric arrays, inside the input pipeline. The *device* phase
(``canned.feature_column``: weights, embedding lookups, ``linear_model``) consumes those
arrays inside the jitted step. Every op is a frozen dataclass that serializes to JSON
(``to_config``/``op_from_config``), so an exported model re-applies the host phase in a
process that has no model code.

Synopsis::

    import numpy as np
    from estimator import preprocessing as pp

    transform = pp.InputTransform([
        ("age", pp.Numeric("age")),
        ("workclass", pp.VocabularyList("workclass", ("Private", "State-gov"),
                                        num_oov_buckets=1)),
    ])
    features, labels = transform.apply(
        {"age": np.array([39, 50]), "workclass": np.array(["State-gov", "?"])}, None)
    # features == {"age": [[39.], [50.]] (float32),
    #              "workclass/ids": [[1], [2]] (int32; "?" went to the OOV bucket 2)}

Layout of the transformed features (``InputTransform.apply``), for an entry ``(name, op)``:

* dense op (:class:`Numeric`): ``features'[name]``, ``float32 [batch_size, *shape]``;
* categorical op (every other op): ``features'[name + "/ids"]``, ``int32 [batch_size, k]``,
  where ``-1`` marks "no id" (a missing input value, or an out-of-vocabulary value without
  OOV buckets or default); :class:`Weighted` adds ``features'[name + "/weights"]``,
  ``float32 [batch_size, k]``, aligned with the ids.
* sequence ops (:class:`SequenceCategorical`, :class:`SequenceNumeric`,
  :class:`SequenceLength`): padded ``[batch_size, T]`` ids, ``[batch_size, T, *shape]``
  values and ``int32 [batch_size]`` lengths; their raw input may also be ragged or sparse
  (see ``estimator.preprocessing._sequence``).

Raw inputs: a dense feature is ``[batch_size, *shape]`` (or anything with
``batch_size * prod(shape)`` values). A categorical feature is ``[batch_size]`` (one value
per example) or ``[batch_size, k]`` (several values per example, padded with ``""`` for
strings or ``-1`` for integers: TF's convention for dense categorical input, those entries
are dropped). Strings may be ``str``, ``bytes`` or ``object`` arrays.

Hashing is TF's, stable across processes and platforms: FarmHash ``Fingerprint64`` of the
UTF-8 bytes (``pyfarmhash``), integers hashed through their decimal string as TF does, and
``FingerprintCat64`` chaining for crosses (``tf.sparse.cross_hashed``).
"""

from estimator.io._specs import FixedLenFeature as FixedLenFeature
from estimator.io._specs import VarLenFeature as VarLenFeature
from estimator.io._specs import dtype_name as dtype_name
from estimator.io._specs import feature_from_config as feature_from_config
from estimator.preprocessing._base import CategoricalIds as CategoricalIds
from estimator.preprocessing._base import Op as Op
from estimator.preprocessing._base import op_from_config as op_from_config
from estimator.preprocessing._base import register_op as register_op
from estimator.preprocessing._cross import DEFAULT_CROSS_HASH_KEY as DEFAULT_CROSS_HASH_KEY
from estimator.preprocessing._cross import Cross as Cross
from estimator.preprocessing._cross import Weighted as Weighted
from estimator.preprocessing._csv import decode_csv as decode_csv
from estimator.preprocessing._fingerprint import fingerprint64 as fingerprint64
from estimator.preprocessing._fingerprint import fingerprint_cat64 as fingerprint_cat64
from estimator.preprocessing._lookup import HashBucket as HashBucket
from estimator.preprocessing._lookup import Identity as Identity
from estimator.preprocessing._lookup import VocabularyFile as VocabularyFile
from estimator.preprocessing._lookup import VocabularyList as VocabularyList
from estimator.preprocessing._numeric import BatchSize as BatchSize
from estimator.preprocessing._numeric import Bucketize as Bucketize
from estimator.preprocessing._numeric import Numeric as Numeric
from estimator.preprocessing._sequence import SequenceCategorical as SequenceCategorical
from estimator.preprocessing._sequence import SequenceLength as SequenceLength
from estimator.preprocessing._sequence import SequenceNumeric as SequenceNumeric
from estimator.preprocessing._transform import InputTransform as InputTransform

__all__ = [
    "BatchSize",
    "InputTransform",
    "FixedLenFeature",
    "VarLenFeature",
    "feature_from_config",
    "Op",
    "CategoricalIds",
    "Numeric",
    "Bucketize",
    "VocabularyList",
    "VocabularyFile",
    "HashBucket",
    "Identity",
    "Cross",
    "Weighted",
    "SequenceCategorical",
    "SequenceNumeric",
    "SequenceLength",
    "op_from_config",
    "register_op",
    "dtype_name",
    "decode_csv",
    "fingerprint64",
    "fingerprint_cat64",
    "DEFAULT_CROSS_HASH_KEY",
]
