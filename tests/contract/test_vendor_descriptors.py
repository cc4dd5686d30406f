"""One descriptor per vendor (schemas/vendors.py), and every part of topoplace reading it."""

from __future__ import annotations

import pytest

from engine import Engine, PodRequest
from schemas import vendors
from schemas.topology import Vendor
from schemas.vendors import DESCRIPTORS, VendorDescriptor, descriptor
from services.binder.node_devices import VENDOR_RESOURCES
from services.collector.node.topology_files import load_topology
from topoplace.cli import main


@pytest.mark.parametrize("vendor", list(Vendor))
def test_every_vendor_has_a_descriptor(vendor: Vendor) -> None:
    found = descriptor(vendor)
    assert found.vendor is vendor
    assert found.whole and found.device_noun and found.uuid_prefix
    assert found.advertised[0] == found.whole  # whole devices first


def test_a_vendor_without_a_descriptor_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vendors, "DESCRIPTORS", tuple(d for d in DESCRIPTORS if d.vendor is not Vendor.NEURON))
    with pytest.raises(LookupError, match="vendor 'neuron' has no descriptor"):
        descriptor(Vendor.NEURON)


def test_no_resource_belongs_to_two_vendors() -> None:
    names = [r for d in DESCRIPTORS for r in d.resources]
    assert len(names) == len(set(names))
    assert len({d.vendor for d in DESCRIPTORS}) == len(DESCRIPTORS)


def whole_pod(d: VendorDescriptor) -> PodRequest:
    return PodRequest(uid="p", requests={d.whole: "1"})


@pytest.mark.parametrize("d", DESCRIPTORS, ids=lambda d: d.vendor.value)
def test_the_engine_reads_each_vendor_by_its_descriptor(d: VendorDescriptor) -> None:
    engine = Engine()
    claimed = engine.vendors.claim(whole_pod(d))
    assert claimed is not None
    plugin, request = claimed
    assert plugin.vendor is d.vendor
    assert (request.resource, request.device_noun) == (d.whole, d.device_noun)
    assert frozenset(getattr(plugin, "share_resources", ())) == frozenset(d.unreported)
    for resource in d.unreported:
        assert resource in engine.vendors.share_resources


@pytest.mark.parametrize("d", DESCRIPTORS, ids=lambda d: d.vendor.value)
def test_the_binder_reads_what_a_node_advertises_of_each_vendor_by_its_descriptor(d: VendorDescriptor) -> None:
    assert VENDOR_RESOURCES[d.vendor] == d.advertised


@pytest.mark.parametrize("box", ["pcie-4gpu", "metax-8gpu-2zone", "trn1.32xlarge"])
def test_the_cli_picks_whole_devices_of_every_vendor(box: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engine", "pick", "--topology", box, "--count", "1"]) == 0
    assert '"devices"' in capsys.readouterr().out


@pytest.mark.parametrize(("fixture", "vendor"), [("metax-8gpu-2zone", Vendor.METAX), ("trn1.32xlarge", Vendor.NEURON)])
def test_the_collector_names_fixture_devices_by_the_descriptors_uuid_prefix(fixture: str, vendor: Vendor) -> None:
    devices = load_topology(fixture, node="n").devices
    assert devices
    assert all(dev.uuid.startswith(f"{descriptor(vendor).uuid_prefix}-") for dev in devices if dev.vendor is vendor)
