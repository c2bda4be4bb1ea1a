"""The sockets of the gRPC API: ``grpc.aio`` servers on one port, each method's raw bytes
to the :class:`~estimator.serve._grpc.Servicer` and the core's errors to gRPC status codes."""

from __future__ import annotations

import asyncio
import logging
import socket

import grpc

from estimator.serve._core import ServingError
from estimator.serve._grpc import Servicer
from estimator.serve._protos import MODEL_SERVICE, PREDICTION_SERVICE

_LOG = logging.getLogger(__name__)
#: The most bytes of a status message, once gRPC has percent-encoded it for the
#: ``grpc-message`` trailer: gRPC's clients refuse trailers over their metadata limit
#: (``grpc.max_metadata_size``, 8 KiB by default) with RESOURCE_EXHAUSTED instead of the status.
MAX_MESSAGE_BYTES = 4096


def fit(message: str, limit: int = MAX_MESSAGE_BYTES) -> str:
    """``message`` cut to ``limit`` bytes once percent-encoded (gRPC's ``grpc-message``
    encoding: every byte outside printable ASCII, and ``%``, takes three), with a note of
    what was cut; characters UTF-8 cannot encode become ``\\udXXX`` escapes."""
    data = message.encode("utf-8", "backslashreplace")
    size = 0
    for i, byte in enumerate(data):
        size += 1 if 0x20 <= byte < 0x7F and byte != 0x25 else 3
        if size > limit - 40:  # room for the note
            text = data[:i].decode("utf-8", "ignore")  # a split character is dropped
            return f"{text} ... ({len(data) - len(text.encode())} more bytes cut)"
    return data.decode("utf-8")


def handlers(servicer: Servicer) -> list:
    """The generic handlers of both services (raw bytes in and out: parsing is the
    servicer's, so that a malformed message gets a clear status)."""

    def unary(method):
        async def handle(data: bytes, context):
            try:
                return await method(data, context)
            except ServingError as err:  # the core's refusal: the gRPC code of its name
                code, message = grpc.StatusCode[err.code.name], err.message
            except Exception as err:  # a failure inside the model: logged, INTERNAL
                _LOG.exception("%s failed", method.__name__)
                code, message = grpc.StatusCode.INTERNAL, f"{type(err).__name__}: {err}"
            await context.abort(code, fit(message))

        return grpc.unary_unary_rpc_method_handler(handle)

    prediction = {
        "Predict": servicer.predict,
        "Classify": servicer.classify,
        "Regress": servicer.regress,
        "MultiInference": servicer.multi_inference,
        "GetModelMetadata": servicer.get_model_metadata,
    }
    model = {
        "GetModelStatus": servicer.get_model_status,
        "HandleReloadConfigRequest": servicer.handle_reload_config_request,
    }
    return [
        grpc.method_handlers_generic_handler(
            PREDICTION_SERVICE, {k: unary(v) for k, v in prediction.items()}
        ),
        grpc.method_handlers_generic_handler(
            MODEL_SERVICE, {k: unary(v) for k, v in model.items()}
        ),
    ]


ACCEPTORS = 8  # gRPC servers on the one port, each taking new calls on its own


async def start_server(
    servicer: Servicer, host: str, port: int, max_message_bytes: int, acceptors: int = ACCEPTORS
) -> _Servers:
    """Starts ``acceptors`` ``grpc.aio`` servers on ``host:port`` for ``servicer``.

    Why several: a ``grpc.aio`` server takes one new call at a time (it asks gRPC's core
    for the next call only once the last one has reached the event loop, a round trip
    through gRPC's poller thread and several turns of the loop), so under load calls wait
    in gRPC's core while the loop has time for them, and a batch closes with fewer requests
    than have arrived. Servers sharing the port (``SO_REUSEPORT``: the kernel spreads new
    connections over them) take new calls side by side, on the same event loop, with the
    same servicer, so more requests are answered per second, batched or not. Not many more
    than eight: the kernel's hash gives some servers more connections than others, and each
    server takes one call per turn, so clients on a crowded server wait longer and the p99
    latency rises (``benchmarks/serving_load.py`` measures throughput and p99 latency; set
    ``ACCEPTORS`` to compare).

    The port is first checked free with a plain bind (no ``SO_REUSEPORT``), so a port that
    another process or server holds is an error here, not a port shared with it. (gRPC's
    C++ servers, TF Serving's among them, bind with ``SO_REUSEPORT`` too.)

    Args:
      servicer: the :class:`Servicer`.
      host: the address to bind (``0.0.0.0`` for all interfaces).
      port: the port (TF Serving's ``--port``, 8500 by default; 0 picks a free one).
      max_message_bytes: larger requests are refused by gRPC with RESOURCE_EXHAUSTED.
      acceptors: how many servers share the port (1: a single server).

    Returns:
      The started servers (``await servers.stop(grace)`` ends them; ``servers.port`` is the
      bound port).

    Raises:
      RuntimeError: if the port cannot be bound.
    """
    address = f"[{host}]:{{}}" if ":" in host else f"{host}:{{}}"
    if port:
        _check_free(host, port, address.format(port))
    servers = _Servers()
    try:
        for _ in range(acceptors):
            server = grpc.aio.server(
                options=[
                    ("grpc.max_receive_message_length", max_message_bytes),
                    ("grpc.max_send_message_length", -1),
                    ("grpc.so_reuseport", 1),
                ]
            )
            server.add_generic_rpc_handlers(handlers(servicer))
            try:
                bound = server.add_insecure_port(address.format(port))
            except RuntimeError as err:
                raise RuntimeError(
                    f"Could not bind the gRPC port {address.format(port)}: {err}"
                ) from None
            if not bound:
                raise RuntimeError(
                    f"Could not bind the gRPC port {address.format(port)}: is it in use?"
                )
            port = bound
            await server.start()
            servers.append(server)
    except BaseException:
        await servers.stop(None)
        raise
    servers.port = port
    return servers


class _Servers(list):
    """The ``grpc.aio`` servers that share one port."""

    port = 0

    async def stop(self, grace: float | None) -> None:
        """Stops every server (TF Serving's graceful shutdown: in-flight calls get ``grace``
        seconds)."""
        await asyncio.gather(*(server.stop(grace) for server in self))


def _check_free(host: str, port: int, address: str) -> None:
    """Raises if another socket holds ``host:port`` (a bind without ``SO_REUSEPORT``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as err:
            raise RuntimeError(
                f"Could not bind the gRPC port {address}: {err.strerror}. Pass another --port, "
                "or stop the process that holds this one."
            ) from None


__all__ = ["ACCEPTORS", "MAX_MESSAGE_BYTES", "fit", "handlers", "start_server"]
