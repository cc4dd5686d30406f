"""Load a node list and a pod list in the Alibaba GPU trace (v2023) CSV format.

Any CSV with the same columns loads, so other traces of that shape replay
without code changes. Bad input raises `TraceError` naming the file, the row
(1-based, header = row 1) and the column.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

import msgspec

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
POD_OPTIONAL_COLUMNS = ("gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time")


class TraceError(ValueError):
    """A trace file that cannot be read: names the file, row and column."""


class NodeRow(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str  # GPU model, e.g. "V100M32"; "" for a CPU-only node


class PodRow(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per GPU: < 1000 = a share of one GPU, 1000 = whole GPUs
    gpu_spec: tuple[str, ...] = ()  # acceptable GPU models; empty = any
    qos: str = ""
    creation_time: int | None = None
    deletion_time: int | None = None

    @property
    def gpu_milli_total(self) -> int:
        return self.num_gpu * self.gpu_milli


def _int_field(path: Path, row_no: int, column: str, text: str, *, minimum: int = 0) -> int:
    try:
        value = int(text)
    except ValueError:
        raise TraceError(f"{path.name} row {row_no} column {column!r}: {text!r} is not an integer") from None
    if value < minimum:
        raise TraceError(f"{path.name} row {row_no} column {column!r}: {value} is below {minimum}")
    return value


def _optional_int(path: Path, row_no: int, column: str, text: str | None) -> int | None:
    if text is None or text.strip() == "":
        return None
    return _int_field(path, row_no, column, text.strip())


def _row_reader(path: Path, row_no: int, row: dict[str, str]) -> Callable[[str], int]:
    """Read one integer column of this row, with errors naming the file, row and column."""

    def integer(column: str) -> int:
        return _int_field(path, row_no, column, row[column].strip())

    return integer


def _read_rows(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    if not path.is_file():
        raise TraceError(f"{path}: no such file")
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        missing = [c for c in required if c not in header]
        if missing:
            raise TraceError(f"{path.name} row 1 (header): missing column(s) {', '.join(map(repr, missing))}")
        rows: list[tuple[int, dict[str, str]]] = []
        for row_no, row in enumerate(reader, start=2):
            if None in row or any(row.get(c) is None for c in required):
                raise TraceError(f"{path.name} row {row_no}: expected {len(header)} columns")
            rows.append((row_no, row))
        return rows


def load_nodes(path: str | Path) -> list[NodeRow]:
    path = Path(path)
    nodes: list[NodeRow] = []
    for row_no, row in _read_rows(path, NODE_COLUMNS):
        integer = _row_reader(path, row_no, row)
        name = row["sn"].strip()
        if not name:
            raise TraceError(f"{path.name} row {row_no} column 'sn': empty node name")
        gpus = integer("gpu")
        model = row["model"].strip()
        if gpus > 0 and not model:
            raise TraceError(f"{path.name} row {row_no} column 'model': empty for a node with {gpus} GPUs")
        nodes.append(
            NodeRow(name=name, cpu_milli=integer("cpu_milli"), memory_mib=integer("memory_mib"), gpus=gpus, model=model)
        )
    if not nodes:
        raise TraceError(f"{path.name}: no node rows")
    return nodes


def load_pods(path: str | Path) -> list[PodRow]:
    path = Path(path)
    pods: list[PodRow] = []
    for row_no, row in _read_rows(path, POD_COLUMNS):
        integer = _row_reader(path, row_no, row)
        num_gpu = integer("num_gpu")
        gpu_milli = integer("gpu_milli")
        if gpu_milli > 1000:
            raise TraceError(f"{path.name} row {row_no} column 'gpu_milli': {gpu_milli} exceeds one GPU (1000)")
        if num_gpu > 1 and gpu_milli != 1000:
            # A multi-GPU pod takes whole GPUs; a share spread over several GPUs is not a thing the trace has.
            raise TraceError(
                f"{path.name} row {row_no} column 'gpu_milli': {gpu_milli} with num_gpu {num_gpu} "
                "(multi-GPU pods take whole GPUs)"
            )
        if (num_gpu == 0) != (gpu_milli == 0):
            raise TraceError(
                f"{path.name} row {row_no} column 'gpu_milli': {gpu_milli} with num_gpu {num_gpu} "
                "(both zero or both positive)"
            )
        spec = (row.get("gpu_spec") or "").strip()
        pods.append(
            PodRow(
                name=row["name"].strip(),
                cpu_milli=integer("cpu_milli"),
                memory_mib=integer("memory_mib"),
                num_gpu=num_gpu,
                gpu_milli=gpu_milli,
                gpu_spec=tuple(s for s in spec.split("|") if s) if spec else (),
                qos=(row.get("qos") or "").strip(),
                creation_time=_optional_int(path, row_no, "creation_time", row.get("creation_time")),
                deletion_time=_optional_int(path, row_no, "deletion_time", row.get("deletion_time")),
            )
        )
    if not pods:
        raise TraceError(f"{path.name}: no pod rows")
    return pods
