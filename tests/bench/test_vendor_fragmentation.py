"""Section 7: binpack against the fragmentation policy on MetaX and Neuron clusters."""

from __future__ import annotations

from pathlib import Path

import msgspec

from bench import vendor_fragmentation as vf
from engine import Allocation

README = Path(__file__).resolve().parents[2] / "bench" / "README.md"


def test_each_vendor_is_replayed_under_both_policies_and_accounted() -> None:
    for vendor in vf.FIXTURES:
        for policy in vf.POLICIES:
            run = vf.replay(vendor, policy, seed=0, nodes=2)
            assert 0.0 <= run.unallocated_pct < 100.0
            assert run == vf.replay(vendor, policy, seed=0, nodes=2)  # seeded: the same run twice


def test_figures_carry_the_fragmentation_policy_with_binpack_as_baseline() -> None:
    runs = [vf.replay(v, p, seed=0, nodes=2) for v in vf.FIXTURES for p in vf.POLICIES]
    figures = {f.name: f for f in vf.figures(runs)}
    assert set(figures) == {"vendor_frag.unallocated_pct.metax", "vendor_frag.unallocated_pct.neuron"}
    for vendor, figure in (("metax", figures["vendor_frag.unallocated_pct.metax"]),
                           ("neuron", figures["vendor_frag.unallocated_pct.neuron"])):  # fmt: skip
        mine = {r.policy: r.unallocated_pct for r in runs if r.vendor == vendor}
        assert (figure.value, figure.baselines) == (mine["fragmentation"], {"binpack": mine["binpack"]})
    assert "`vendor_frag.unallocated_pct" in README.read_text()
    assert "| metax | fragmentation |" in vf.markdown(runs)


def test_a_cards_used_share_is_the_larger_of_memory_and_compute() -> None:
    node = vf.cluster("metax", nodes=1)[0]
    held = (Allocation(pod_uid="p", index=0, memory_mib=node.devices[0].memory_mib // 4, cores=50),)
    assert vf.used_milli(node) == 0
    assert vf.used_milli(msgspec.structs.replace(node, allocations=held)) == 500
