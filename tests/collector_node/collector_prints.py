"""The shipped prints, read independently of the parser (the tests' source of expectations)."""

from __future__ import annotations

import importlib.resources

PRINTS = {
    "dgx-h100": "dgx-h100.txt",
    "dgx1-v100": "dgx1-v100.txt",
    "pcie-8gpu-2socket": "pcie-8gpu-2socket.txt",
    "pcie-4gpu": "pcie-4gpu.txt",
}


def print_text(name: str) -> str:
    return importlib.resources.files("services.collector.node.fixtures").joinpath(PRINTS[name]).read_text()


def gpu_cells(text: str) -> dict[tuple[int, int], str]:
    """(row GPU, column GPU) -> code, read the plain way: split on whitespace, GPU rows and GPU columns only."""
    lines = [line.split() for line in text.splitlines()]
    header = next(tokens for tokens in lines if tokens[:1] == ["GPU0"] and tokens[1:2] != ["X"])
    gpu_columns = [name for name in header if name.startswith("GPU") and name[3:].isdigit()]
    cells: dict[tuple[int, int], str] = {}
    for tokens in lines:
        if tokens and tokens[0].startswith("GPU") and tokens[0][3:].isdigit() and tokens is not header:
            row = int(tokens[0][3:])
            for position, column in enumerate(gpu_columns):
                cells[(row, int(column[3:]))] = tokens[1 + position]
    return cells
