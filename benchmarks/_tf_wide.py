"""TF 2.15's side of ``wide_scaling.py`` (run by a Python with tensorflow + tensorflow-estimator).

``python _tf_wide.py ROWS.npz BUCKETS WARMUP STEPS BATCH_SIZE`` trains
``tf.estimator.LinearClassifier`` (TF's defaults: FTRL at 0.2, default ``RunConfig``) on the
hashed string columns of ``ROWS.npz``, fed by ``tf.data`` (from_tensor_slices → repeat →
batch → prefetch, TF's recommended input path), and prints one JSON line: steady steps/s
between steps WARMUP and WARMUP + STEPS (timed by a hook), the wall time of the whole
``train()`` and the peak RSS. Not imported by the package; TF is not its dependency.
"""

import json
import resource
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf


def main() -> None:
    rows_path, buckets, warmup, steps, batch_size = sys.argv[1], *map(int, sys.argv[2:6])
    data = dict(np.load(rows_path))
    labels = data.pop("label")
    features = {k: v.astype(bytes) for k, v in data.items()}
    columns = [
        tf.feature_column.categorical_column_with_hash_bucket(k, buckets) for k in sorted(data)
    ]
    times = {}

    class Timer(tf.estimator.SessionRunHook):
        def begin(self):
            self.step = tf.compat.v1.train.get_global_step()

        def before_run(self, run_context):
            return tf.estimator.SessionRunArgs(self.step)

        def after_run(self, run_context, run_values):
            step = int(run_values.results) + 1  # fetched before this step's increment
            if step in (warmup, warmup + steps):
                times[step] = time.perf_counter()

    def input_fn():
        dataset = tf.data.Dataset.from_tensor_slices((features, labels))
        return dataset.repeat().batch(batch_size).prefetch(tf.data.AUTOTUNE)

    model = tf.estimator.LinearClassifier(columns, model_dir=tempfile.mkdtemp(prefix="tf_wide_"))
    start = time.perf_counter()
    model.train(input_fn, steps=warmup + steps, hooks=[Timer()])
    total = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(
        json.dumps(
            {
                "steps_per_sec": steps / (times[warmup + steps] - times[warmup]),
                "end_to_end_s": total,
                "peak_rss_gb": peak / 1e9,
            }
        )
    )


if __name__ == "__main__":
    main()
