"""A small BERT-style sentence classifier fine-tuned with ``TPUEstimator``, written the way
BERT's ``run_classifier.py`` is (TF 1.15 code).

What it keeps from the original: absl flags through ``tf.flags``; ``InputExample`` /
``InputFeatures`` and a ``DataProcessor``; a vocabulary file and a tokenizer; the features
written as ``tf.train.Example`` s to TFRecord files (``tf.python_io.TFRecordWriter``) and
read back by ``file_based_input_fn_builder`` (``tf.data.TFRecordDataset``,
``tf.parse_single_example``, ``tf.contrib.data.map_and_batch``), or kept in memory
(``input_fn_builder``, ``--use_tfrecord=false``), reading ``params["batch_size"]``; a
Transformer encoder built with ``tf.get_variable``, ``tf.layers.dense`` and
``tf.contrib.layers.layer_norm`` under BERT's variable names (``bert/embeddings/word_embeddings``,
``bert/encoder/layer_0/attention/self/query/kernel``, ``bert/pooler/dense``, ...); a
``model_fn_builder`` returning ``tf.contrib.tpu.TPUEstimatorSpec`` s with
``eval_metrics=(metric_fn, tensors)``, a ``host_call`` writing summaries and, for
fine-tuning, ``tf.train.init_from_checkpoint`` (inside a ``scaffold_fn`` on TPU); Adam with
warm-up and linear decay, gradients clipped by global norm, ``CrossShardOptimizer`` on TPU;
``tf.contrib.tpu.RunConfig`` / ``TPUConfig(iterations_per_loop=...)`` /
``TPUEstimator(use_tpu=..., train_batch_size=..., ...)``.

What is smaller: a one-layer encoder of width 32, a word-level tokenizer, synthetic
reviews (a fixed NumPy seed) instead of GLUE, Adam instead of BERT's own
``AdamWeightDecayOptimizer``, and an assignment map over the ``bert/`` scope
(``{"bert/": "bert/"}``) where BERT lists the variables by name.

TensorFlow 2 has no ``tf.contrib`` and cannot run it; under jax-estimator the import line
becomes ``import estimator.compat as tf`` and it runs with ``--use_tpu`` true or false on
whatever devices JAX has.
"""

import collections
import json
import math
import os
import time

import numpy as np
import tensorflow as tf

flags = tf.flags
FLAGS = flags.FLAGS

