"""API writes of a chaos run, retried through the faults the test API server injects."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp


async def delete(session: aiohttp.ClientSession, url: str, *, tries: int = 100) -> None:
    """DELETE until gone; 404 means an earlier try was applied and its reply lost."""
    last = ""
    for _ in range(tries):
        try:
            async with session.delete(url) as response:
                if response.status in (200, 202, 404):
                    return
                last = f"HTTP {response.status}"
        except (aiohttp.ClientError, TimeoutError) as exc:
            last = f"{type(exc).__name__}: {exc}"
        await asyncio.sleep(0.05)  # an injected fault: the next try draws again
    raise RuntimeError(f"could not delete {url}: {last}")


async def create(session: aiohttp.ClientSession, url: str, body: dict[str, Any], *, tries: int = 100) -> None:
    """POST until created; 409 means an earlier try was applied and its reply lost."""
    last = ""
    for _ in range(tries):
        try:
            async with session.post(url, json=body) as response:
                if response.status in (200, 201, 409):
                    return
                last = f"HTTP {response.status}: {(await response.text())[:200]}"
                if response.status not in (429, 500, 503):
                    break
        except (aiohttp.ClientError, TimeoutError) as exc:
            last = f"{type(exc).__name__}: {exc}"
        await asyncio.sleep(0.05)  # an injected fault: the next try draws again
    raise RuntimeError(f"could not create {url}: {last}")
