"""SIGINT/SIGTERM handling shared by the commands that run a service in the foreground."""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # imported when a service runs: building the parser of every command stays cheap
    import asyncio

T = TypeVar("T")


def run_until_signalled(main: Callable[[asyncio.Event], Awaitable[T]]) -> T:
    """Run main(stop) on a fresh loop; SIGINT and SIGTERM set `stop` so the service ends cleanly."""
    import asyncio

    async def runner() -> T:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        signals = (signal.SIGINT, signal.SIGTERM)
        for sig in signals:
            loop.add_signal_handler(sig, stop.set)
        try:
            return await main(stop)
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)

    return asyncio.run(runner())