flags.DEFINE_string("output_dir", None, "Where the model checkpoints will be written.")
flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint (a previous run's).")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_bool("do_predict", False, "Whether to run the model on the test set.")
flags.DEFINE_integer("max_seq_length", 16, "Maximum total input sequence length.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.")
flags.DEFINE_float("learning_rate", 1e-2, "The initial learning rate for Adam.")
flags.DEFINE_float("num_train_epochs", 5.0, "Total number of training epochs to perform.")
flags.DEFINE_float("warmup_proportion", 0.1, "Proportion of training for linear warmup.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save checkpoints.")
flags.DEFINE_integer("iterations_per_loop", 50, "How many steps to make in each call.")
flags.DEFINE_integer("data_seed", 1, "Seed of the synthetic reviews.")
flags.DEFINE_integer("seed", None, "tf_random_seed of the RunConfig.")
flags.DEFINE_bool("use_tfrecord", True, "Features through TFRecord files (else in memory).")
flags.DEFINE_bool("use_tpu", False, "Whether to use TPU or GPU/CPU.")
flags.DEFINE_string("tpu_name", None, "The Cloud TPU to use for training.")
flags.DEFINE_string("master", None, "[Optional] TensorFlow master URL.")
flags.DEFINE_integer("num_tpu_cores", 8, "Total number of TPU cores to use.")

POSITIVE = ["good", "great", "excellent", "loved", "wonderful", "best", "fun", "brilliant"]
NEGATIVE = ["bad", "awful", "boring", "hated", "worst", "poor", "dull", "terrible"]
NEUTRAL = ["the", "movie", "plot", "actors", "film", "was", "story", "really", "and", "it"]


class InputExample:
    """A single training/test example for simple sequence classification."""

    def __init__(self, guid, text_a, label=None):
        self.guid = guid
        self.text_a = text_a
        self.label = label


class PaddingInputExample:
    """Fake example so the num input examples is a multiple of the batch size (TPU eval)."""


class InputFeatures:
    """A single set of features of data."""

    def __init__(self, input_ids, input_mask, segment_ids, label_id, is_real_example=True):
        self.input_ids = input_ids
        self.input_mask = input_mask
        self.segment_ids = segment_ids
        self.label_id = label_id
        self.is_real_example = is_real_example


class SentimentProcessor:
    """Synthetic movie reviews: the label follows the positive and negative words."""

    def __init__(self, seed):
        self.seed = seed

    def _create_examples(self, n, seed, set_type):
        rng = np.random.RandomState(seed)
        examples = []
        for i in range(n):
            positive = rng.rand() < 0.5
            strong, weak = (POSITIVE, NEGATIVE) if positive else (NEGATIVE, POSITIVE)
            words = list(rng.choice(NEUTRAL, rng.randint(3, 9))) + list(rng.choice(strong, 2))
            words.append(rng.choice(weak if rng.rand() < 0.3 else strong))
            rng.shuffle(words)
            label = "1" if positive else "0"
            examples.append(InputExample(f"{set_type}-{i}", " ".join(words), label))
        return examples

    def get_train_examples(self):
        return self._create_examples(1000, self.seed, "train")

    def get_dev_examples(self):
        return self._create_examples(200, self.seed + 100, "dev")

    def get_test_examples(self):
        return self._create_examples(8, self.seed + 200, "test")

    def get_labels(self):
        return ["0", "1"]


class FullTokenizer:
    """A word-level tokenizer over a vocabulary file (BERT's reads ``vocab.txt`` too)."""

    def __init__(self, vocab_file):
        self.vocab = collections.OrderedDict()
        with tf.gfile.GFile(vocab_file, "r") as reader:
            for index, token in enumerate(reader):
                self.vocab[token.strip()] = index

    def tokenize(self, text):
        return [t if t in self.vocab else "[UNK]" for t in text.lower().split()]

    def convert_tokens_to_ids(self, tokens):
        return [self.vocab[t] for t in tokens]


def convert_single_example(example, label_list, max_seq_length, tokenizer):
    """Converts a single `InputExample` into a single `InputFeatures`."""
    if isinstance(example, PaddingInputExample):
        return InputFeatures(
            [0] * max_seq_length,
            [0] * max_seq_length,
            [0] * max_seq_length,
            0,
            is_real_example=False,
        )
    label_map = {label: i for i, label in enumerate(label_list)}
    tokens_a = tokenizer.tokenize(example.text_a)[: max_seq_length - 2]
    tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
    segment_ids = [0] * len(tokens)
    input_ids = tokenizer.convert_tokens_to_ids(tokens)
    input_mask = [1] * len(input_ids)
    while len(input_ids) < max_seq_length:
        input_ids.append(0)
        input_mask.append(0)
        segment_ids.append(0)
    return InputFeatures(input_ids, input_mask, segment_ids, label_map[example.label])


def convert_examples_to_features(examples, label_list, max_seq_length, tokenizer):
    """Convert a set of `InputExample`s to a list of `InputFeatures`."""
    return [convert_single_example(e, label_list, max_seq_length, tokenizer) for e in examples]


def file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                            output_file):  # fmt: skip
    """Convert a set of `InputExample`s to a TFRecord file."""
    writer = tf.python_io.TFRecordWriter(output_file)
    for example in examples:
        feature = convert_single_example(example, label_list, max_seq_length, tokenizer)

        def create_int_feature(values):
            return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

        features = collections.OrderedDict()
        features["input_ids"] = create_int_feature(feature.input_ids)
        features["input_mask"] = create_int_feature(feature.input_mask)
        features["segment_ids"] = create_int_feature(feature.segment_ids)
        features["label_ids"] = create_int_feature([feature.label_id])
        features["is_real_example"] = create_int_feature([int(feature.is_real_example)])
        tf_example = tf.train.Example(features=tf.train.Features(feature=features))
        writer.write(tf_example.SerializeToString())
    writer.close()


