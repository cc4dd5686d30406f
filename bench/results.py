"""Every figure of a run, as written to results.json, and where the files go."""

from __future__ import annotations

import datetime as dt
import os
import platform
import shutil
from pathlib import Path

import msgspec


class Figure(msgspec.Struct, frozen=True, kw_only=True):
    name: str  # documented in bench/README.md
    value: float | None  # None = not measured in this run (detail says why)
    unit: str
    baselines: dict[str, float] = {}  # the same figure for the baselines of the same run (and published anchors)
    detail: str = ""


class SectionReport(msgspec.Struct, frozen=True, kw_only=True):
    """What a section registered after the built-in ones adds to the report: its figures and notes (after
    theirs) and its part of results.md (`## title`, before the notes)."""

    title: str
    figures: tuple[Figure, ...] = ()
    notes: tuple[str, ...] = ()
    markdown: str = ""


class Machine(msgspec.Struct, frozen=True, kw_only=True):
    platform: str
    python: str
    processor: str
    cpu_count: int

    @classmethod
    def here(cls) -> Machine:
        return cls(
            platform=platform.platform(),
            python=platform.python_version(),
            processor=platform.processor() or platform.machine(),
            cpu_count=os.cpu_count() or 0,
        )

    def label(self) -> str:
        return f"{self.platform}, {self.cpu_count} CPUs, Python {self.python}"


class Results(msgspec.Struct, frozen=True, kw_only=True):
    generated_at: str
    profile: str
    command: str
    machine: Machine
    inputs: dict[str, str]
    figures: tuple[Figure, ...]
    notes: tuple[str, ...] = ()


def output_dirs(root: Path, now: dt.datetime) -> tuple[Path, Path]:
    return root / now.strftime("%Y-%m-%d"), root / "latest"


def write_results(results: Results, markdown: str, plots: dict[str, Path], run_dir: Path, latest_dir: Path) -> None:
    """Write results.json, results.md and the plots into the run folder, then mirror it to latest/."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "results.json").write_bytes(msgspec.json.format(msgspec.json.encode(results), indent=2) + b"\n")
    (run_dir / "results.md").write_text(markdown, encoding="utf-8")
    for name, path in plots.items():
        if path.parent != run_dir:
            shutil.copy(path, run_dir / name)
    if latest_dir.exists():
        shutil.rmtree(latest_dir)
    shutil.copytree(run_dir, latest_dir)


def load_results(path: Path) -> Results:
    return msgspec.json.decode(path.read_bytes(), type=Results)
