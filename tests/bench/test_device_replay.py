from __future__ import annotations

from bench.device_replay import (
    DEVICE_POLICIES,
    MACHINE_TYPES,
    NEURON_SIZES,
    build_cluster,
    clean_sets,
    run_policy,
    workload,
)
from schemas.topology import Vendor


def test_cluster_has_every_fixture_type_under_a_three_tier_tree():
    nodes, hyper = build_cluster(2)
    assert sorted({n.fixture for n in nodes}) == sorted(MACHINE_TYPES)
    tiers = {h.tier for h in hyper}
    assert tiers == {1, 2, 3}
    members = [m.name for h in hyper if h.tier == 1 for m in h.members]
    assert sorted(members) == sorted(n.name for n in nodes)  # every node under exactly one ToR


def test_workload_is_the_stated_mix():
    nodes, _ = build_cluster(1)
    jobs = workload(nodes, 300, seed=5)
    assert all(j.devices in (1, 2, 4, 8) for j in jobs)
    assert all(j.devices in NEURON_SIZES for j in jobs if j.vendor is Vendor.NEURON)
    assert [j.arrival for j in jobs] == sorted(j.arrival for j in jobs)
    assert workload(nodes, 300, seed=5) == jobs


def test_clean_sets_on_an_empty_and_a_broken_node():
    nodes, _ = build_cluster(1)
    dgx1 = [n for n in nodes if n.fixture == "dgx1-v100"]
    assert clean_sets(dgx1, 8) == 1 and clean_sets(dgx1, 4) == 2  # the two quads of the cube-mesh
    dgx1[0].holders[0] = "someone"
    assert clean_sets(dgx1, 8) == 0 and clean_sets(dgx1, 4) == 1


def test_every_policy_replays_with_quality_at_most_optimal():
    nodes, _ = build_cluster(1)
    jobs = workload(nodes, 60, seed=2)
    for name, chooser in DEVICE_POLICIES.items():
        result = run_policy(name, chooser, jobs, per_type=1, seed=2)
        assert result.placed + result.unplaced == len(jobs)
        assert all(0 <= d.score <= d.optimum for d in result.decisions), name
        assert 0 < result.modelled_throughput <= 1.0
    topoplace = run_policy("topoplace", DEVICE_POLICIES["topoplace"], jobs, per_type=1, seed=2)
    assert all(d.quality_pct == 100.0 for d in topoplace.decisions)  # the engine's default search is exact


def test_a_node_state_is_the_same_object_until_the_node_changes():
    """As in the placer's view: the engine's index skips an unchanged node by identity."""
    nodes, _ = build_cluster(1)
    node = nodes[0]
    before = node.snapshot_state()
    assert node.snapshot_state() is before
    node.take([0, 1], "job-1")
    taken = node.snapshot_state()
    assert taken is not before
    assert [a.pod_uid for a in taken.allocations] == ["job-1", "job-1"]
    assert node.snapshot_state() is taken
    node.release([0, 1])
    assert node.snapshot_state().allocations == ()
