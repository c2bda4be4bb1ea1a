"""TF 2.15's feature columns (``tf.feature_column``) in two phases: NumPy host, JAX device.

Strings cannot enter a jitted step, so every column has a *host* phase — a declarative
NumPy op from ``estimator.preprocessing`` (vocabulary lookup, hashing, bucketizing,
crossing) that runs in the input pipeline — and a *device* phase inside ``model_fn``
(weights created with ``get_variable`` under TF's names, embedding lookups)::

    import canned.feature_column as fc

    age = fc.numeric_column("age")
    columns = [
        age,
        fc.bucketized_column(age, [18, 25, 30, 35, 40, 45, 50, 55, 60, 65]),
        fc.categorical_column_with_vocabulary_list("workclass", ["Private", "Self-emp-inc"]),
        fc.categorical_column_with_hash_bucket("occupation", 1000),
        fc.crossed_column(["education", "occupation"], 1000),
    ]
    transform = fc.input_transform(columns)            # host phase (NumPy)
    features, labels = transform.apply(raw_features, raw_labels)

    def model_fn(features, labels, mode):              # device phase (JAX, jitted)
        with est.variable_scope("linear"):
            logits = fc.linear_model(features, columns)  # linear/linear_model/age/weights...

The dict between the phases (``transform.apply(...)[0]``):

* ``numeric_column(key)``: ``features[key]``, ``float32 [batch_size, *shape]``;
* every categorical column ``c`` (vocabulary, hash bucket, identity, crossed, bucketized,
  weighted — also when wrapped in ``indicator_column`` / ``embedding_column``):
  ``features[c.name + "/ids"]``, ``int32 [batch_size, k]``, ``-1`` meaning "no id";
* ``weighted_categorical_column`` ``c``: also ``features[c.name + "/weights"]``,
  ``float32 [batch_size, k]``;
* sequence columns (``sequence_numeric_column``, ``sequence_categorical_column_with_*``):
  padded ``[batch_size, T, ...]`` values or ids and ``features[c.name +
  "/sequence_length"]``, ``int32 [batch_size]`` (see ``sequence_input_layer``).

Behaviour differs from TF 2.15 in a few documented places: ``normalizer_fn`` runs on the
``float32`` value (TF: on the input dtype), and a ``bucketized_column`` refuses a source
with a ``normalizer_fn``; NaN numeric inputs take ``default_value`` when one is given;
``""``/``-1`` are dropped from crosses of raw features too (TF crosses them when the input
is a dense tensor, not when it comes from ``tf.io.parse_example``), and an
out-of-vocabulary id of -1 takes no part in a cross (TF crosses the value -1).
"""

from canned.feature_column._base import CategoricalColumn as CategoricalColumn
from canned.feature_column._base import DenseColumn as DenseColumn
from canned.feature_column._base import FeatureColumn as FeatureColumn
from canned.feature_column._categorical import CrossedColumn as CrossedColumn
from canned.feature_column._categorical import HashedCategoricalColumn as HashedCategoricalColumn
from canned.feature_column._categorical import (
    IdentityCategoricalColumn as IdentityCategoricalColumn,
)
from canned.feature_column._categorical import (
    VocabularyFileCategoricalColumn as VocabularyFileCategoricalColumn,
)
from canned.feature_column._categorical import (
    VocabularyListCategoricalColumn as VocabularyListCategoricalColumn,
)
from canned.feature_column._categorical import (
    WeightedCategoricalColumn as WeightedCategoricalColumn,
)
from canned.feature_column._categorical import (
    categorical_column_with_hash_bucket as categorical_column_with_hash_bucket,
)
from canned.feature_column._categorical import (
    categorical_column_with_identity as categorical_column_with_identity,
)
from canned.feature_column._categorical import (
    categorical_column_with_vocabulary_file as categorical_column_with_vocabulary_file,
)
from canned.feature_column._categorical import (
    categorical_column_with_vocabulary_list as categorical_column_with_vocabulary_list,
)
from canned.feature_column._categorical import crossed_column as crossed_column
from canned.feature_column._categorical import (
    weighted_categorical_column as weighted_categorical_column,
)
from canned.feature_column._dense import EmbeddingColumn as EmbeddingColumn
from canned.feature_column._dense import IndicatorColumn as IndicatorColumn
from canned.feature_column._dense import embedding_column as embedding_column
from canned.feature_column._dense import indicator_column as indicator_column
from canned.feature_column._dense import shared_embeddings as shared_embeddings
from canned.feature_column._input_layer import input_layer as input_layer
from canned.feature_column._linear import linear_model as linear_model
from canned.feature_column._lookup import safe_embedding_lookup as safe_embedding_lookup
from canned.feature_column._numeric import BucketizedColumn as BucketizedColumn
from canned.feature_column._numeric import NumericColumn as NumericColumn
from canned.feature_column._numeric import bucketized_column as bucketized_column
from canned.feature_column._numeric import numeric_column as numeric_column
from canned.feature_column._sequence import SequenceCategoricalColumn as SequenceCategoricalColumn
from canned.feature_column._sequence import SequenceFeatures as SequenceFeatures
from canned.feature_column._sequence import SequenceNumericColumn as SequenceNumericColumn
from canned.feature_column._sequence import concatenate_context_input as concatenate_context_input
from canned.feature_column._sequence import (
    sequence_categorical_column_with_hash_bucket as sequence_categorical_column_with_hash_bucket,
)
from canned.feature_column._sequence import (
    sequence_categorical_column_with_identity as sequence_categorical_column_with_identity,
)
from canned.feature_column._sequence import (
    sequence_categorical_column_with_vocabulary_file as sequence_categorical_column_with_vocabulary_file,  # noqa: E501
)
from canned.feature_column._sequence import (
    sequence_categorical_column_with_vocabulary_list as sequence_categorical_column_with_vocabulary_list,  # noqa: E501
)
from canned.feature_column._sequence import sequence_input_layer as sequence_input_layer
from canned.feature_column._sequence import sequence_numeric_column as sequence_numeric_column
from canned.feature_column._transform import input_transform as input_transform
from canned.feature_column._transform import make_parse_example_spec as make_parse_example_spec

__all__ = [
    "numeric_column",
    "bucketized_column",
    "categorical_column_with_vocabulary_list",
    "categorical_column_with_vocabulary_file",
    "categorical_column_with_hash_bucket",
    "categorical_column_with_identity",
    "crossed_column",
    "indicator_column",
    "embedding_column",
    "shared_embeddings",
    "weighted_categorical_column",
    "sequence_numeric_column",
    "sequence_categorical_column_with_identity",
    "sequence_categorical_column_with_hash_bucket",
    "sequence_categorical_column_with_vocabulary_list",
    "sequence_categorical_column_with_vocabulary_file",
    "sequence_input_layer",
    "SequenceFeatures",
    "concatenate_context_input",
    "make_parse_example_spec",
    "input_transform",
    "linear_model",
    "input_layer",
    "safe_embedding_lookup",
    "FeatureColumn",
    "DenseColumn",
    "CategoricalColumn",
    "NumericColumn",
    "BucketizedColumn",
    "VocabularyListCategoricalColumn",
    "VocabularyFileCategoricalColumn",
    "HashedCategoricalColumn",
    "IdentityCategoricalColumn",
    "WeightedCategoricalColumn",
    "CrossedColumn",
    "IndicatorColumn",
    "EmbeddingColumn",
    "SequenceCategoricalColumn",
    "SequenceNumericColumn",
]