def file_based_input_fn_builder(input_file, seq_length, is_training, drop_remainder):
    """Creates an `input_fn` closure to be passed to TPUEstimator."""
    name_to_features = {
        "input_ids": tf.FixedLenFeature([seq_length], tf.int64),
        "input_mask": tf.FixedLenFeature([seq_length], tf.int64),
        "segment_ids": tf.FixedLenFeature([seq_length], tf.int64),
        "label_ids": tf.FixedLenFeature([], tf.int64),
        "is_real_example": tf.FixedLenFeature([], tf.int64),
    }

    def _decode_record(record, name_to_features):
        """Decodes a record to a TensorFlow example."""
        example = tf.parse_single_example(record, name_to_features)
        # tf.Example only supports tf.int64, but the TPU only supports tf.int32.
        for name in list(example.keys()):
            t = example[name]
            if t.dtype == tf.int64:
                t = tf.to_int32(t)
            example[name] = t
        return example

    def input_fn(params):
        batch_size = params["batch_size"]
        d = tf.data.TFRecordDataset(input_file)
        if is_training:
            d = d.repeat()
            d = d.shuffle(buffer_size=100)
        d = d.apply(
            tf.contrib.data.map_and_batch(
                lambda record: _decode_record(record, name_to_features),
                batch_size=batch_size,
                drop_remainder=drop_remainder,
            )
        )
        return d

    return input_fn


def input_fn_builder(features, seq_length, is_training, drop_remainder):
    """Creates an `input_fn` closure to be passed to TPUEstimator."""
    all_input_ids = [f.input_ids for f in features]
    all_input_mask = [f.input_mask for f in features]
    all_segment_ids = [f.segment_ids for f in features]
    all_label_ids = [f.label_id for f in features]
    all_is_real = [1 if f.is_real_example else 0 for f in features]

    def input_fn(params):
        batch_size = params["batch_size"]
        num_examples = len(features)
        d = tf.data.Dataset.from_tensor_slices(
            {
                "input_ids": tf.constant(
                    all_input_ids, shape=[num_examples, seq_length], dtype=tf.int32
                ),
                "input_mask": tf.constant(
                    all_input_mask, shape=[num_examples, seq_length], dtype=tf.int32
                ),
                "segment_ids": tf.constant(
                    all_segment_ids, shape=[num_examples, seq_length], dtype=tf.int32
                ),
                "label_ids": tf.constant(all_label_ids, shape=[num_examples], dtype=tf.int32),
                "is_real_example": tf.constant(all_is_real, shape=[num_examples], dtype=tf.int32),
            }
        )
        if is_training:
            d = d.repeat()
            d = d.shuffle(buffer_size=100)
        return d.batch(batch_size=batch_size, drop_remainder=drop_remainder)

    return input_fn


class BertConfig:
    """Configuration for `BertModel`."""

    def __init__(
        self,
        vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=32,
        type_vocab_size=2,
        initializer_range=0.02,
    ):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range


def gelu(x):
    """Gaussian Error Linear Unit (the tanh approximation)."""
    cdf = 0.5 * (1.0 + tf.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))
    return x * cdf


def create_initializer(initializer_range=0.02):
    return tf.truncated_normal_initializer(stddev=initializer_range)


def dropout(input_tensor, dropout_prob):
    if dropout_prob is None or dropout_prob == 0.0:
        return input_tensor
    return tf.nn.dropout(input_tensor, 1.0 - dropout_prob)


def layer_norm(input_tensor, name=None):
    """Run layer normalization on the last dimension of the tensor."""
    return tf.contrib.layers.layer_norm(
        inputs=input_tensor, begin_norm_axis=-1, begin_params_axis=-1, scope=name
    )


