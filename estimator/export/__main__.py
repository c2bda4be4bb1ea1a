"""``python -m estimator.export show|run|to_tf_saved_model``: inspect, run and convert an
export (TF's saved_model_cli).

``show <dir>`` prints every signature's inputs and outputs. ``run <dir> --signature NAME
--inputs FILE`` reads inputs from a JSON file — columns ``{"inputs": {"age": [39, 50]}}``
or rows ``{"instances": [{"age": 39}, {"age": 50}]}`` (TF Serving's REST formats), or a
plain ``{"age": [39, 50]}`` — and prints the outputs as JSON. ``to_tf_saved_model <dir>
<output_dir>`` writes the export as a TF SavedModel for TF Serving (needs the ``tf`` extra;
see ``estimator.export.tf_saved_model``) and prints its path.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys

import numpy as np

from estimator.export._loader import load


def _decode_b64(value):
    """``{"b64": "..."}`` -> bytes, recursively (TF Serving's JSON for binary strings, e.g.
    serialized ``tf.Example`` under ``examples``)."""
    if isinstance(value, dict):
        if set(value) == {"b64"}:
            return base64.b64decode(value["b64"], validate=True)
        return {k: _decode_b64(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode_b64(v) for v in value]
    return value


def _columns(payload) -> dict:
    payload = _decode_b64(payload)
    if isinstance(payload, dict) and "instances" in payload:
        rows = payload["instances"]
        if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
            raise ValueError(
                "'instances' must be a list of objects, one per example: "
                '{"instances": [{"age": 39}, {"age": 50}]}'
            )
        names = list(dict.fromkeys(k for row in rows for k in row))
        return {k: [row.get(k) for row in rows] for k in names}
    if isinstance(payload, dict) and "inputs" in payload:
        return dict(payload["inputs"])
    if isinstance(payload, dict):
        return payload
    raise ValueError("inputs JSON must be an object: {'inputs': {...}} or {'instances': [...]}")


def _read_json(f, name: str):
    """The JSON document in ``f``; a ValueError naming ``name`` and the position if it is
    not valid JSON."""
    try:
        return json.load(f)
    except json.JSONDecodeError as err:
        raise ValueError(
            f"the inputs file {name} is not valid JSON: {err.msg} at line {err.lineno} column "
            f"{err.colno} (char {err.pos}). Expected an object such as "
            '{"inputs": {"age": [39, 50]}} or {"instances": [{"age": 39}, {"age": 50}]}.'
        ) from None


def _jsonable(value):
    value = np.asarray(value)
    if value.dtype == object:
        return [
            _jsonable(v)
            if isinstance(v, np.ndarray)
            else (v.decode() if isinstance(v, bytes) else v)
            for v in value
        ]
    return value.tolist()


def show(path: str) -> str:
    """The text ``show`` prints."""
    model = load(path)
    lines = [
        f"Export {model.path} (global step {model.global_step}, "
        f"jax {model.manifest['jax_version']}, platforms {model.manifest['platforms']})"
    ]
    for name, signature in sorted(model.signatures.items()):
        lines.append(
            f"\nsignature_def['{name}']: mode {signature.mode}, method {signature.method_name}"
        )
        lines.append("  inputs:")
        for key, spec in sorted(signature.inputs.items()):
            lines.append(f"    inputs['{key}']: dtype {spec['dtype']}, shape {spec['shape']}")
        lines.append("  outputs:")
        for key, spec in sorted(signature.outputs.items()):
            lines.append(f"    outputs['{key}']: dtype {spec['dtype']}, shape {spec['shape']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    """Runs the command line; returns the exit code (0; 2 for bad input, with the reason
    on stderr and no traceback)."""
    parser = argparse.ArgumentParser(prog="python -m estimator.export", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    show_parser = sub.add_parser("show", help="print the signatures of an export")
    show_parser.add_argument("dir")
    run_parser = sub.add_parser("run", help="run a signature on inputs from a JSON file")
    run_parser.add_argument("dir")
    run_parser.add_argument("--signature", default="serving_default")
    run_parser.add_argument("--inputs", required=True, help="JSON file ('-' for stdin)")
    convert_parser = sub.add_parser(
        "to_tf_saved_model", help="write the export as a TF SavedModel (TF Serving)"
    )
    convert_parser.add_argument("dir")
    convert_parser.add_argument("output_dir", help="the SavedModel directory to create")
    convert_parser.add_argument(
        "--as_text", action="store_true", help="write saved_model.pbtxt instead of .pb"
    )
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except (ValueError, OSError, ImportError) as err:  # bad export or input, no TF: no traceback
        print(f"error: {err}", file=sys.stderr)
        return 2


def _run(args) -> int:
    if args.command == "show":
        print(show(args.dir))
        return 0
    if args.command == "to_tf_saved_model":
        from estimator.export.tf_saved_model import to_tf_saved_model

        print(to_tf_saved_model(args.dir, args.output_dir, as_text=args.as_text).decode())
        return 0
    model = load(args.dir)
    if args.signature not in model.signatures:
        print(
            f"No signature {args.signature!r}; the export has {sorted(model.signatures)}.",
            file=sys.stderr,
        )
        return 2
    with sys.stdin if args.inputs == "-" else open(args.inputs) as f:
        columns = _columns(_read_json(f, "standard input" if args.inputs == "-" else args.inputs))
    outputs = model.signatures[args.signature](**columns)
    print(json.dumps({k: _jsonable(v) for k, v in sorted(outputs.items())}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
