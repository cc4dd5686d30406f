"""MetaX nodes, read as HAMi's `metax` devices read them.

MetaX's sGPU device plugin lists the node's cards in the annotation
`metax-tech.com/node-gpu-devices` (JSON: uuid, model, totalVRam, totalCompute, numa, healthy,
linkZone, ...): each card becomes a device with its MetaXLink zone. Its whole-GPU plugin
advertises only the count `metax-tech.com/gpu` in `status.capacity`: so many cards of
HAMi's assumed 64 GiB, without zones (the plugin publishes none per card).
"""

from __future__ import annotations

import msgspec

from schemas.topology import Device, NodeTopology, Vendor
from schemas.vendors import descriptor
from services.collector.node.discovery.node import DiscoveryError, NodeObject, VendorDiscovery, source_prefix
from services.collector.node.topo_matrix import synthetic_uuid
from services.collector.node.topology_files import METAX_DEVICES_ANNOTATION, MetaxDeviceInfo

WHOLE_GPU_RESOURCE = "metax-tech.com/gpu"
SGPU_RESOURCE = "metax-tech.com/sgpu"
WHOLE_GPU_MEMORY_MIB = 64 * 1024  # what HAMi's metax device assumes for a card the plugin does not describe
UNNAMED_MODEL = "MetaX GPU"

_decoder = msgspec.json.Decoder(list[MetaxDeviceInfo])


def carries(node: NodeObject) -> bool:
    return METAX_DEVICES_ANNOTATION in node.annotations or any(
        node.count(resource) > 0 for resource in (WHOLE_GPU_RESOURCE, SGPU_RESOURCE)
    )


def read(node: NodeObject) -> NodeTopology:
    listed = node.annotations.get(METAX_DEVICES_ANNOTATION)
    if listed is not None:
        return _from_device_list(node, listed)
    count = node.count(WHOLE_GPU_RESOURCE)
    if not count:
        raise DiscoveryError(
            f"node {node.name}: status.capacity[{SGPU_RESOURCE}] without the annotation {METAX_DEVICES_ANNOTATION}"
        )
    machine_type = f"metax-{count}gpu"
    prefix = descriptor(Vendor.METAX).uuid_prefix
    devices = tuple(
        Device(
            index=i,
            uuid=synthetic_uuid(prefix, node.name, machine_type, i),
            vendor=Vendor.METAX,
            model=UNNAMED_MODEL,
            memory_mib=WHOLE_GPU_MEMORY_MIB,
        )
        for i in range(count)
    )
    source = f"{source_prefix(node.name)}{WHOLE_GPU_RESOURCE} {count} (no MetaXLink zones published)"
    return NodeTopology(node=node.name, machine_type=machine_type, devices=devices, source=source)


def _from_device_list(node: NodeObject, listed: str) -> NodeTopology:
    where = f"node {node.name}: metadata.annotations[{METAX_DEVICES_ANNOTATION}]"
    try:
        cards = _decoder.decode(listed)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise DiscoveryError(f"{where}: {exc}") from None
    if not cards:
        raise DiscoveryError(f"{where}: lists no card")
    uuids = [card.uuid for card in cards]
    if len(set(uuids)) != len(uuids) or not all(uuids):
        raise DiscoveryError(f"{where}: every card needs a uuid of its own")
    devices = tuple(
        Device(
            index=i,
            uuid=card.uuid,
            vendor=Vendor.METAX,
            model=card.model or UNNAMED_MODEL,
            memory_mib=card.total_vram,
            numa_node=card.numa,
            cores=card.total_compute or 100,
            link_zone=card.link_zone if card.link_zone > 0 else None,
            healthy=card.healthy,
        )
        for i, card in enumerate(cards)
    )
    model = devices[0].model.replace(" ", "-")
    source = f"{source_prefix(node.name)}{METAX_DEVICES_ANNOTATION} ({len(devices)} cards, from MetaX's device plugin)"
    return NodeTopology(node=node.name, machine_type=f"metax-{model}-{len(devices)}gpu", devices=devices, source=source)


DISCOVERY = VendorDiscovery(name="metax", carries=carries, read=read)