def attention_layer(from_tensor, attention_mask, config, batch_size, seq_length, training):
    """Multi-headed self attention over ``[batch_size * seq_length, width]`` inputs."""
    heads = config.num_attention_heads
    size = config.hidden_size // heads

    def projection(name):
        layer = tf.layers.dense(
            from_tensor,
            heads * size,
            name=name,
            kernel_initializer=create_initializer(config.initializer_range),
        )
        layer = tf.reshape(layer, [batch_size, seq_length, heads, size])
        return tf.transpose(layer, [0, 2, 1, 3])

    query, key, value = projection("query"), projection("key"), projection("value")
    scores = tf.matmul(query, key, transpose_b=True)
    scores = tf.multiply(scores, 1.0 / math.sqrt(float(size)))
    adder = (1.0 - tf.cast(attention_mask[:, None, :, :], tf.float32)) * -10000.0
    probs = tf.nn.softmax(scores + adder)
    if training:
        probs = dropout(probs, config.attention_probs_dropout_prob)
    context = tf.transpose(tf.matmul(probs, value), [0, 2, 1, 3])
    return tf.reshape(context, [batch_size * seq_length, heads * size])


def bert_model(config, is_training, input_ids, input_mask, token_type_ids):
    """The encoder: embeddings, Transformer layers and the pooler; returns the pooled
    output ``[batch_size, hidden_size]``."""
    batch_size, seq_length = tf.shape(input_ids)[0], input_ids.shape[1]
    width = config.hidden_size
    hidden_dropout = config.hidden_dropout_prob if is_training else 0.0
    init = create_initializer(config.initializer_range)
    with tf.variable_scope("bert"):
        with tf.variable_scope("embeddings"):
            table = tf.get_variable("word_embeddings", [config.vocab_size, width], initializer=init)
            output = tf.gather(table, input_ids)
            token_table = tf.get_variable(
                "token_type_embeddings", [config.type_vocab_size, width], initializer=init
            )
            one_hot_ids = tf.one_hot(tf.reshape(token_type_ids, [-1]), config.type_vocab_size)
            token_embeddings = tf.matmul(one_hot_ids, token_table)
            output += tf.reshape(token_embeddings, [batch_size, seq_length, width])
            positions = tf.get_variable(
                "position_embeddings", [config.max_position_embeddings, width], initializer=init
            )
            output += tf.expand_dims(tf.slice(positions, [0, 0], [seq_length, -1]), 0)
            output = dropout(layer_norm(output, name="LayerNorm"), hidden_dropout)
        with tf.variable_scope("encoder"):
            mask = tf.cast(tf.reshape(input_mask, [batch_size, 1, seq_length]), tf.float32)
            attention_mask = tf.ones([batch_size, seq_length, 1], tf.float32) * mask
            layer_input = tf.reshape(output, [-1, width])
            for layer_idx in range(config.num_hidden_layers):
                with tf.variable_scope(f"layer_{layer_idx}"):
                    with tf.variable_scope("attention"):
                        with tf.variable_scope("self"):
                            attention = attention_layer(
                                layer_input,
                                attention_mask,
                                config,
                                batch_size,
                                seq_length,
                                is_training,
                            )
                        with tf.variable_scope("output"):
                            attention = tf.layers.dense(attention, width, kernel_initializer=init)
                            attention = dropout(attention, hidden_dropout)
                            attention = layer_norm(attention + layer_input)
                    with tf.variable_scope("intermediate"):
                        intermediate = tf.layers.dense(
                            attention,
                            config.intermediate_size,
                            activation=gelu,
                            kernel_initializer=init,
                        )
                    with tf.variable_scope("output"):
                        layer_output = tf.layers.dense(intermediate, width, kernel_initializer=init)
                        layer_output = dropout(layer_output, hidden_dropout)
                        layer_input = layer_norm(layer_output + attention)
            sequence_output = tf.reshape(layer_input, [batch_size, seq_length, width])
        with tf.variable_scope("pooler"):
            first_token_tensor = tf.squeeze(sequence_output[:, 0:1, :], axis=1)
            return tf.layers.dense(
                first_token_tensor, width, activation=tf.tanh, kernel_initializer=init
            )


