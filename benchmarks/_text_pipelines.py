"""The two TF 1 CSV pipelines of ``text_pipeline.py``, one source for both sides: run by
TensorFlow 2.15 (``import tensorflow as tf``) or by this package
(``import estimator.compat.v1 as tf``), the same code. Prints one JSON line.

Usage: ``<python> benchmarks/_text_pipelines.py tf|ours CSV_FILE BATCH PASSES``.
"""

import json
import os
import sys
import time

COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
    "occupation", "relationship", "race", "gender", "capital_gain", "capital_loss",
    "hours_per_week", "native_country", "income_bracket",
]  # fmt: skip
DEFAULTS = [[0], [""], [0], [""], [0], [""], [""], [""], [""], [""], [0], [0], [0], [""], [""]]
ORDERS = ("map_then_batch", "batch_then_map")


def dataset(tf, path: str, order: str, batch: int):
    """TF's way: ``TextLineDataset`` → ``map(decode_csv, AUTOTUNE)`` → ``batch`` (or batch
    first) → ``prefetch(AUTOTUNE)``."""

    def parse_csv(line):
        columns = tf.io.decode_csv(line, record_defaults=DEFAULTS)
        features = dict(zip(COLUMNS, columns, strict=True))
        label = features.pop("income_bracket")
        return features, tf.equal(label, " >50K")

    lines = tf.data.TextLineDataset(path)
    if order == "map_then_batch":
        data = lines.map(parse_csv, num_parallel_calls=tf.data.AUTOTUNE).batch(batch)
    else:
        data = lines.batch(batch).map(parse_csv, num_parallel_calls=tf.data.AUTOTUNE)
    return data.prefetch(tf.data.AUTOTUNE)


def rates(tf, path: str, batch: int, passes: int, iterate) -> dict:
    """examples/s of each order: one pass to warm up (tracing, compiling), then the mean
    rate of ``passes`` passes."""
    out = {}
    for order in ORDERS:
        data = dataset(tf, path, order, batch)
        for _ in iterate(data):
            pass
        start, n = time.perf_counter(), 0
        for _ in range(passes):
            for _, labels in iterate(data):
                n += len(labels)
        out[order] = n / (time.perf_counter() - start)
    return out


def main() -> None:
    side, path, batch, passes = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if side == "tf":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as tf

        iterate = iter  # eager tensors, no conversion to NumPy (TF's fastest Python loop)
        version = tf.__version__
    else:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        import estimator.compat.v1 as tf

        iterate = lambda data: data.as_numpy_iterator()  # noqa: E731 (what the Estimator reads)
        version = "estimator.compat.v1"
    print(json.dumps({"side": side, "version": version, **rates(tf, path, batch, passes, iterate)}))


if __name__ == "__main__":
    main()
