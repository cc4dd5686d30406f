"""The demo's cluster, workload and deploy files: derived from the fixtures, stated, in sync."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import msgspec
import pytest

from schemas.topology import Vendor
from services.collector.node.fleet import FleetError, load_fleet
from services.collector.node.topology_files import load_topology
from topoplace.dev.demo import cluster, workload

ROOT = Path(__file__).resolve().parents[2]


def test_default_cluster_is_mixed_and_two_level() -> None:
    c = cluster.default_cluster()
    assert len(c.nodes) >= 16
    assert len({n.fixture for n in c.nodes}) >= 5
    tors = {n.tor for n in c.nodes}
    assert tors == {tor for members in c.spines.values() for tor in members}
    assert len(c.spines) >= 2


def test_node_capacity_counts_the_fixtures_devices() -> None:
    for node in cluster.default_cluster().nodes:
        manifest = cluster.node_manifest(node)
        topology = load_topology(node.fixture, node=node.name)
        for vendor, resource in cluster.DEVICE_RESOURCE.items():
            count = sum(1 for d in topology.devices if d.vendor == vendor)
            advertised = count * cluster.SHARES_PER_DEVICE.get(vendor, 1)
            if cluster.ENFORCEMENT_POOLS.get(node.fixture) == "dra" and vendor is Vendor.NVIDIA:
                advertised = 0  # a DRA driver's GPUs are in ResourceSlices, not an extended resource
            assert manifest["status"]["capacity"].get(resource, "0") == str(advertised)


def test_the_dra_pool_publishes_one_slice_per_node_naming_every_gpu() -> None:
    c = cluster.default_cluster()
    slices = cluster.slice_manifests(c)
    pool = [n for n in c.nodes if cluster.ENFORCEMENT_POOLS.get(n.fixture) == "dra"]
    assert pool and [s["spec"]["nodeName"] for s in slices] == [n.name for n in pool]
    for node, published in zip(pool, slices, strict=True):
        uuids = {d["attributes"]["uuid"]["string"] for d in published["spec"]["devices"]}
        assert uuids == {d.uuid for d in load_topology(node.fixture, node=node.name).devices}


def test_hypernodes_cover_every_node_once() -> None:
    c = cluster.default_cluster()
    manifests = cluster.hypernode_manifests(c)
    tier1_members = [
        m["selector"]["exactMatch"]["name"] for h in manifests if h["spec"]["tier"] == 1 for m in h["spec"]["members"]
    ]
    assert sorted(tier1_members) == sorted(n.name for n in c.nodes)
    assert {h["spec"]["tier"] for h in manifests} == {1, 2}


@pytest.mark.parametrize("count", [200, 37])
def test_workload_follows_the_stated_mix(count: int) -> None:
    pods = workload.generate(count, seed=1)
    assert len(pods) == count
    assert len({p.name for p in pods}) == count
    kinds = Counter(p.kind for p in pods)
    for kind in workload.MIX:
        assert abs(kinds[kind.name] - kind.share * count) < 1.0, kind.name


def test_workload_has_every_device_size_and_pods_that_never_fit() -> None:
    pods = workload.generate(200, seed=7)
    sizes = {p.requests.get("nvidia.com/gpu") for p in pods}
    assert {"1", "2", "4", "8"} <= sizes
    assert any("nvidia.com/gpumem" in p.requests for p in pods)
    assert any(not p.expected_to_fit for p in pods)
    vendors = {r.split("/")[0] for p in pods for r in p.requests}
    assert {"nvidia.com", "metax-tech.com", "aws.amazon.com"} <= vendors


def test_workload_order_depends_on_the_seed_only() -> None:
    assert workload.generate(50, seed=3) == workload.generate(50, seed=3)
    assert workload.generate(50, seed=3) != workload.generate(50, seed=4)


def test_pod_manifest_names_our_scheduler_and_requests() -> None:
    pod = workload.generate(5, seed=1)[0]
    manifest = workload.pod_manifest(pod, scheduler_name="topoplace")
    assert manifest["spec"]["schedulerName"] == "topoplace"
    assert manifest["spec"]["containers"][0]["resources"]["requests"] == pod.requests


def test_compose_fleet_file_is_the_demo_cluster() -> None:
    checked_in = load_fleet(ROOT / "deploy" / "compose" / "fleet.json")
    assert checked_in == cluster.fleet_of(cluster.default_cluster())


def test_fleet_file_errors_name_the_member(tmp_path: Path) -> None:
    bad = tmp_path / "fleet.json"
    bad.write_text('{"members": [{"node": "a", "source": "dgx-h100"}, {"node": "a", "source": "pcie-4gpu"}]}')
    with pytest.raises(FleetError, match=r"members\[1\]\.node"):
        load_fleet(bad)
    bad.write_text('{"members": [{"node": 3, "source": "dgx-h100"}]}')
    with pytest.raises(FleetError, match=r"node"):
        load_fleet(bad)


def test_demo_cluster_has_every_vendor() -> None:
    vendors = {d.vendor for n in cluster.default_cluster().nodes for d in load_topology(n.fixture, node=n.name).devices}
    assert vendors == set(Vendor)
    assert msgspec.json.encode(cluster.default_cluster())  # the cluster is plain data


def test_mix_shares_sum_to_one() -> None:
    assert sum(kind.share for kind in workload.MIX) == pytest.approx(1.0)


def test_compose_hypernodes_file_is_the_demo_network_tree() -> None:
    from services.collector.cluster.hypernode_file import parse_hypernodes

    text = (ROOT / "deploy" / "compose" / "hypernodes.yaml").read_text()
    parsed = parse_hypernodes(text)
    wanted = cluster.hypernode_manifests(cluster.default_cluster())
    assert [h.metadata.name for h in parsed] == [m["metadata"]["name"] for m in wanted]
    assert [_without_nulls(msgspec.to_builtins(h.spec)) for h in parsed] == [m["spec"] for m in wanted]


def _without_nulls(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value
