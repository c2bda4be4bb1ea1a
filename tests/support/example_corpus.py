"""A generated corpus of ``tf.Example``s covering every parsing spec (shared by
``test_io_parse.py`` and ``tf215_parse_digests.py``, which computes TF 2.15.1's results on
it). Plain Python: it serializes with whichever ``Example`` class it is given (ours or
TensorFlow's), so both sides parse the same bytes."""

import hashlib
import json
import random

import numpy as np

N_EXAMPLES = 2400
BATCH = 120  # 20 batches; each batch's shapes differ


def spec_args():
    """The specs, as (kind, args) tuples either side turns into its own classes."""
    return {
        "f": ("fixed", ([2], "float32", [0.5, -0.5])),
        "i": ("fixed", ([], "int64", None)),
        "s": ("fixed", ([1], "string", [b"none"])),
        "m": ("fixed", ([2, 2], "int64", [1, 2, 3, 4])),
        "v": ("varlen", ("int64",)),
        "vs": ("varlen", ("string",)),
        "vf": ("varlen", ("float32",)),
        "sp": ("sparse", ("idx", "val", "float32", 16)),
        "r": ("ragged", ("float32", None, ())),
        "rp": ("ragged", ("int64", "rv", (("lengths", "rl"),))),
        "q": ("sequence", ([2], "float32", True, None)),
    }


def example_dicts(seed: int = 0) -> list[dict]:
    """``N_EXAMPLES`` examples as ``{key: (list kind, values)}``: random presence (keys with
    defaults or variable lengths may be missing), empty lists, lengths 0-6."""
    rng = random.Random(seed)
    out = []
    for _ in range(N_EXAMPLES):
        e = {"i": ("int64", [rng.randrange(-(2**40), 2**40)])}
        if rng.random() < 0.8:
            e["f"] = ("float", [rng.uniform(-3, 3) for _ in range(2)])
        if rng.random() < 0.7:
            e["s"] = ("bytes", [rng.choice([b"a", b"bb", b"", "\u00e9".encode(), b"\x00z"])])
        if rng.random() < 0.6:
            e["m"] = ("int64", [rng.randrange(-9, 9) for _ in range(4)])
        if rng.random() < 0.7:
            e["v"] = ("int64", [rng.randrange(0, 100) for _ in range(rng.randrange(0, 5))])
        if rng.random() < 0.7:
            e["vs"] = ("bytes", [rng.choice([b"x", b"yy", b""]) for _ in range(rng.randrange(4))])
        if rng.random() < 0.5:
            e["vf"] = ("float", [rng.random() for _ in range(rng.randrange(0, 7))])
        if rng.random() < 0.7:
            k = rng.randrange(0, 4)
            e["idx"] = ("int64", rng.sample(range(16), k))
            e["val"] = ("float", [rng.random() for _ in range(k)])
        if rng.random() < 0.7:
            e["r"] = ("float", [rng.random() for _ in range(rng.randrange(0, 5))])
        if rng.random() < 0.6:
            lengths = [rng.randrange(0, 3) for _ in range(rng.randrange(0, 3))]
            e["rl"] = ("int64", lengths)
            e["rv"] = ("int64", [rng.randrange(100) for _ in range(sum(lengths))])
        if rng.random() < 0.6:
            e["q"] = ("float", [rng.random() for _ in range(2 * rng.randrange(0, 4))])
        out.append(e)
    return out


#: One bad example each, put at position 7 of a batch of valid ones: (name, key, list).
BAD = [
    ("fixed_wrong_type", "f", ("int64", [1, 2])),
    ("fixed_wrong_type_bytes", "i", ("bytes", [b"7"])),
    ("fixed_wrong_length", "f", ("float", [1.0, 2.0, 3.0])),
    ("fixed_empty_list", "m", ("int64", [])),
    ("fixed_missing_required", "i", None),
    ("varlen_wrong_type", "v", ("float", [1.0])),
    ("varlen_string_wrong_type", "vs", ("int64", [3])),
    ("sparse_wrong_type", "val", ("int64", [3])),
    ("ragged_wrong_type", "r", ("bytes", [b"q"])),
    ("sequence_wrong_type", "q", ("int64", [1, 2])),
    ("sequence_not_multiple", "q", ("float", [1.0, 2.0, 3.0])),
]


def bad_batch(examples: list[dict], case: tuple) -> list[dict]:
    _, key, value = case
    batch = [dict(e) for e in examples[:16]]
    if value is None:
        batch[7].pop(key, None)
    else:
        batch[7][key] = value
    return batch


def serialize(example: dict, example_class) -> bytes:
    proto = example_class()
    for key, (kind, values) in example.items():
        getattr(proto.features.feature[key], f"{kind}_list").value.extend(values)
    return proto.SerializeToString()


def digest(parsed: dict) -> str:
    """A sha256 of parsed outputs given as ``{key: nested lists}`` (floats rounded to 6
    significant digits, bytes as latin-1)."""

    def clean(x):
        if isinstance(x, list | tuple):
            return [clean(v) for v in x]
        if isinstance(x, bytes):
            return x.decode("latin-1")
        if isinstance(x, float | np.floating):
            return float(f"{float(x):.6g}")
        if isinstance(x, np.integer):
            return int(x)
        return x

    text = json.dumps({k: clean(v) for k, v in sorted(parsed.items())}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()