def create_model(bert_config, is_training, input_ids, input_mask, segment_ids, labels, num_labels):
    """Creates a classification model."""
    output_layer = bert_model(bert_config, is_training, input_ids, input_mask, segment_ids)
    hidden_size = output_layer.shape[-1]
    output_weights = tf.get_variable(
        "output_weights",
        [num_labels, hidden_size],
        initializer=tf.truncated_normal_initializer(stddev=0.02),
    )
    output_bias = tf.get_variable("output_bias", [num_labels], initializer=tf.zeros_initializer())
    with tf.variable_scope("loss"):
        if is_training:
            output_layer = tf.nn.dropout(output_layer, keep_prob=0.9)
        logits = tf.matmul(output_layer, output_weights, transpose_b=True)
        logits = tf.nn.bias_add(logits, output_bias)
        probabilities = tf.nn.softmax(logits, axis=-1)
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        one_hot_labels = tf.one_hot(labels, depth=num_labels, dtype=tf.float32)
        per_example_loss = -tf.reduce_sum(one_hot_labels * log_probs, axis=-1)
        loss = tf.reduce_mean(per_example_loss)
        return loss, per_example_loss, logits, probabilities


def create_optimizer(loss, init_lr, num_train_steps, num_warmup_steps, use_tpu):
    """Adam with linear warm-up and linear decay; gradients clipped by global norm."""
    global_step = tf.train.get_or_create_global_step()
    learning_rate = tf.constant(value=init_lr, shape=[], dtype=tf.float32)
    learning_rate = tf.train.polynomial_decay(
        learning_rate, global_step, num_train_steps, end_learning_rate=0.0, power=1.0, cycle=False
    )
    if num_warmup_steps:
        global_steps_int = tf.cast(global_step, tf.int32)
        warmup_steps_int = tf.constant(num_warmup_steps, dtype=tf.int32)
        warmup_percent_done = tf.cast(global_steps_int, tf.float32) / tf.cast(
            warmup_steps_int, tf.float32
        )
        warmup_learning_rate = init_lr * warmup_percent_done
        is_warmup = tf.cast(global_steps_int < warmup_steps_int, tf.float32)
        learning_rate = (1.0 - is_warmup) * learning_rate + is_warmup * warmup_learning_rate
    optimizer = tf.train.AdamOptimizer(learning_rate=learning_rate, epsilon=1e-6)
    if use_tpu:
        optimizer = tf.contrib.tpu.CrossShardOptimizer(optimizer)
    tvars = tf.trainable_variables()
    grads = tf.gradients(loss, tvars)
    (grads, _) = tf.clip_by_global_norm(grads, clip_norm=1.0)
    return optimizer.apply_gradients(
        zip(grads, tvars, strict=True), global_step=global_step
    ), learning_rate


