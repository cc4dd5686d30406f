"""The placer keeps Python's garbage collector out of its decisions: the command tunes the collector at
start and freezes the long-lived view once it is built (the placer's caught-up point)."""

from __future__ import annotations

import argparse
import asyncio
import gc
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from placer_kafka import TIMEOUT_S, placer_settings

from engine import Mode
from services.placer import service
from topoplace import gc_tuning
from topoplace.cli import build_parser
from topoplace.commands import placer as placer_command


def test_the_placer_settings_hold_within_the_block_and_the_defaults_come_back() -> None:
    before = gc.get_threshold()
    with gc_tuning.collector_as_the_placer_runs_it():
        assert gc.get_threshold() == (gc_tuning.GEN0_THRESHOLD, gc_tuning.GEN1_THRESHOLD, gc_tuning.GEN2_THRESHOLD)
        view = [{"node": i} for i in range(1_000)]  # a long-lived structure, built
        gc_tuning.freeze_long_lived()
        assert gc.get_freeze_count() >= len(view)  # in the permanent generation: no collection walks it
        assert gc.get_count()[2] == 0
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


def test_the_command_tunes_the_collector_and_freezes_the_view_when_caught_up(monkeypatch: pytest.MonkeyPatch) -> None:
    tuned: list[bool] = []
    hooks: list[Callable[[], None] | None] = []

    async def fake_run_placer(settings: object, *, mode: Mode, stop: asyncio.Event, on_caught_up: Callable[[], None]):
        hooks.append(on_caught_up)

    def run_now(make: Callable[[asyncio.Event], Coroutine[Any, Any, None]]) -> None:
        asyncio.run(make(asyncio.Event()))

    monkeypatch.setattr(service, "run_placer", fake_run_placer)
    monkeypatch.setattr(placer_command, "run_until_signalled", run_now)
    monkeypatch.setattr(gc_tuning, "tune_collector", lambda: tuned.append(True))
    args: argparse.Namespace = build_parser().parse_args(["placer"])
    assert args.func(args) == 0
    assert tuned == [True]
    assert hooks == [gc_tuning.freeze_long_lived]


async def test_the_service_calls_its_caught_up_hook_before_deciding(kafka_bootstrap: str) -> None:
    caught_up = asyncio.Event()
    stop = asyncio.Event()
    task = asyncio.create_task(
        service.run_placer(placer_settings(kafka_bootstrap), stop=stop, on_caught_up=caught_up.set)
    )
    try:
        await asyncio.wait_for(caught_up.wait(), TIMEOUT_S)
    finally:
        stop.set()
        await asyncio.wait_for(task, TIMEOUT_S)
