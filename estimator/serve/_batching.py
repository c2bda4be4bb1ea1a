"""Server-side batching of concurrent requests (TF Serving's ``--enable_batching``)."""

import asyncio
import os

import numpy as np


class Batcher:
    """Merges concurrent calls of one signature into one call of up to ``max_batch_size`` rows.

    A call waits ``batch_timeout_micros`` for others to join it (TF Serving's
    ``max_batch_size`` and ``batch_timeout_micros`` batching parameters); at most
    ``num_batch_threads`` merged calls run at once (TF Serving's ``num_batch_threads``), and
    a batch whose timeout has passed keeps taking requests until a thread is free or it is
    full, so under load batches grow instead of queueing as many small calls. A merged batch is
    padded to a power of two so the model compiles for a handful of batch sizes only. Inputs
    are lists of rows (REST) or arrays with a batch dimension (gRPC); calls whose inputs have
    different names or kinds, or are neither, run on their own. If a
    merged call fails (one request's bad input), each request is rerun alone, so only the
    bad one gets the error.

    Args:
      call: ``async call(signature, columns) -> {output: np.ndarray}`` (a
        :class:`~estimator.serve._dispatch.Dispatcher`: short merged calls run on the event
        loop's thread, others in worker threads).
      max_batch_size: rows per merged call.
      batch_timeout_micros: how long the first call of a batch waits for more.
      num_batch_threads: how many merged calls may run at once (default: the CPU count).
    """

    def __init__(
        self,
        call,
        max_batch_size: int = 32,
        batch_timeout_micros: int = 1000,
        num_batch_threads: int | None = None,
    ) -> None:
        self._call = call
        self.max_batch_size = max_batch_size
        self.timeout = batch_timeout_micros / 1e6
        self.num_batch_threads = num_batch_threads or os.cpu_count() or 1
        self._slots = asyncio.Semaphore(self.num_batch_threads)
        self._queues: dict = {}

    async def __call__(self, signature, columns: dict) -> dict:
        rows = _rows(columns)
        if rows is None or rows >= self.max_batch_size:
            return await self._call(signature, columns)
        arrays = all(isinstance(v, np.ndarray) for v in columns.values())
        key = (id(signature), tuple(sorted(columns)), arrays)
        future = asyncio.get_running_loop().create_future()
        pending = self._queues.get(key)
        if pending is None:
            pending = self._queues[key] = _Pending()
            asyncio.get_running_loop().create_task(self._run(key, signature))
        pending.append((columns, rows, future))
        pending.rows += rows
        if pending.rows >= self.max_batch_size:
            self._queues.pop(key, None)
            asyncio.get_running_loop().create_task(self._flush(signature, pending))
        return await future

    def _bucket(self, rows: int) -> int:
        """The smallest power of two >= ``rows``, at most ``max_batch_size`` (TF Serving's
        ``allowed_batch_sizes`` padding; padded rows repeat the first and are dropped)."""
        return min(1 << (rows - 1).bit_length(), max(rows, self.max_batch_size))

    async def _run(self, key, signature) -> None:
        await asyncio.sleep(self.timeout)
        async with self._slots:  # the batch stays open while every thread is busy
            pending = self._queues.pop(key, None)
            if pending:
                await self._merged(signature, pending)

    async def _flush(self, signature, pending: list) -> None:
        async with self._slots:
            await self._merged(signature, pending)

    async def _merged(self, signature, pending: list) -> None:
        if len(pending) == 1:
            return await self._alone(signature, pending)
        total = sum(rows for _, rows, _ in pending)
        padded = self._bucket(total)  # a few fixed batch sizes: no recompile per size
        try:
            parts = {k: [c[k] for c, _, _ in pending] for k in pending[0][0]}
            merged = {k: _merge(v, padded - total) for k, v in parts.items()}
            outputs = await self._call(signature, merged)
        except Exception:
            return await self._alone(signature, pending)  # each its own answer or error
        start = 0
        for _, rows, future in pending:
            if not future.done():  # a cancelled request (its client went away)
                future.set_result({k: v[start : start + rows] for k, v in outputs.items()})
            start += rows

    async def _alone(self, signature, pending: list) -> None:
        """Runs each request of ``pending`` on its own."""
        for columns, _, future in pending:
            if future.done():
                continue
            try:
                result = await self._call(signature, columns)
            except Exception as err:
                if not future.done():
                    future.set_exception(err)
            else:
                if not future.done():
                    future.set_result(result)


class _Pending(list):
    """The ``(columns, rows, future)`` of an open batch, and its row count."""

    rows = 0


def _merge(parts: list, padding: int):
    """Concatenates one input's rows from several requests, plus ``padding`` copies of the
    first row (dropped from the answers)."""
    if isinstance(parts[0], np.ndarray):
        merged = np.concatenate(parts)  # raises for different trailing shapes: rerun alone
        return np.concatenate([merged, np.repeat(merged[:1], padding, axis=0)])
    merged = [v for part in parts for v in part]
    return merged + [merged[0]] * padding


def _rows(columns: dict) -> int | None:
    """The batch size of list-of-rows or array inputs, or ``None`` if they can't be
    concatenated."""
    sizes = {
        len(v) if isinstance(v, list) or (isinstance(v, np.ndarray) and v.ndim) else None
        for v in columns.values()
    }
    if len(sizes) != 1 or None in sizes:
        return None
    (size,) = sizes
    return size or None
