"""``python -m estimator.serve``: TF Serving's gRPC and REST APIs for export directories.

gRPC (``tensorflow.serving.PredictionService`` and ``ModelService``) listens on ``--port``
(8500), REST on ``--rest_api_port`` (off unless given, as in TF Serving; 8501 is the usual
choice). Both run in one event loop over the same loaded versions and batcher.

Once both listen it logs, as TF Serving does, ``Running gRPC ModelServer at 0.0.0.0:8500 ...``
and ``Exporting HTTP/REST API at:0.0.0.0:8501 ...``, after each model's ``Successfully loaded
servable version {name: census version: 1}``; later versions are logged as they are loaded
(or fail to) and the versions they replace as they are unloaded. Run as ``python -m
estimator.serve``, the server prints its ``estimator.serve`` log lines at INFO to stderr.

The loop is asyncio's own, not uvloop's: short model calls run on the loop's thread
(``estimator.serve._dispatch``), and with a loop that busy uvloop answered some REST
connections far later than the rest (a p99 many times the mean under
``benchmarks/serving_load.py``'s load, where asyncio's loop keeps it near the mean).
"""

import argparse
import asyncio
import logging
import signal
import sys

import uvicorn

from estimator.serve._app import build_app
from estimator.serve._config import read_model_config
from estimator.serve._core import MAX_TENSOR_BYTES, ServingCore, runner
from estimator.serve._grpc import Servicer
from estimator.serve._grpc_server import start_server
from estimator.serve._heap import FrozenHeap
from estimator.serve._models import ModelWatcher

_LOG = logging.getLogger("estimator.serve")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m estimator.serve", description=__doc__)
    parser.add_argument("--model_name", default="default")
    parser.add_argument("--model_base_path", default=None)
    parser.add_argument(
        "--model_config_file",
        default=None,
        help="a text-format tensorflow.serving.ModelServerConfig listing several models "
        "(instead of --model_name/--model_base_path)",
    )
    parser.add_argument("--port", type=int, default=8500, help="gRPC port")
    parser.add_argument("--rest_api_port", type=int, default=0, help="REST port (0: no REST API)")
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--file_system_poll_wait_seconds", type=float, default=1.0)
    parser.add_argument(
        "--max_request_bytes",
        type=int,
        default=64 << 20,
        help="larger REST bodies get 413, larger gRPC messages RESOURCE_EXHAUSTED",
    )
    parser.add_argument(
        "--max_request_tensor_bytes",
        type=int,
        default=MAX_TENSOR_BYTES,
        help="a request whose inputs take more bytes once decoded (ragged lists padded, "
        "tensors as declared) is refused before they are allocated: REST 413, gRPC "
        "RESOURCE_EXHAUSTED (default 1 GiB)",
    )
    parser.add_argument("--graceful_shutdown_seconds", type=float, default=30.0)
    parser.add_argument("--enable_batching", action="store_true")
    parser.add_argument("--max_batch_size", type=int, default=32)
    parser.add_argument("--batch_timeout_micros", type=int, default=1000)
    parser.add_argument(
        "--num_batch_threads",
        type=int,
        default=None,
        help="merged calls run at once with --enable_batching (default: the CPU count)",
    )
    parser.add_argument(
        "--tensorflow_inter_op_parallelism",
        type=int,
        default=0,
        help="signature calls run at once without batching, REST and gRPC together; the "
        "others wait in arrival order (0: the CPU count). TF Serving's flag sizes the "
        "thread pool that runs independent graph operations; here a call is one compiled "
        "program, so the flag bounds the calls",
    )
    return parser


