"""The runners-up of a decision are the first nodes of its full explanation that fit."""

from __future__ import annotations

import random

import pytest
from engine_builders import pod
from random_clusters import random_cluster, random_pod

from engine import Engine, Mode, RequestError


@pytest.fixture
def placer() -> Engine:
    return Engine()  # a cold engine for each test


@pytest.mark.parametrize("mode", [Mode.DEFAULT, Mode.HAMI])
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("count", [1, 3])
def test_runners_up_are_the_best_fitting_nodes_of_the_explanation(
    seed: int, mode: Mode, count: int, placer: Engine
) -> None:
    rng = random.Random(seed)
    snap = random_cluster(rng, 30)
    index = placer.index_of(snap)
    compared = 0
    for j in range(12):
        request = random_pod(rng, f"pod-{j}")
        try:
            explained = placer.place_in(index, request, mode, explain=True)
        except RequestError:
            continue
        quick = placer.place_in(index, request, mode, runners_up=count)
        warm = placer.place_in(index, request, mode, runners_up=count)  # answered from the tables
        fitting = tuple(v for v in explained.alternatives if v.fits)[:count]
        assert quick.node == explained.node
        assert quick.alternatives == fitting
        assert warm.alternatives == fitting
        compared += len(fitting)
    assert compared >= 4, "the sample should have some nodes that fit and lost"


def test_without_runners_up_a_decision_lists_no_alternatives(placer: Engine) -> None:
    rng = random.Random(1)
    snap = random_cluster(rng, 12)
    placed = [placer.place(snap, random_pod(rng, f"p{j}")) for j in range(6)]
    assert any(d.node for d in placed)
    assert all(d.alternatives == () for d in placed)


def test_each_runner_up_says_why_it_lost_to_the_winner(placer: Engine) -> None:
    rng = random.Random(2)
    snap = random_cluster(rng, 20, machines=("dgx-h100",))
    index = placer.index_of(snap)
    decision = placer.place_in(index, pod(2), runners_up=3)
    assert decision.node is not None
    assert len(decision.alternatives) == 3
    assert len(decision.alternatives) == 3
    for verdict in decision.alternatives:
        assert verdict.fits and verdict.node != decision.node
        assert decision.node in verdict.reason
    scores = [v.score for v in decision.alternatives]
    assert scores == sorted(scores, reverse=True)
