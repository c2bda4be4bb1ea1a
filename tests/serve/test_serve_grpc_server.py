"""The gRPC side of ``python -m estimator.serve`` as sockets: ``start_server`` puts several
``grpc.aio`` servers on one port (each takes new calls on its own; ``SO_REUSEPORT``), all
answering from the same servicer, refuses a port that another socket or server holds, and
frees the port when stopped. (``benchmarks/serving_load.py`` measures what the extra
servers do to throughput; ``tests/serve/test_serve_grpc.py`` checks the API itself.)"""

from __future__ import annotations

import asyncio
import socket

import grpc
import pytest

from estimator.serve._core import ServingCore
from estimator.serve._grpc import Servicer
from estimator.serve._grpc_server import start_server
from estimator.serve._protos import MODEL_SERVICE, messages

HOST = "127.0.0.1"
MESSAGE = "Could not find any versions of model absent"  # get_model_status_impl.cc's


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def _servicer() -> Servicer:
    async def run(signature, columns):  # no model is ever called here
        raise AssertionError("no model")

    return Servicer(ServingCore({}, run))


async def _statuses(port: int, connections: int) -> list[tuple[grpc.StatusCode, str]]:
    """GetModelStatus of an absent model over ``connections`` separate TCP connections."""
    request = messages.GetModelStatusRequest()
    request.model_spec.name = "absent"

    async def one(i: int):
        # A local subchannel pool: each channel its own connection (else channels to one
        # target share one).
        options = [("grpc.use_local_subchannel_pool", 1), ("grpc.primary_user_agent", str(i))]
        async with grpc.aio.insecure_channel(f"{HOST}:{port}", options=options) as channel:
            call = channel.unary_unary(
                f"/{MODEL_SERVICE}/GetModelStatus",
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=messages.GetModelStatusResponse.FromString,
            )
            try:
                await call(request, timeout=30)
            except grpc.aio.AioRpcError as err:
                return err.code(), err.details()
            return grpc.StatusCode.OK, ""

    return await asyncio.gather(*(one(i) for i in range(connections)))


@pytest.mark.parametrize("acceptors", [1, 4])
def test_every_server_on_the_port_answers_and_stop_frees_the_port(acceptors):
    port = _free_port()

    async def main():
        servers = await start_server(_servicer(), HOST, port, 1 << 20, acceptors=acceptors)
        try:
            assert len(servers) == acceptors and servers.port == port
            answers = await _statuses(port, 4 * acceptors)
        finally:
            await servers.stop(None)
        return answers

    answers = asyncio.run(main())
    assert answers == [(grpc.StatusCode.NOT_FOUND, MESSAGE)] * (4 * acceptors)
    # Nothing listens on the port: a bind without SO_REUSEPORT succeeds. With SO_REUSEADDR,
    # as the next server's (gRPC's and _check_free's): connections the servers closed first
    # stay in TIME_WAIT on this port for a minute, and a bind without it would fail on
    # them (it did in 38 of 60 runs beside two busy loops); a listener would fail it still.
    with socket.socket() as again:
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind((HOST, port))


def test_port_zero_gives_every_server_the_same_free_port():
    async def main():
        servers = await start_server(_servicer(), HOST, 0, 1 << 20, acceptors=3)
        try:
            assert servers.port > 0
            return await _statuses(servers.port, 6)
        finally:
            await servers.stop(None)

    assert asyncio.run(main()) == [(grpc.StatusCode.NOT_FOUND, MESSAGE)] * 6


def test_a_port_another_socket_holds_is_refused():
    with socket.socket() as holder:
        holder.bind((HOST, 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(RuntimeError) as raised:
            asyncio.run(start_server(_servicer(), HOST, port, 1 << 20))
    assert str(raised.value) == (
        f"Could not bind the gRPC port {HOST}:{port}: Address already in use. Pass another "
        "--port, or stop the process that holds this one."
    )


def test_a_second_server_on_a_port_in_use_is_refused_not_shared():
    """Our servers bind with SO_REUSEPORT, which would let a second ``estimator.serve`` on
    the same port take half the connections; the plain bind first refuses it."""
    port = _free_port()

    async def main():
        first = await start_server(_servicer(), HOST, port, 1 << 20, acceptors=2)
        try:
            with pytest.raises(RuntimeError, match="Address already in use"):
                await start_server(_servicer(), HOST, port, 1 << 20, acceptors=2)
            return await _statuses(port, 4)  # the first still answers every connection
        finally:
            await first.stop(None)

    assert asyncio.run(main()) == [(grpc.StatusCode.NOT_FOUND, MESSAGE)] * 4