def _watchers(args, parser) -> dict[str, ModelWatcher]:
    if args.model_config_file is not None:
        if args.model_base_path is not None:
            parser.error("give either --model_config_file or --model_base_path, not both")
        try:
            models = read_model_config(args.model_config_file)
        except (OSError, ValueError) as err:
            sys.exit(str(err))
    elif args.model_base_path is not None:
        models = [(args.model_name, args.model_base_path, {})]
    else:
        parser.error("give --model_base_path (with --model_name) or --model_config_file")
    watchers = {}
    for name, base_path, labels in models:
        watcher = ModelWatcher(name, base_path, args.file_system_poll_wait_seconds, labels)
        watchers[name] = watcher
        if watcher.model is None:
            for w in watchers.values():
                w.close()
            sys.exit(
                f"No servable version of model {name!r} under {base_path}: expected "
                "<base>/<integer>/ directories written by Estimator.export_saved_model."
            )
        missing = {k: v for k, v in labels.items() if v != watcher.version}
        if missing:
            sys.exit(
                f"Request to assign labels {missing} to versions of model {name}, which are "
                f"not currently available for inference (serving version {watcher.version})."
            )
    return watchers


async def _serve(args, watchers: dict[str, ModelWatcher]) -> None:
    run = runner(
        args.max_batch_size if args.enable_batching else None,
        args.batch_timeout_micros,
        args.num_batch_threads,
        args.tensorflow_inter_op_parallelism,
    )
    core = ServingCore(watchers, run, args.max_request_tensor_bytes)
    server = await start_server(Servicer(core), args.host, args.port, args.max_request_bytes)
    _LOG.info("Running gRPC ModelServer at %s:%d ...", args.host, server.port)
    try:
        if args.rest_api_port:
            await _rest(args, build_app(core, max_request_bytes=args.max_request_bytes))
        else:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await stop.wait()
    finally:
        await server.stop(args.graceful_shutdown_seconds)


async def _rest(args, app) -> None:
    """Serves ``app`` with uvicorn until a signal; logs its address once it listens."""
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.rest_api_port,
        log_level="warning",
        timeout_graceful_shutdown=args.graceful_shutdown_seconds,
    )
    server = uvicorn.Server(config)
    # uvicorn shuts down gracefully, then re-raises the signal to the handler it found
    # (main's: SIGTERM exits with status 0); gRPC stops in _serve's finally.
    serving = asyncio.ensure_future(server.serve())
    while not (server.started or serving.done()):
        await asyncio.sleep(0.01)
    if server.started:
        _LOG.info("Exporting HTTP/REST API at:%s:%d ...", args.host, args.rest_api_port)
    await serving


def _log_to_stderr() -> None:
    """The server's own lines (``estimator.serve``, INFO and up) to stderr, as TF Serving
    prints its log by default; other libraries' loggers are left as they are."""
    handler = logging.StreamHandler()
    handler.setFormatter(
        logging.Formatter(
            "%(asctime)s.%(msecs)03d: %(levelname).1s %(name)s] %(message)s", "%Y-%m-%d %H:%M:%S"
        )
    )
    _LOG.addHandler(handler)
    _LOG.setLevel(logging.INFO)
    _LOG.propagate = False


def main(argv=None) -> None:
    """Parses TF Serving-style flags and serves until SIGINT/SIGTERM.

    SIGTERM stops accepting connections, lets in-flight requests finish (up to
    ``--graceful_shutdown_seconds``) and exits with status 0, as TF Serving's clean shutdown.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    if args.tensorflow_inter_op_parallelism < 0:
        parser.error(
            f"--tensorflow_inter_op_parallelism must be 0 (the CPU count) or more, got "
            f"{args.tensorflow_inter_op_parallelism}."
        )
    watchers = _watchers(args, parser)
    heap = FrozenHeap(watchers, args.file_system_poll_wait_seconds)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        with asyncio.Runner() as runner_:
            runner_.run(_serve(args, watchers))
    except KeyboardInterrupt:  # Ctrl-C, once in-flight requests are done: no traceback
        _LOG.info("Stopped by SIGINT.")
    finally:
        heap.close()
        for watcher in watchers.values():
            watcher.close()


if __name__ == "__main__":
    _log_to_stderr()
    main()
