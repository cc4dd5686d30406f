"""Shipped fixtures and topology files: counts, links, sources, labels, and bad fixtures."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import msgspec
import pytest
from collector_prints import print_text

from schemas.topology import PcieLevel, Vendor
from services.collector.node.topology_files import (
    GPU_MODEL_MEMORY_MIB,
    METAX_DEVICES_ANNOTATION,
    PLACEHOLDER_MODEL,
    FixtureError,
    MetaxDeviceInfo,
    fixture_names,
    fixture_node_annotations,
    fixture_node_labels,
    fixture_source,
    load_topology,
)

REQUIRED = {
    "dgx-h100",
    "dgx1-v100",
    "pcie-8gpu-2socket",
    "pcie-4gpu",
    "metax-8gpu-2zone",
    "trn1.32xlarge",
    "inf2.48xlarge",
}


def neighbours(name: str) -> dict[int, set[int]]:
    topology = load_topology(name)
    found: dict[int, set[int]] = {d.index: set() for d in topology.devices}
    for link in topology.links:
        if link.nvlinks:
            found[link.src].add(link.dst)
    return found


def test_every_required_machine_type_is_shipped() -> None:
    assert set(fixture_names()) >= REQUIRED


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_every_fixture_names_its_public_source(name: str) -> None:
    source = fixture_source(name)
    assert len(source) > 20
    topology = load_topology(name, node="n7")
    assert topology.source.startswith(f"fixture {name}: ") and source in topology.source
    assert topology.node == "n7" and topology.machine_type == name


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_every_fixture_lists_both_directions_of_each_link(name: str) -> None:
    topology = load_topology(name)
    pairs = {(link.src, link.dst): link for link in topology.links}
    assert len(pairs) == len(topology.links)
    for (src, dst), link in pairs.items():
        reverse = pairs[(dst, src)]
        assert (reverse.nvlinks, reverse.pcie) == (link.nvlinks, link.pcie)
    assert all(d.memory_mib > 0 and d.cores > 0 for d in topology.devices)


@pytest.mark.parametrize(
    ("name", "count", "model", "memory_mib"),
    [
        ("dgx-h100", 8, "NVIDIA H100 80GB HBM3", 80 * 1024),
        ("dgx1-v100", 8, "Tesla V100-SXM2-32GB", 32 * 1024),
        ("pcie-8gpu-2socket", 8, "NVIDIA L40S", 48 * 1024),
        ("pcie-4gpu", 4, "NVIDIA A100 80GB PCIe", 80 * 1024),
    ],
)
def test_nvidia_prints_get_model_and_memory_from_the_table(name: str, count: int, model: str, memory_mib: int) -> None:
    topology = load_topology(name)
    assert len(topology.devices) == count
    assert {(d.vendor, d.model, d.memory_mib, d.cores) for d in topology.devices} == {
        (Vendor.NVIDIA, model, memory_mib, 100)
    }


def test_model_override_changes_model_and_memory() -> None:
    topology = load_topology("dgx1-v100", model="Tesla V100-SXM2-16GB")
    assert {(d.model, d.memory_mib) for d in topology.devices} == {("Tesla V100-SXM2-16GB", 16 * 1024)}
    assert {d.memory_mib for d in load_topology("dgx1-v100", memory_mib=1000).devices} == {1000}


def test_dgx_h100_is_eight_gpus_behind_nvswitch() -> None:
    topology = load_topology("dgx-h100")
    assert {d.nvswitch_links for d in topology.devices} == {18}
    assert all(len(peers) == 7 for peers in neighbours("dgx-h100").values())


def test_dgx1_links_as_printed() -> None:
    pairs = {(link.src, link.dst): link for link in load_topology("dgx1-v100").links}
    assert pairs[(0, 3)].nvlinks == 2  # GPU0-GPU3 prints NV2
    assert pairs[(0, 1)].nvlinks == 1  # NV1
    assert pairs[(0, 5)].pcie is PcieLevel.SYS and pairs[(0, 5)].nvlinks == 0


def test_pcie_4gpu_has_one_bridged_pair() -> None:
    pairs = {(link.src, link.dst): link for link in load_topology("pcie-4gpu").links}
    assert pairs[(0, 1)].nvlinks == 12
    assert pairs[(2, 3)].pcie is PcieLevel.NODE and pairs[(2, 3)].nvlinks == 0
    assert pairs[(1, 2)].pcie is PcieLevel.SYS


def test_metax_has_two_link_zones_of_four_linked_inside_only() -> None:
    topology = load_topology("metax-8gpu-2zone")
    assert {d.vendor for d in topology.devices} == {Vendor.METAX}
    zones = {d.index: d.link_zone for d in topology.devices}
    assert sorted(Counter(zones.values()).items()) == [(1, 4), (2, 4)]
    for device, peers in neighbours("metax-8gpu-2zone").items():
        same_zone = {i for i, zone in zones.items() if zone == zones[device] and i != device}
        assert peers == same_zone


def test_metax_node_annotation_is_hamis_device_list_with_the_zones() -> None:
    annotations = fixture_node_annotations("metax-8gpu-2zone", node="mx-1")
    entries = msgspec.json.decode(annotations[METAX_DEVICES_ANNOTATION], type=list[MetaxDeviceInfo])
    raw = msgspec.json.decode(annotations[METAX_DEVICES_ANNOTATION])
    assert set(raw[0]) >= {"uuid", "linkZone", "totalVRam", "totalCompute", "totalDevCount"}  # HAMi's field names
    topology = load_topology("metax-8gpu-2zone", node="mx-1")
    assert [(e.uuid, e.link_zone, e.total_vram) for e in entries] == [
        (d.uuid, d.link_zone, d.memory_mib) for d in topology.devices
    ]


def test_trn1_is_sixteen_trainium_on_a_two_d_torus() -> None:
    topology = load_topology("trn1.32xlarge")
    assert len(topology.devices) == 16
    assert {(d.vendor, d.cores, d.memory_mib) for d in topology.devices} == {(Vendor.NEURON, 2, 32 * 1024)}
    found = neighbours("trn1.32xlarge")
    # A 4x4 torus: each device links to 4 others, and the links form 2 x 16 undirected edges.
    assert all(len(peers) == 4 for peers in found.values())
    assert sum(len(peers) for peers in found.values()) == 2 * 2 * 16
    assert fixture_node_labels("trn1.32xlarge") == {"node.kubernetes.io/instance-type": "trn1.32xlarge"}


def test_inf2_is_twelve_inferentia2_on_a_ring() -> None:
    topology = load_topology("inf2.48xlarge")
    assert len(topology.devices) == 12
    assert {(d.vendor, d.cores, d.memory_mib) for d in topology.devices} == {(Vendor.NEURON, 2, 32 * 1024)}
    found = neighbours("inf2.48xlarge")
    assert all(peers == {(i - 1) % 12, (i + 1) % 12} for i, peers in found.items())
    assert fixture_node_labels("inf2.48xlarge") == {"node.kubernetes.io/instance-type": "inf2.48xlarge"}


def test_nvidia_labels_are_gpu_feature_discovery_style() -> None:
    labels = fixture_node_labels("dgx-h100")
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels["nvidia.com/gpu.memory"] == str(GPU_MODEL_MEMORY_MIB["NVIDIA H100 80GB HBM3"])


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_uuids_are_unique_per_node_and_stable(name: str) -> None:
    a = [d.uuid for d in load_topology(name, node="a").devices]
    assert len(set(a)) == len(a)
    assert a == [d.uuid for d in load_topology(name, node="a").devices]
    assert not set(a) & {d.uuid for d in load_topology(name, node="b").devices}


# --- files ---------------------------------------------------------------------------------


def test_a_pasted_print_file_needs_a_model(tmp_path: Path) -> None:
    path = tmp_path / "my-box.txt"
    path.write_text(print_text("pcie-4gpu"))
    with pytest.raises(FixtureError, match="does not name the GPU model"):
        load_topology(str(path))
    topology = load_topology(str(path), node="x", model="NVIDIA A100-PCIE-40GB")
    assert topology.machine_type == "my-box" and topology.source.startswith("file my-box.txt")
    assert {d.memory_mib for d in topology.devices} == {40 * 1024}


def test_memory_is_read_from_the_model_name_when_not_in_the_table(tmp_path: Path) -> None:
    path = tmp_path / "box.txt"
    path.write_text(print_text("pcie-4gpu"))
    assert {d.memory_mib for d in load_topology(str(path), model="Some GPU 24GB").devices} == {24 * 1024}
    with pytest.raises(FixtureError, match="memory unknown"):
        load_topology(str(path), model="Mystery")


def fixture_doc(**overrides: object) -> dict[str, object]:
    doc: dict[str, object] = {
        "source": "a public page",
        "machine_type": "two",
        "devices": [
            {"index": 0, "vendor": "nvidia", "model": "G", "memory_mib": 100},
            {"index": 1, "vendor": "nvidia", "model": "G", "memory_mib": 100},
        ],
        "links": [{"src": 0, "dst": 1, "nvlinks": 2}, {"src": 1, "dst": 0, "nvlinks": 2}],
    }
    doc.update(overrides)
    return doc


def write(tmp_path: Path, doc: dict[str, object]) -> str:
    path = tmp_path / "fixture.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_a_json_fixture_file_loads(tmp_path: Path) -> None:
    topology = load_topology(write(tmp_path, fixture_doc()), node="j")
    assert [d.index for d in topology.devices] == [0, 1] and len(topology.links) == 2
    assert topology.source == "file fixture.json: a public page"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"source": " "}, "must name its public source"),
        ({"links": [{"src": 0, "dst": 5, "nvlinks": 1}]}, r"links\[0\]\.dst: 5 is not a device index"),
        ({"links": [{"src": 0, "dst": 1, "nvlinks": 1}]}, "has no reverse 1->0"),
        ({"links": [{"src": 0, "dst": 1, "nvlinks": 1}, {"src": 1, "dst": 0, "nvlinks": 2}]}, "disagree"),
        ({"links": [{"src": 0, "dst": 0, "nvlinks": 1}]}, "cannot link to itself"),
        ({"links": [{"src": 0, "dst": 1}, {"src": 1, "dst": 0}]}, "needs nvlinks > 0 or a pcie level"),
        (
            {"devices": [{"index": 0, "vendor": "nvidia", "model": "G", "memory_mib": 0}], "links": []},
            r"devices\[0\]\.memory_mib",
        ),
        (
            {"devices": [{"index": 0, "vendor": "amd", "model": "G", "memory_mib": 1}], "links": []},
            r"devices\[0\]\.vendor",
        ),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_json_fixtures_say_which_field_and_why(tmp_path: Path, overrides: dict[str, object], message: str) -> None:
    with pytest.raises(FixtureError, match=message):
        load_topology(write(tmp_path, fixture_doc(**overrides)))


def test_an_unknown_source_lists_the_fixtures() -> None:
    with pytest.raises(FixtureError, match=r"not a shipped fixture .*dgx-h100.*nor an existing file"):
        load_topology("no-such-machine")


def test_a_print_with_no_model_gets_a_placeholder_when_the_caller_allows(tmp_path: Path) -> None:
    path = tmp_path / "box.txt"
    path.write_text(print_text("pcie-4gpu"))
    topology = load_topology(str(path), require_model=False)
    assert {d.model for d in topology.devices} == {PLACEHOLDER_MODEL}
    assert {d.memory_mib for d in topology.devices} == {0}  # nobody said: no memory is claimed
    assert {d.memory_mib for d in load_topology(str(path), require_model=False, memory_mib=1024).devices} == {1024}


@pytest.mark.parametrize("model", [None, "NVIDIA A100-PCIE-40GB"])
def test_a_print_that_does_not_parse_is_reported_as_such_with_or_without_a_model(
    tmp_path: Path, model: str | None
) -> None:
    path = tmp_path / "box.txt"
    path.write_text("\tGPU0\tGPU1\nGPU0\t X \tQPI\nGPU1\tNV1\t X \n")
    with pytest.raises(FixtureError, match=r"^file box.txt: line 2: unknown link code .*'QPI'"):
        load_topology(str(path), model=model)