def model_fn_builder(
    bert_config,
    num_labels,
    init_checkpoint,
    learning_rate,
    num_train_steps,
    num_warmup_steps,
    use_tpu,
    output_dir,
):
    """Returns `model_fn` closure for TPUEstimator."""

    def model_fn(features, labels, mode, params):
        input_ids = features["input_ids"]
        input_mask = features["input_mask"]
        segment_ids = features["segment_ids"]
        label_ids = features["label_ids"]
        is_real_example = tf.cast(features["is_real_example"], dtype=tf.float32)
        is_training = mode == tf.estimator.ModeKeys.TRAIN
        (total_loss, per_example_loss, logits, probabilities) = create_model(
            bert_config, is_training, input_ids, input_mask, segment_ids, label_ids, num_labels
        )
        scaffold_fn = None
        if init_checkpoint:
            assignment_map = {"bert/": "bert/"}
            if use_tpu:

                def tpu_scaffold():
                    tf.train.init_from_checkpoint(init_checkpoint, assignment_map)
                    return tf.train.Scaffold()

                scaffold_fn = tpu_scaffold
            else:
                tf.train.init_from_checkpoint(init_checkpoint, assignment_map)
        if mode == tf.estimator.ModeKeys.TRAIN:
            train_op, lr = create_optimizer(
                total_loss, learning_rate, num_train_steps, num_warmup_steps, use_tpu
            )

            def host_call_fn(gs, loss, lr):
                gs = gs[0]
                with tf.contrib.summary.create_file_writer(output_dir).as_default():
                    with tf.contrib.summary.always_record_summaries():
                        tf.contrib.summary.scalar("loss", loss[0], step=gs)
                        tf.contrib.summary.scalar("learning_rate", lr[0], step=gs)
                        return tf.contrib.summary.all_summary_ops()

            gs_t = tf.reshape(tf.train.get_global_step(), [1])
            host_call = (host_call_fn, [gs_t, tf.reshape(total_loss, [1]), tf.reshape(lr, [1])])
            return tf.contrib.tpu.TPUEstimatorSpec(
                mode=mode,
                loss=total_loss,
                train_op=train_op,
                scaffold_fn=scaffold_fn,
                host_call=host_call,
            )
        if mode == tf.estimator.ModeKeys.EVAL:

            def metric_fn(per_example_loss, label_ids, logits, is_real_example):
                predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
                accuracy = tf.metrics.accuracy(
                    labels=label_ids, predictions=predictions, weights=is_real_example
                )
                loss = tf.metrics.mean(values=per_example_loss, weights=is_real_example)
                return {"eval_accuracy": accuracy, "eval_loss": loss}

            eval_metrics = (metric_fn, [per_example_loss, label_ids, logits, is_real_example])
            return tf.contrib.tpu.TPUEstimatorSpec(
                mode=mode, loss=total_loss, eval_metrics=eval_metrics, scaffold_fn=scaffold_fn
            )
        return tf.contrib.tpu.TPUEstimatorSpec(
            mode=mode, predictions={"probabilities": probabilities}, scaffold_fn=scaffold_fn
        )

    return model_fn


