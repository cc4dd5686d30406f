"""The fault schedule: every process fault each round, inside the window, seeded."""

from __future__ import annotations

from collections import Counter

from topoplace.dev.chaos.schedule import BROKER_RESTART, PROCESS_FAULTS, schedule


def test_every_process_fault_happens_once_per_round_inside_the_window() -> None:
    plan = schedule(seed=3, window_s=20.0, rounds=2)
    assert Counter(e.kind for e in plan) == dict.fromkeys(PROCESS_FAULTS, 2)
    assert all(0.0 < e.at_s < 20.0 for e in plan)
    assert [e.at_s for e in plan] == sorted(e.at_s for e in plan)


def test_broker_restarts_fall_in_separate_slots() -> None:
    restarts = [e.at_s for e in schedule(seed=5, window_s=30.0, rounds=3) if e.kind == BROKER_RESTART]
    assert [int(t // 10.0) for t in restarts] == [0, 1, 2]


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    assert schedule(seed=1, window_s=10.0) == schedule(seed=1, window_s=10.0)
    assert schedule(seed=1, window_s=10.0) != schedule(seed=2, window_s=10.0)
