"""Tiny synthetic traces and clusters for the benchmark's tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model"
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
)


@pytest.fixture
def write_csv(tmp_path: Path) -> Callable[[str, str, Sequence[str]], Path]:
    def write(name: str, header: str, rows: Sequence[str]) -> Path:
        path = tmp_path / name
        path.write_text("\n".join([header, *rows]) + "\n")
        return path

    return write
