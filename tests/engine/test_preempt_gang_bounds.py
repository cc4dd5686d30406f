"""Gang preemption's work is bounded: each set of nodes is worked out once, and the virtual top is a domain
like any other (it once was copied into a tree that was its own parent, and the copy grew without end).

Volcano's documented tree: s6 (tier 3) holds every node, so the virtual top (tier 4) holds what s6 holds.
Each case runs in a child process whose address space is capped (512 MiB, 60 s of CPU): the unbounded
walk fails there at once instead of growing the test process until the kernel kills it.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import textwrap
from pathlib import Path

from preempt_gang_builders import gang, tree
from test_preempt_gang import packed, victims

from engine import Engine

MEMORY_CAP = 512 * 2**20
CPU_CAP_S = 60
HERE = Path(__file__).parent


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_CAP_S, CPU_CAP_S))


def run_capped(code: str) -> str:
    """What `code` prints, run in a child under the caps (the test fails with the child's error)."""
    prelude = f"import sys\nsys.path[:0] = [{str(HERE)!r}, {str(HERE.parent)!r}]\n"
    done = subprocess.run(  # noqa: S603 - our own interpreter on our own code
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        preexec_fn=_cap,  # noqa: PLW1509 - no threads are started before the child runs
        cwd=HERE.parent.parent,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_a_gang_with_room_nowhere_works_out_each_set_of_nodes_once() -> None:
    # Victim gang g0 holds every node with minMember 8, one member (node7) of priority 9: it may lose only
    # spare members, and has none. The estimate (every lower-priority pod gone) sees room for 4 x 8 GPUs
    # in s4 and s6; their victims say none. The virtual top holds s6's nodes: skipped, never copied.
    out = run_capped("""
        from preempt_gang_builders import GangCluster, gang, held, preempt_gang
        ALL = tuple(range(8))
        pods = [held(f"g{i}", f"node{i}", ALL, prio=9 if i == 7 else 1, gang="ns/g0", min_member=8) for i in range(8)]
        result = preempt_gang(GangCluster(pods, {p.name: ALL for p in pods}), gang(4, tier=1, soft=True), 5)
        print(result.hypernode, result.hypernodes_tried, result.reason)
    """)
    assert out == "None 2 preemption: no hypernode holds gang ns/big after evicting its lower-priority pods"


def test_the_virtual_top_as_a_domain_is_the_whole_tree() -> None:
    out = run_capped("""
        from preempt_gang_builders import tree
        from engine.decide.preempt.gang_domain import subtree
        whole = tree()
        top = subtree(whole, whole.virtual_top)
        print(top.nodes == whole.nodes, top.hypernodes == whole.hypernodes)
    """)
    assert out == "True True"


def test_a_hypernode_that_lies_under_itself_is_refused_at_once() -> None:
    out = run_capped("""
        from engine.cluster.network import NetworkTree
        from engine.cluster.network.index import VIRTUAL_TOP, Draft
        draft = Draft(tier={VIRTUAL_TOP: 2, "s0": 1}, hypernode_parent={"s0": VIRTUAL_TOP}, node_parent={"n0": "s0"},
                      nodes=["n0"])
        try:
            NetworkTree(draft, {})
        except ValueError as error:
            print(error)
    """)
    assert out == "network tree: hypernode (top) lies under itself (a parent edge cycle)"


def test_an_engine_keeps_the_running_pods_only_while_they_are_the_same_sequence() -> None:
    # s2 (node4, node5) holds the cheapest pods in the first cluster, s0 (node0, node1) in the second
    first = packed({"node0": 3, "node1": 3, "node4": 0, "node5": 0})
    second = packed({"node0": 0, "node1": 0, "node4": 3, "node5": 3})
    engine = Engine()
    request = gang(2, tier=1)
    assert engine.preempt_gang(first.index(), tree(), request, 10, first.pods).hypernode == "s2"
    again = engine.preempt_gang(first.index(), tree(), request, 10, first.pods)
    other = engine.preempt_gang(second.index(), tree(), request, 10, second.pods)
    fresh = Engine().preempt_gang(second.index(), tree(), request, 10, second.pods)
    assert again.hypernode == "s2"
    assert (other.hypernode, other.victims) == (fresh.hypernode, fresh.victims)
    assert other.hypernode == "s0"


def test_kept_estimates_are_per_priority_and_node_state() -> None:
    # only s0's pods (priority 3) and node3's (1) are below 10; s1 also holds node2's pod of 10
    cluster = packed({"node0": 3, "node1": 3, "node2": 10, "node3": 1} | {f"node{i}": 10 for i in range(4, 8)})
    engine, request = Engine(), gang(2, tier=1)
    index = cluster.index()
    answers = []
    for priority in (2, 10, 2):
        kept = engine.preempt_gang(index, tree(), request, priority, cluster.pods)
        fresh = Engine().preempt_gang(cluster.index(), tree(), request, priority, cluster.pods)
        assert (kept.hypernode, kept.victims) == (fresh.hypernode, fresh.victims)
        answers.append(kept.hypernode)
    assert answers == [None, "s0", None]
    # node2 emptied in a new index, the same running pods given: its new state is worked out afresh
    emptied = cluster.index(without=[p for p in cluster.pods if p.node == "node2"])
    kept = engine.preempt_gang(emptied, tree(), request, 2, cluster.pods)
    assert (kept.hypernode, victims(kept)) == ("s1", ["default/p3"])
