"""Gang preemption's properties on random clusters of eight 8-GPU nodes under Volcano's documented tree.

Running pods hold 1 to 8 GPUs, alone or as members of victim gangs (minMember drawn); the preemptor
gang asks for 1 to 4 members of 2 to 8 GPUs, hard or soft up to a tier. Whenever it preempts: no victim
of higher or equal priority, no victim gang left running below its minMember, the gang placed whole
once its victims are gone (placed afresh over the whole cluster), and the same victims for the same
input given in another order to a fresh engine; never a domain above a hard tier; never more domains
worked out than the tree has distinct sets of nodes. Sizes stay small (eight nodes, 100 examples, about
two seconds) so the suite stays fast on two cores; the memory a preemption may take is bounded by
test_preempt_gang_bounds.py, not by luck here.
"""

from __future__ import annotations

import random

from engine_builders import ENGINE
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st
from preempt_gang_builders import NODES, GangCluster, gang, held, tree

from engine import Engine
from engine.decide.gang import GangRequest
from engine.decide.preempt import RunningPod
from schemas.events import TopologyMode

DISTINCT_NODE_SETS = 7


@st.composite
def clusters(draw: st.DrawFn) -> GangCluster:
    pods: list[RunningPod] = []
    gpus: dict[str, tuple[int, ...]] = {}
    gang_mins = {f"ns/g{i}": draw(st.integers(0, 3)) for i in range(3)}
    for node in NODES:
        free = list(range(8))
        while free and draw(st.integers(0, 4)):
            count = min(draw(st.sampled_from((1, 2, 4, 8))), len(free))
            name = f"{node}-{len(gpus)}"
            group = draw(st.sampled_from(["", "", *gang_mins]))
            prio = draw(st.integers(0, 3)) if not group else 1 + int(group[-1])
            if group and draw(st.integers(0, 5)) == 0:
                prio = 9  # a member the preemptor may not evict
            pods.append(held(name, node, free[:count], prio=prio, gang=group, min_member=gang_mins.get(group, 0),
                             start=float(draw(st.integers(0, 3)))))  # fmt: skip
            gpus[name], free = tuple(free[:count]), free[count:]
    return GangCluster(pods, gpus)


requests = st.builds(
    lambda count, size, tier, soft: gang(count, size, tier=tier, soft=soft),
    st.integers(1, 4),
    st.sampled_from((2, 4, 8)),
    st.integers(1, 3),
    st.booleans(),
)


def _fits_whole(cluster: GangCluster, request: GangRequest, without: list[RunningPod]) -> bool:
    return ENGINE.place_gang(cluster.index(without), tree(), request).placed


@settings(max_examples=100, deadline=None)
@given(clusters(), requests, st.randoms(use_true_random=False))
def test_gang_preemption_properties(cluster: GangCluster, request: GangRequest, rng: random.Random) -> None:
    assume(not _fits_whole(cluster, request, []))
    result = ENGINE.preempt_gang(cluster.index(), tree(), request, 5, cluster.pods)
    event("preempted" if result.hypernode is not None else "no preemption")
    # each set of nodes worked out at most once: s0..s3, s4, s5, s6 (the virtual top holds s6's nodes)
    assert result.hypernodes_tried <= DISTINCT_NODE_SETS
    if result.hypernode is None:
        assert result.victims == ()
        return
    by_key = {p.key: p for p in cluster.pods}
    gone = [by_key[v.pod] for v in result.victims]
    # never a victim of higher or equal priority; never above a hard tier
    assert all(p.priority < 5 for p in gone)
    network = request.network
    if network is not None and network.mode is TopologyMode.HARD and network.highest_tier is not None:
        assert result.tier is not None and result.tier <= network.highest_tier
    # never a victim gang left running below its minimum: all of it, or only members above its minimum
    for group in {p.gang for p in gone if p.gang}:
        members = [p for p in cluster.pods if p.gang == group]
        evicted = sum(1 for p in gone if p.gang == group)
        assert evicted == len(members) or len(members) - evicted >= members[0].gang_min_member
        event("a whole victim gang" if evicted == len(members) else "spare members")
    # the gang fits whole once they are gone
    assert _fits_whole(cluster, request, gone)
    assert result.decision is not None and result.decision.placed
    # same input, same victims
    shuffled = list(cluster.pods)
    rng.shuffle(shuffled)
    again = Engine().preempt_gang(cluster.index(), tree(), request, 5, shuffled)
    assert (again.hypernode, again.victims, again.whole_gangs) == (result.hypernode, result.victims, result.whole_gangs)
