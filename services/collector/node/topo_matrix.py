"""Parse a `nvidia-smi topo -m` print, pasted as is, into a NodeTopology.

Users have these prints at hand, so the parser takes them the way they are
published: comment or command lines before the matrix, tabs or spaces, NIC
columns and rows, the CPU/NUMA affinity columns, and the Legend block after
it. Only the GPU block becomes devices and links; NIC rows are skipped (they
are often truncated in published prints).

Pure: no I/O. Bad input raises TopoMatrixError naming the line and the token.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence

import msgspec

from schemas.topology import Device, Link, NodeTopology, PcieLevel, Vendor

# The most NVLinks one GPU has (H100/B200: 18). A GPU that shows more links in
# total to its peers than that reaches them through NVSwitches, not directly.
MAX_DIRECT_NVLINKS_PER_GPU = 18

_PCIE_CODES: dict[str, PcieLevel] = {
    "PIX": PcieLevel.PIX,
    "PXB": PcieLevel.PXB,
    "PHB": PcieLevel.PHB,
    "NODE": PcieLevel.NODE,
    "SYS": PcieLevel.SYS,
    "SOC": PcieLevel.SYS,  # the name older drivers print for SYS
}
_NVLINK_CODE = re.compile(r"^NV(\d+)$")
_GPU_NAME = re.compile(r"^GPU(\d+)$")
# Values that belong in the affinity columns: "0-19,40-59", "0", "N/A".
_AFFINITY_VALUE = re.compile(r"^(N/A|[0-9][0-9,\-]*)$")

# Header phrases after the device columns, in the words nvidia-smi prints.
_AFFINITY_PHRASES: tuple[tuple[str, ...], ...] = (
    ("CPU", "Affinity"),
    ("NUMA", "Affinity"),
    ("GPU", "NUMA", "ID"),
)
CPU_AFFINITY = "CPU Affinity"
NUMA_AFFINITY = "NUMA Affinity"

# Stable namespace so that a fixture node's device UUIDs are the same on every run.
_UUID_NAMESPACE = uuid.UUID("7d3c2a8e-5b1f-4c52-9a0e-2f6f0b9c1d44")


class TopoMatrixError(ValueError):
    """A print that cannot be read: names the line (1-based) and the offending token."""

    def __init__(self, line: int | None, token: str, reason: str) -> None:
        self.line = line
        self.token = token
        self.reason = reason
        where = f"line {line}: " if line is not None else ""
        what = f" (token {token!r})" if token else ""
        super().__init__(f"{where}{reason}{what}")


class _Header(msgspec.Struct, frozen=True, kw_only=True):
    line: int
    columns: tuple[str, ...]  # device columns (GPUs and NICs), in print order
    affinity: tuple[str, ...]  # affinity columns, e.g. ("CPU Affinity", "NUMA Affinity")


class _GpuRow(msgspec.Struct, frozen=True, kw_only=True):
    line: int
    index: int
    codes: dict[int, str]  # peer GPU index -> link code as printed
    affinity: dict[str, str]  # affinity column -> value


def synthetic_uuid(prefix: str, node: str, machine_type: str, index: int) -> str:
    """A UUID for a device that has none (fixtures): stable per node, type and index."""
    return f"{prefix}-{uuid.uuid5(_UUID_NAMESPACE, f'{node}/{machine_type}/{index}')}"


def parse_topo_matrix(
    text: str,
    *,
    node: str,
    machine_type: str,
    model: str = "",
    memory_mib: int = 0,
    source: str = "",
) -> NodeTopology:
    """Read the GPU block of a `nvidia-smi topo -m` print.

    The print does not name the GPU model nor its memory: the caller supplies
    them (see topology_files for the per-machine-type table).
    """
    lines = text.splitlines()
    header = _find_header(lines)
    gpu_columns = {_gpu_index(c): c for c in header.columns if _GPU_NAME.match(c)}
    if not gpu_columns:
        raise TopoMatrixError(
            header.line, header.columns[0] if header.columns else "", "the header names no GPU column"
        )
    rows = _read_gpu_rows(lines, header, gpu_columns)
    _check_square(header, gpu_columns, rows)
    numa = _numa_nodes(rows)
    links = tuple(
        _link(row, peer, code) for row in rows for peer, code in sorted(row.codes.items()) if peer != row.index
    )
    switched = _nvswitch_links(rows)
    devices = tuple(
        Device(
            index=row.index,
            uuid=synthetic_uuid("GPU", node, machine_type, row.index),
            vendor=Vendor.NVIDIA,
            model=model or "unknown",
            memory_mib=memory_mib,
            numa_node=numa[row.index],
            nvswitch_links=switched,
        )
        for row in sorted(rows, key=lambda r: r.index)
    )
    return NodeTopology(node=node, machine_type=machine_type, devices=devices, links=links, source=source)


def source_line(text: str) -> str:
    """The first comment line of a print (where published prints name their source), without '#'."""
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped.startswith("#"):
            return stripped.lstrip("#").strip()
        if stripped:
            return ""
    return ""


# --- header --------------------------------------------------------------------------------


def _find_header(lines: Sequence[str]) -> _Header:
    if not any(line.strip() for line in lines):
        raise TopoMatrixError(None, "", "the print is empty")
    for number, raw in enumerate(lines, start=1):
        tokens = raw.split()
        # The header starts with GPU0; GPU0's own row starts with "GPU0 X".
        if tokens and tokens[0] == "GPU0" and (len(tokens) == 1 or tokens[1] != "X"):
            return _parse_header(number, tokens)
    raise TopoMatrixError(None, "", "no header line starting with GPU0 found: is this a `nvidia-smi topo -m` print?")


def _parse_header(number: int, tokens: list[str]) -> _Header:
    columns: list[str] = []
    affinity: list[str] = []
    position = 0
    while position < len(tokens):
        phrase = _affinity_phrase_at(tokens, position)
        if phrase:
            affinity.append(" ".join(phrase))
            position += len(phrase)
            continue
        if affinity:  # device columns come before the affinity columns
            raise TopoMatrixError(number, tokens[position], "unknown header column after the affinity columns")
        if tokens[position] in columns:
            raise TopoMatrixError(number, tokens[position], "device column named twice in the header")
        columns.append(tokens[position])
        position += 1
    return _Header(line=number, columns=tuple(columns), affinity=tuple(affinity))


def _affinity_phrase_at(tokens: Sequence[str], position: int) -> tuple[str, ...]:
    for phrase in _AFFINITY_PHRASES:
        if tuple(tokens[position : position + len(phrase)]) == phrase:
            return phrase
    return ()


def _gpu_index(name: str) -> int:
    match = _GPU_NAME.match(name)
    assert match is not None
    return int(match.group(1))


# --- rows ----------------------------------------------------------------------------------


def _read_gpu_rows(lines: Sequence[str], header: _Header, gpu_columns: dict[int, str]) -> list[_GpuRow]:
    rows: list[_GpuRow] = []
    for number in range(header.line + 1, len(lines) + 1):
        tokens = lines[number - 1].split()
        if not tokens:
            continue
        if tokens[0].startswith("Legend"):
            break  # the Legend block (and the NIC Legend after it) ends the matrix
        if _GPU_NAME.match(tokens[0]):
            rows.append(_parse_gpu_row(number, tokens, header))
        elif tokens[0] not in header.columns:
            raise TopoMatrixError(number, tokens[0], "row label is not a column of the header")
        # NIC rows: nothing in them that the topology needs.
    return rows


def _parse_gpu_row(number: int, tokens: list[str], header: _Header) -> _GpuRow:
    label, values = tokens[0], tokens[1:]
    index = _gpu_index(label)
    width = len(header.columns)
    entries = 0  # how many leading values are link codes
    while entries < min(width, len(values)) and _is_link_code(values[entries]):
        entries += 1
    if entries < width:
        token = values[entries] if entries < len(values) else ""
        if entries == len(values) or _AFFINITY_VALUE.match(token):
            raise TopoMatrixError(
                number, token, f"ragged row {label}: {entries} link entries, the header has {width} device columns"
            )
        raise TopoMatrixError(number, token, f"unknown link code in row {label}, column {header.columns[entries]}")
    codes: dict[int, str] = {}
    for column, code in zip(header.columns, values[:width], strict=True):
        if _GPU_NAME.match(column):
            peer = _gpu_index(column)
            if (peer == index) != (code == "X"):
                reason = "the diagonal must be X" if peer == index else "X off the diagonal"
                raise TopoMatrixError(number, code, f"{reason} in row {label}, column {column}")
            codes[peer] = code
    rest = values[width:]
    if len(rest) > len(header.affinity):
        raise TopoMatrixError(
            number,
            rest[len(header.affinity)],
            f"ragged row {label}: {len(values)} entries, the header has {width} device "
            f"and {len(header.affinity)} affinity columns",
        )
    return _GpuRow(line=number, index=index, codes=codes, affinity=dict(zip(header.affinity, rest, strict=False)))


def _is_link_code(token: str) -> bool:
    return token == "X" or token in _PCIE_CODES or _NVLINK_CODE.match(token) is not None


def _check_square(header: _Header, gpu_columns: dict[int, str], rows: Sequence[_GpuRow]) -> None:
    seen: dict[int, int] = {}
    for row in rows:
        if row.index in seen:
            raise TopoMatrixError(
                row.line, f"GPU{row.index}", f"row GPU{row.index} appears twice (first on line {seen[row.index]})"
            )
        if row.index not in gpu_columns:
            raise TopoMatrixError(
                row.line, f"GPU{row.index}", f"non-square GPU block: row GPU{row.index} has no column in the header"
            )
        seen[row.index] = row.line
    missing = sorted(set(gpu_columns) - set(seen))
    if missing:
        raise TopoMatrixError(
            header.line,
            gpu_columns[missing[0]],
            f"non-square GPU block: the header has {len(gpu_columns)} GPU columns but "
            f"{len(rows)} GPU rows; no row for {', '.join(gpu_columns[i] for i in missing)}",
        )


# --- meaning -------------------------------------------------------------------------------


def _link(row: _GpuRow, peer: int, code: str) -> Link:
    nvlink = _NVLINK_CODE.match(code)
    if nvlink:
        return Link(src=row.index, dst=peer, nvlinks=int(nvlink.group(1)))
    return Link(src=row.index, dst=peer, pcie=_PCIE_CODES[code])


def _nvswitch_links(rows: Sequence[_GpuRow]) -> int:
    """NVLinks per GPU into an NVSwitch fabric, or 0 when the GPUs link directly.

    Through NVSwitches every pair prints the GPU's full link count (NV18 on
    H100, NV12 on A100); directly wired GPUs split their links among peers
    (DGX-1: NV1/NV2). So: every pair shows the same NV# and a GPU would need
    more links than any GPU has to reach all its peers directly.
    """
    counts = {
        int(m.group(1)) if (m := _NVLINK_CODE.match(code)) else 0
        for row in rows
        for peer, code in row.codes.items()
        if peer != row.index
    }
    if len(rows) < 3 or len(counts) != 1:
        return 0
    (count,) = counts
    return count if count * (len(rows) - 1) > MAX_DIRECT_NVLINKS_PER_GPU else 0


def _numa_nodes(rows: Sequence[_GpuRow]) -> dict[int, int | None]:
    """NUMA node per GPU: the NUMA Affinity column, else the order of the CPU affinity groups."""
    by_cpu = _cpu_group_order(rows)
    result: dict[int, int | None] = {}
    for row in rows:
        printed = row.affinity.get(NUMA_AFFINITY, "")
        if printed.isdigit():
            result[row.index] = int(printed)
        else:
            result[row.index] = by_cpu.get(row.affinity.get(CPU_AFFINITY, ""))
    return result


def _cpu_group_order(rows: Sequence[_GpuRow]) -> dict[str, int]:
    """Each distinct CPU affinity set, numbered by its lowest CPU (socket 0 holds CPU 0)."""
    groups = {row.affinity.get(CPU_AFFINITY, "") for row in rows}
    known = [g for g in groups if g and g != "N/A" and g[0].isdigit()]
    ordered = sorted(known, key=lambda g: int(re.split(r"[,\-]", g)[0]))
    return {group: number for number, group in enumerate(ordered)}
