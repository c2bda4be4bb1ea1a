"""Click-through-rate prediction: a wide LinearClassifier over million-bucket hashed columns.

Synthetic data shaped like ad-click logs: high-cardinality string ids (users, ads), a few
low-cardinality fields (site, device, hour) and a cross of ad and site, all as strings, as
they arrive from a log. Clicks follow a hidden logistic model, so there is signal to
learn. Trains ``canned.LinearClassifier`` (FTRL, TF 2.15's defaults) on hashed columns of
10⁶ buckets (and a 10⁶-bucket cross), evaluates AUC and log loss on held-out rows,
exports with a parsing receiver, reloads the export and scores raw rows.

Usage::

    python examples/ctr.py [--rows 300000] [--buckets 1000000] [--batch-size 1024]
                           [--epochs 1] [--model-dir DIR]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
import time

import numpy as np

import canned
import estimator as est
from canned import feature_column as fc

SITES = [f"site_{i}" for i in range(40)]
DEVICES = ["phone", "tablet", "desktop", "tv", "other"]


def make_data(rows: int, seed: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Log-like rows (all strings but ``hour``) and 0/1 clicks from a hidden model: each
    user, ad, site and device has a random effect, plus an ad-by-site interaction."""
    rng = np.random.default_rng(seed)
    n_users, n_ads = 50_000, 5_000
    user = rng.zipf(1.3, rows) % n_users
    ad = rng.zipf(1.2, rows) % n_ads
    site = rng.integers(0, len(SITES), rows)
    device = rng.integers(0, len(DEVICES), rows)
    hour = rng.integers(0, 24, rows).astype(np.float32)
    effects = np.random.default_rng(12345)  # the hidden model, the same for every split
    user_effect = effects.normal(0, 0.5, n_users)
    ad_effect = effects.normal(0, 0.8, n_ads)
    site_effect = effects.normal(0, 0.4, len(SITES))
    device_effect = effects.normal(0, 0.3, len(DEVICES))
    pair_effect = effects.normal(0, 0.7, (n_ads, len(SITES)))
    logit = (
        -2.5
        + user_effect[user]
        + ad_effect[ad]
        + site_effect[site]
        + device_effect[device]
        + pair_effect[ad, site]
        + 0.3 * np.sin(hour / 24 * 2 * np.pi)
    )
    clicks = (rng.random(rows) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    features = {
        "user_id": np.char.add("u", user.astype(str)).astype(object),
        "ad_id": np.char.add("a", ad.astype(str)).astype(object),
        "site": np.asarray(SITES, object)[site],
        "device": np.asarray(DEVICES, object)[device],
        "hour": hour,
    }
    return features, clicks


def columns(buckets: int) -> list:
    """Hashed ids at ``buckets`` each, vocabularies, bucketized hour, an ad x site cross."""
    hour = fc.bucketized_column(fc.numeric_column("hour"), boundaries=[6.0, 12.0, 18.0])
    return [
        fc.categorical_column_with_hash_bucket("user_id", buckets),
        fc.categorical_column_with_hash_bucket("ad_id", buckets),
        fc.categorical_column_with_vocabulary_list("site", SITES),
        fc.categorical_column_with_vocabulary_list("device", DEVICES),
        hour,
        fc.crossed_column(["ad_id", "site"], buckets),
    ]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--buckets", type=int, default=1_000_000)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--model-dir")
    args = parser.parse_args(argv)
    logging.getLogger("estimator").setLevel(logging.WARNING)
    start = time.time()
    train_x, train_y = make_data(args.rows, seed=0)
    test_x, test_y = make_data(max(args.rows // 5, 1000), seed=1)
    print(
        f"{len(train_y):,} training and {len(test_y):,} test rows, click rate "
        f"{train_y.mean():.2%}; {args.buckets:,} buckets per hashed column"
    )
    model_dir = args.model_dir or tempfile.mkdtemp(prefix="ctr_")
    model = canned.LinearClassifier(
        columns(args.buckets), model_dir, config=est.RunConfig(tf_random_seed=0)
    )
    model.train(  # a tqdm progress bar shows on terminals (ProgressBarHook)
        est.inputs.numpy_input_fn(
            train_x, train_y, batch_size=args.batch_size, num_epochs=args.epochs, shuffle=True
        )
    )
    results = model.evaluate(
        est.inputs.numpy_input_fn(test_x, test_y, batch_size=4096, shuffle=False)
    )
    rate = train_y.mean()
    baseline = -np.mean(test_y * np.log(rate) + (1 - test_y) * np.log(1 - rate))
    print(
        f"held out: AUC {results['auc']:.4f}, log loss {results['average_loss']:.4f} "
        f"(predicting the click rate everywhere: {baseline:.4f})"
    )
    receiver = est.export.build_parsing_serving_input_receiver_fn(
        fc.make_parse_example_spec(columns(args.buckets))
    )
    export_dir = model.export_saved_model(f"{model_dir}/export", receiver).decode()
    served = est.export.load(export_dir).signatures["serving_default"]
    rows = {k: v[:3].tolist() for k, v in test_x.items()}
    scores = served(**rows)["scores"][:, 1]
    print(f"exported to {export_dir}")
    print(f"P(click) of 3 raw rows by the reloaded export: {[round(float(p), 4) for p in scores]}")
    print(f"total {time.time() - start:.1f} s")
    if args.model_dir is None:
        shutil.rmtree(model_dir, ignore_errors=True)
    return results


if __name__ == "__main__":
    results = main()
    sys.exit(0 if results["auc"] > 0.6 else 1)
