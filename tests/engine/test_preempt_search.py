"""How much work a preemption does: which nodes it tries, how many device fits, what it keeps.

The answers are those of every node tried (test_preempt_properties.py); these tests count the work:
the victim searches (`select_victims`, one per node tried) and the preemptor's fits on a node
without some pods (`Room.fit`, a device search each for a device pod).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import msgspec
import pytest
from preempt_builders import built_node, preemptor, running

from engine import Engine, NodeState, Snapshot
from engine.decide.preempt import Candidate, DisruptionBudget, Preemptor, RunningPod, search
from engine.decide.preempt.room import Fit, Room


class Counts:
    def __init__(self) -> None:
        self.searches = 0
        self.fits = 0  # made by the victim searches (not the explanation's)
        self.searching = False


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counts]:
    """The victim searches on the nodes tried and the fits, counted through the real functions."""
    found = Counts()
    select, fit = search.select_victims, Room.fit

    def counted_select(room: Room, node: NodeState, pods: Sequence[RunningPod], priority: int,
                       budgets: Sequence[DisruptionBudget]) -> Candidate | list[str]:  # fmt: skip
        found.searches += 1
        found.searching = True
        try:
            return select(room, node, pods, priority, budgets)
        finally:
            found.searching = False

    def counted_fit(room: Room, node: NodeState, gone: Sequence[RunningPod]) -> Fit | list[str]:
        if found.searching:
            found.fits += 1
        return fit(room, node, gone)

    monkeypatch.setattr(search, "select_victims", counted_select)  # every_candidate's and _tried's
    monkeypatch.setattr(Room, "fit", counted_fit)
    yield found


def gpu_cluster() -> tuple[Snapshot, list[RunningPod]]:
    """Four full nodes of two NVLink quads, their pods of 1, 2 and 4 GPUs and three priorities."""
    layouts = {
        "n1": [(0, (0, 1)), (10, (2, 3)), (0, (4, 5, 6, 7))],
        "n2": [(10, (0,)), (0, (1,)), (100, (2, 3)), (0, (4, 5)), (10, (6, 7))],
        "n3": [(100, (0, 1, 2, 3)), (10, (4, 5, 6, 7))],
        "n4": [(0, (0, 1, 2, 3)), (0, (4, 5)), (100, (6,)), (10, (7,))],
    }
    pods: list[RunningPod] = []
    nodes: list[NodeState] = []
    for name, layout in layouts.items():
        mine = [running(f"{name}-{i}", name, prio=p, start=float(i), gpus=g) for i, (p, g) in enumerate(layout)]
        gpus = {p.name: g for p, (_, g) in zip(mine, layout, strict=True)}
        nodes.append(built_node(name, mine, cpu="16", devices=True, gpus=gpus))
        pods.extend(mine)
    return Snapshot(nodes=tuple(nodes)), pods


def renamed(pod: Preemptor, name: str) -> Preemptor:
    return msgspec.structs.replace(pod, request=msgspec.structs.replace(pod.request, uid=f"uid-{name}", name=name))


def test_a_preemptor_like_an_earlier_one_tries_no_node_again(counts: Counts) -> None:
    """A second pod of the same request and priority on the same cluster: the walk and each shape's
    victims are kept, so no node is tried and no device fit is made in the search; the same for a
    priority with the same pods below it."""
    engine = Engine()
    snapshot, pods = gpu_cluster()
    first = engine.preempt(snapshot, preemptor(1000, gpus=2), pods)
    assert first.node is not None and counts.searches > 0
    counts.searches = 0
    again = engine.preempt(snapshot, renamed(preemptor(1000, gpus=2), "other"), pods)
    assert counts.searches == 0
    assert (again.node, again.victims, again.decision) == (first.node, first.victims, first.decision)
    # a priority above every pod's too: the same pods are below it, so the same victims, read back
    higher = engine.preempt(snapshot, preemptor(2000, gpus=2), pods)
    assert counts.searches == 0
    assert (higher.node, [v.pod for v in higher.victims]) == (first.node, [v.pod for v in first.victims])
    assert "priority 0 < 2000" in higher.victims[0].why  # the why is this preemptor's
    # another priority, or the same cluster given anew, is searched again (and answers as every node tried)
    for pod, nodes in ((preemptor(50, gpus=2), snapshot.nodes), (preemptor(1000, gpus=2), (*snapshot.nodes,))):
        counts.searches = 0
        result = engine.preempt(Snapshot(nodes=nodes), pod, pods)
        assert counts.searches > 0
        every = engine.preempt(Snapshot(nodes=nodes), pod, pods, every_node=True)
        assert (result.node, result.victims) == (every.node, every.victims)


def test_a_node_whose_cheapest_pods_cannot_make_room_is_not_tried(counts: Counts) -> None:
    """The preemptor needs 4 CPUs. On x1..x3 a priority-0 pod of 1..3 CPUs cannot make room alone: the
    victim there is the priority-10 pod beside it, whatever its start. On y one priority-0 pod of 8 CPUs
    makes room. A bound that pairs "one victim" with "the lowest priority" tries the x nodes first (their
    pods started later); the pods of priority 0 on x free too little, so their bound starts at 10."""
    pods = [running("y-0", "y", prio=0, start=50.0, cpu="8")]
    for i in (1, 2, 3):
        pods += [running(f"x{i}-0", f"x{i}", prio=0, start=100.0, cpu=str(i)),
                 running(f"x{i}-1", f"x{i}", prio=10, start=100.0, cpu=str(8 - i))]  # fmt: skip
    nodes = tuple(built_node(n, pods, cpu="8") for n in ("x1", "x2", "x3", "y"))
    result = Engine().preempt(Snapshot(nodes=nodes), preemptor(100, cpu="4"), pods)
    assert (result.node, [v.pod for v in result.victims]) == ("y", ["default/y-0"])
    assert counts.searches == 1


def test_the_device_holders_search_stops_at_the_first_set_breaking_nothing(counts: Counts) -> None:
    """Four pods of two GPUs each, the two least important on one quad: evicting them frees the quad
    whole and breaks no idle set. The subsets are tried keeping the more important pods first, so the
    search ends at the third subset (C alone, D alone, then C and D) instead of trying all sixteen."""
    gpus = {"a": (0, 1), "b": (2, 3), "c": (4, 5), "d": (6, 7)}
    pods = [running("a", "n", prio=5, gpus=gpus["a"]), running("b", "n", prio=4, gpus=gpus["b"]),
            running("c", "n", prio=2, gpus=gpus["c"]), running("d", "n", prio=1, gpus=gpus["d"])]  # fmt: skip
    node = built_node("n", pods, devices=True, gpus=gpus)
    result = Engine().preempt(Snapshot(nodes=(node,)), preemptor(10, gpus=4), pods, every_node=True)
    assert sorted(v.pod for v in result.victims) == ["default/c", "default/d"]
    # every pod gone (the best set score), the subsets ranked 0..3, the victims' final fit
    assert counts.searches == 1
    assert counts.fits == 1 + 4 + 1


@pytest.mark.parametrize("gpus", [1, 8, 9, 16])
def test_counts_beyond_every_node_answer_as_every_node(gpus: int) -> None:
    """The floors are worked out for every count up to the most devices a node has; a count above it
    leaves every group out, and the answer is every node's reasons."""
    engine = Engine()
    snapshot, pods = gpu_cluster()
    result = engine.preempt(snapshot, preemptor(1000, gpus=gpus), pods)
    every = Engine().preempt(snapshot, preemptor(1000, gpus=gpus), pods, every_node=True)
    assert (result.node, result.victims, result.reason) == (every.node, every.victims, every.reason)
    assert (result.node is None) == (gpus > 8)


def test_pods_given_anew_are_read_anew() -> None:
    """The running pods' parsed requests are kept with the pods by node: the same names with other
    requests, given as a new sequence, are read again (one engine, as the placer keeps it)."""
    engine = Engine()
    before = [running("a-0", "a", prio=0, start=1.0, cpu="1"), running("a-1", "a", prio=5, start=1.0, cpu="3"),
              running("b-0", "b", prio=1, start=1.0, cpu="4")]  # fmt: skip
    after = [msgspec.structs.replace(p, requests={"cpu": "3" if p.name == "a-0" else "1"}) if p.node == "a" else p
             for p in before]  # fmt: skip
    for pods in (before, after):
        nodes = tuple(built_node(n, pods, cpu="4") for n in ("a", "b"))
        result = engine.preempt(Snapshot(nodes=nodes), preemptor(10, cpu="3"), pods)
        every = Engine().preempt(Snapshot(nodes=nodes), preemptor(10, cpu="3"), pods, every_node=True)
        assert (result.node, result.victims) == (every.node, every.victims)
    assert [v.pod for v in result.victims] == ["default/a-0"]  # it holds 3 CPUs now, the cheapest that frees them
