"""``python -m estimator.serve``: TF Serving's REST API for an export directory."""

import argparse
import signal
import sys

import uvicorn

from estimator.serve._app import build_app
from estimator.serve._models import ModelWatcher


def main(argv=None) -> None:
    """Parses TF Serving-style flags and serves until SIGINT/SIGTERM.

    SIGTERM is handled by uvicorn: it stops accepting connections, lets in-flight requests
    finish (up to ``--graceful_shutdown_seconds``) and exits with status 0.
    """
    parser = argparse.ArgumentParser(prog="python -m estimator.serve", description=__doc__)
    parser.add_argument("--model_name", default="default")
    parser.add_argument("--model_base_path", required=True)
    parser.add_argument("--rest_api_port", "--port", type=int, default=8501, dest="port")
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--file_system_poll_wait_seconds", type=float, default=1.0)
    parser.add_argument("--max_request_bytes", type=int, default=64 << 20)
    parser.add_argument("--graceful_shutdown_seconds", type=float, default=30.0)
    parser.add_argument("--enable_batching", action="store_true")
    parser.add_argument("--max_batch_size", type=int, default=32)
    parser.add_argument("--batch_timeout_micros", type=int, default=1000)
    args = parser.parse_args(argv)
    watcher = ModelWatcher(
        args.model_name, args.model_base_path, args.file_system_poll_wait_seconds
    )
    if watcher.model is None:
        sys.exit(
            f"No servable version under {args.model_base_path}: expected <base>/<integer>/ "
            "directories written by Estimator.export_saved_model."
        )
    app = build_app(
        watcher,
        max_request_bytes=args.max_request_bytes,
        max_batch_size=args.max_batch_size if args.enable_batching else None,
        batch_timeout_micros=args.batch_timeout_micros,
    )
    # uvicorn shuts down gracefully, then re-raises the signal to the handler it found:
    # this one turns SIGTERM into exit status 0, as TF Serving's clean shutdown.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        uvicorn.run(
            app,
            host=args.host,
            port=args.port,
            log_level="warning",
            timeout_graceful_shutdown=args.graceful_shutdown_seconds,
        )
    finally:
        watcher.close()


if __name__ == "__main__":
    main()
