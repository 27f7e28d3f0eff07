"""A loopback TCP proxy that counts the Kafka requests going through it (by API key), to
check how many requests a describe or an alter costs against any broker (PLAINTEXT or
SASL_PLAINTEXT listeners: it reads the clear-text frame headers)."""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
from collections import Counter
from collections.abc import Iterator

API_NAMES = {18: "ApiVersions", 17: "SaslHandshake", 36: "SaslAuthenticate", 3: "Metadata",
             60: "DescribeCluster", 48: "DescribeClientQuotas", 49: "AlterClientQuotas"}


class CountingProxy:
    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.rpartition(":")
        self.upstream = (host, int(port))
        self.requests: Counter[str] = Counter()
        self.connections = 0
        self.bootstrap = ""

    def reset(self) -> None:
        self.requests.clear()
        self.connections = 0

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)

        async def requests() -> None:
            try:
                while True:
                    size = await reader.readexactly(4)
                    payload = await reader.readexactly(struct.unpack(">i", size)[0])
                    key = struct.unpack_from(">h", payload)[0]
                    self.requests[API_NAMES.get(key, str(key))] += 1
                    up_writer.write(size + payload)
                    await up_writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                up_writer.close()

        async def responses() -> None:
            try:
                while data := await up_reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            except ConnectionError:
                pass
            finally:
                writer.close()

        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(requests(), responses())

    @contextlib.contextmanager
    def running(self) -> Iterator[CountingProxy]:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()

        async def start() -> asyncio.base_events.Server:
            server = await asyncio.start_server(self._client, "127.0.0.1", 0)
            self.bootstrap = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
            return server

        server = asyncio.run_coroutine_threadsafe(start(), loop).result(5)
        try:
            yield self
        finally:
            async def stop() -> None:
                server.close()
                tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

            asyncio.run_coroutine_threadsafe(stop(), loop).result(5)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(5)
            loop.close()