def main(_):
    tf.logging.set_verbosity(tf.logging.INFO)
    start = time.time()
    if not FLAGS.do_train and not FLAGS.do_eval and not FLAGS.do_predict:
        raise ValueError("At least one of `do_train`, `do_eval` or `do_predict' must be True.")
    tf.gfile.MakeDirs(FLAGS.output_dir)
    vocab_file = os.path.join(FLAGS.output_dir, "vocab.txt")
    with tf.gfile.GFile(vocab_file, "w") as writer:
        writer.write(
            "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + POSITIVE + NEGATIVE + NEUTRAL) + "\n"
        )
    tokenizer = FullTokenizer(vocab_file)
    bert_config = BertConfig(vocab_size=len(tokenizer.vocab))
    processor = SentimentProcessor(FLAGS.data_seed)
    label_list = processor.get_labels()

    tpu_cluster_resolver = None
    if FLAGS.use_tpu and FLAGS.tpu_name:
        tpu_cluster_resolver = tf.contrib.cluster_resolver.TPUClusterResolver(FLAGS.tpu_name)
    is_per_host = tf.contrib.tpu.InputPipelineConfig.PER_HOST_V2
    run_config = tf.contrib.tpu.RunConfig(
        cluster=tpu_cluster_resolver,
        master=FLAGS.master,
        model_dir=FLAGS.output_dir,
        tf_random_seed=FLAGS.seed,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        tpu_config=tf.contrib.tpu.TPUConfig(
            iterations_per_loop=FLAGS.iterations_per_loop,
            num_shards=FLAGS.num_tpu_cores,
            per_host_input_for_training=is_per_host,
        ),
    )
    train_examples = None
    num_train_steps = None
    num_warmup_steps = None
    if FLAGS.do_train:
        train_examples = processor.get_train_examples()
        num_train_steps = int(len(train_examples) / FLAGS.train_batch_size * FLAGS.num_train_epochs)
        num_warmup_steps = int(num_train_steps * FLAGS.warmup_proportion)
    model_fn = model_fn_builder(
        bert_config=bert_config,
        num_labels=len(label_list),
        init_checkpoint=FLAGS.init_checkpoint,
        learning_rate=FLAGS.learning_rate,
        num_train_steps=num_train_steps,
        num_warmup_steps=num_warmup_steps,
        use_tpu=FLAGS.use_tpu,
        output_dir=FLAGS.output_dir,
    )
    estimator = tf.contrib.tpu.TPUEstimator(
        use_tpu=FLAGS.use_tpu,
        model_fn=model_fn,
        config=run_config,
        train_batch_size=FLAGS.train_batch_size,
        eval_batch_size=FLAGS.eval_batch_size,
        predict_batch_size=FLAGS.predict_batch_size,
    )
    result = {}

    def make_input_fn(examples, name, is_training, drop_remainder):
        if FLAGS.use_tfrecord:
            path = os.path.join(FLAGS.output_dir, f"{name}.tf_record")
            file_based_convert_examples_to_features(
                examples, label_list, FLAGS.max_seq_length, tokenizer, path
            )
            return file_based_input_fn_builder(
                path, FLAGS.max_seq_length, is_training, drop_remainder
            )
        features = convert_examples_to_features(
            examples, label_list, FLAGS.max_seq_length, tokenizer
        )
        return input_fn_builder(features, FLAGS.max_seq_length, is_training, drop_remainder)

    if FLAGS.do_train:
        tf.logging.info("***** Running training *****")
        tf.logging.info("  Num examples = %d", len(train_examples))
        tf.logging.info("  Num steps = %d", num_train_steps)
        train_input_fn = make_input_fn(train_examples, "train", True, True)
        estimator.train(input_fn=train_input_fn, max_steps=num_train_steps)
    if FLAGS.do_eval:
        eval_examples = processor.get_dev_examples()
        num_actual_eval_examples = len(eval_examples)
        if FLAGS.use_tpu:
            while len(eval_examples) % FLAGS.eval_batch_size != 0:
                eval_examples.append(PaddingInputExample())
        eval_steps = None
        if FLAGS.use_tpu:
            eval_steps = int(len(eval_examples) // FLAGS.eval_batch_size)
        eval_drop_remainder = True if FLAGS.use_tpu else False
        eval_input_fn = make_input_fn(eval_examples, "eval", False, eval_drop_remainder)
        evaluation = estimator.evaluate(input_fn=eval_input_fn, steps=eval_steps)
        output_eval_file = os.path.join(FLAGS.output_dir, "eval_results.txt")
        with tf.gfile.GFile(output_eval_file, "w") as writer:
            tf.logging.info("***** Eval results *****")
            for key in sorted(evaluation.keys()):
                tf.logging.info("  %s = %s", key, str(evaluation[key]))
                writer.write(f"{key} = {evaluation[key]}\n")
        result.update(
            eval_accuracy=float(evaluation["eval_accuracy"]),
            eval_loss=float(evaluation["eval_loss"]),
            global_step=int(evaluation["global_step"]),
            num_eval_examples=num_actual_eval_examples,
        )
    if FLAGS.do_predict:
        predict_examples = processor.get_test_examples()
        predict_input_fn = make_input_fn(predict_examples, "predict", False, FLAGS.use_tpu)
        predicted = []
        for prediction in estimator.predict(input_fn=predict_input_fn):
            predicted.append(label_list[int(np.argmax(prediction["probabilities"]))])
        result["predicted"] = predicted
        result["expected"] = [e.label for e in predict_examples]
    result["seconds"] = time.time() - start
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    flags.mark_flag_as_required("output_dir")
    tf.app.run()
