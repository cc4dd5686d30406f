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


async def test_serve_with_a_fault_plan_fails_the_planned_requests() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "topoplace.cli",
        "kube-api",
        "serve",
        "--fault-rate",
        "1",
        "--fault-kinds",
        "503",
        "--fault-verbs",
        "list",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        url = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode().strip()
        serving = (await asyncio.wait_for(proc.stderr.readline(), 5)).decode()
        assert "resource.k8s.io/v1 resourceslices" in serving
        assert "injecting faults into 100.0% of requests (list): 503" in (await proc.stderr.readline()).decode()
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{url}/api/v1/nodes") as resp:
                assert resp.status == 503
            async with http.get(f"{url}/debug/faults") as resp:
                assert json.loads(await resp.read())["injected"]["503"] == 1
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 10) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def test_the_command_lists_the_same_fault_kinds_and_verbs_as_the_server() -> None:
    from topoplace.dev.commands import kube_api
    from topoplace.dev.kubeapi import faults

    assert kube_api.FAULT_KINDS == faults.KINDS
    assert kube_api.FAULT_VERBS == faults.VERBS
