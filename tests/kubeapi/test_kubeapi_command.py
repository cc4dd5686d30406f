"""`topoplace kube-api serve`: the URL on the first stdout line, a clean exit on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import signal
import sys

import aiohttp


async def test_serve_prints_its_url_then_serves_until_sigterm() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "topoplace.cli",
        "kube-api",
        "serve",
        "--port",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        url = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode().strip()
        assert url.startswith("http://127.0.0.1:")
        async with aiohttp.ClientSession() as http, http.get(f"{url}/api/v1/nodes") as resp:
            assert resp.status == 200
            assert json.loads(await resp.read())["kind"] == "NodeList"
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 10) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
