"""The programs' shared epilogue: one ``RESULT {json}`` line that the tests and
``benchmarks/compat_programs.py`` read. Plain Python (no TensorFlow), so a program imports
it unchanged under TF 2.15 and, ported, under jax-estimator."""

import json
import time


def print_result(start, results, metrics, **extra):
    """Prints ``RESULT`` and a JSON object: the evaluation ``results`` named in ``metrics``
    as floats (``label/mean`` as ``label_mean``), the global step, the ``extra`` values,
    and ``seconds``, the time since ``start`` (a ``time.time()``)."""
    result = {name.replace("/", "_"): float(results[name]) for name in metrics}
    result["global_step"] = int(results["global_step"])
    result.update(extra)
    result["seconds"] = time.time() - start
    print("RESULT " + json.dumps(result))
