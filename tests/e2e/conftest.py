"""Fixtures of the end-to-end tests: one broker for the session, a fresh API server per test.

Every test runs the real services against the same broker, so the topics hold
what earlier tests left there. The tests are written for that, as a cluster
whose services restart is: the nodes keep their names from test to test, each
test gets its own consumer groups, pod names and API server, and a fresh
cluster watcher reports the earlier tests' pods as gone before the placer
starts.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from e2e_cluster import CLUSTER, seed_cluster
from e2e_pipeline import Pipeline

from topoplace import telemetry
from topoplace.dev.kubeapi import KubeApiServer

_test_numbers = itertools.count()


@pytest.fixture
async def kube_api() -> AsyncIterator[KubeApiServer]:
    """A test API server holding the e2e cluster's nodes and network tree."""
    async with KubeApiServer(bookmark_interval=0.5) as server:
        seed_cluster(server.store, CLUSTER)
        yield server


@pytest.fixture
def run_id() -> str:
    """Distinct per test: names its consumer groups and its pods."""
    return f"e2e{os.getpid()}x{next(_test_numbers)}"


@pytest.fixture
async def pipeline(
    kafka_bootstrap: str, kube_api: KubeApiServer, run_id: str, tmp_path: Path
) -> AsyncIterator[Pipeline]:
    """The services of one test (started by the test), stopped at its end whatever happened."""
    # Tracer providers live per process and per service name: drop those other
    # tests left, so this test's spans go to this test's traces file.
    telemetry.shutdown_tracing()
    async with Pipeline(
        bootstrap=kafka_bootstrap,
        kube_api=kube_api,
        run_id=run_id,
        traces_file=tmp_path / "traces.jsonl",
    ) as running:
        yield running
    telemetry.shutdown_tracing()
