"""Topologies from files: the shipped fixtures, a JSON fixture, or a pasted `nvidia-smi topo -m` print.

A fixture describes a real machine type and names its public source. Topo
prints say nothing of the GPU model or its memory, so each shipped print comes
with a model from a small table (overridable); JSON fixtures carry everything.
"""

from __future__ import annotations

import importlib.resources
import re
from pathlib import Path

import msgspec

from schemas.topology import Device, Link, NodeTopology, Vendor
from schemas.vendors import descriptor
from services.collector.node.topo_matrix import TopoMatrixError, parse_topo_matrix, source_line, synthetic_uuid

FIXTURE_PACKAGE = "services.collector.node.fixtures"

# Nominal memory of the GPU models the fixtures use, in MiB (nominal GiB x 1024;
# NVML reports a little less on real hardware). Names as NVML prints them.
GPU_MODEL_MEMORY_MIB: dict[str, int] = {
    "NVIDIA H100 80GB HBM3": 80 * 1024,
    "NVIDIA H200": 141 * 1024,
    "NVIDIA A100-SXM4-40GB": 40 * 1024,
    "NVIDIA A100-SXM4-80GB": 80 * 1024,
    "NVIDIA A100-PCIE-40GB": 40 * 1024,
    "NVIDIA A100 80GB PCIe": 80 * 1024,
    "Tesla V100-SXM2-16GB": 16 * 1024,
    "Tesla V100-SXM2-32GB": 32 * 1024,
    "NVIDIA L40S": 48 * 1024,
}
# The model of a print's GPUs when nobody names it: whole-GPU choices do not depend on it.
PLACEHOLDER_MODEL = "unknown NVIDIA GPU"
_MEMORY_IN_NAME = re.compile(r"(\d+)\s*GB", re.IGNORECASE)


class FixtureError(ValueError):
    """A fixture or topology source that cannot be used: names the source, the field and the reason."""


class PrintFixture(msgspec.Struct, frozen=True, kw_only=True):
    """A shipped `nvidia-smi topo -m` print and what the print cannot say."""

    file: str
    model: str
    note: str = ""  # what the fixture assumes beyond its source


# The machine type of a shipped print is its fixture name.
PRINT_FIXTURES: dict[str, PrintFixture] = {
    "dgx-h100": PrintFixture(file="dgx-h100.txt", model="NVIDIA H100 80GB HBM3"),
    "dgx1-v100": PrintFixture(
        file="dgx1-v100.txt",
        model="Tesla V100-SXM2-32GB",
        note="DGX-1 shipped with 16 GB and 32 GB V100s; the source does not say which: 32 GB assumed",
    ),
    "pcie-8gpu-2socket": PrintFixture(
        file="pcie-8gpu-2socket.txt",
        model="NVIDIA L40S",
        note="the source does not name the GPU model: NVIDIA L40S (48 GB, PCIe) assumed",
    ),
    "pcie-4gpu": PrintFixture(
        file="pcie-4gpu.txt",
        model="NVIDIA A100 80GB PCIe",
        note="the source names A100 PCIe, not its memory: 80 GB assumed; GPU2-GPU3 print NODE, not an NVLink bridge",
    ),
}
JSON_FIXTURES: dict[str, str] = {
    "metax-8gpu-2zone": "metax-8gpu-2zone.json",
    "trn1.32xlarge": "trn1.32xlarge.json",
    "inf2.48xlarge": "inf2.48xlarge.json",
}


class FixtureDevice(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """schemas.topology.Device with an optional UUID: a fixture stands for many nodes,
    so each node gets its own stable UUIDs when the fixture names none."""

    index: int
    vendor: Vendor
    model: str
    memory_mib: int
    uuid: str = ""
    numa_node: int | None = None
    cores: int = 100
    link_zone: int | None = None
    nvswitch_links: int = 0
    healthy: bool = True


class TopologyFixture(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The JSON fixture format: a NodeTopology plus the node's labels and annotations.

    `source` (required) names where the topology is published. Links are
    directed and listed in both directions; a pair with no link is not
    directly connected.
    """

    source: str
    machine_type: str
    devices: tuple[FixtureDevice, ...]
    links: tuple[Link, ...] = ()
    description: str = ""
    node: str = ""  # ignored: the node name is the agent's
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class MetaxDeviceInfo(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    omit_defaults=True,
    rename={
        "total_dev_count": "totalDevCount",
        "total_compute": "totalCompute",
        "total_vram": "totalVRam",
        "link_zone": "linkZone",
    },
):
    """One entry of the `metax-tech.com/node-gpu-devices` node annotation (HAMi's MetaX sGPU format)."""

    uuid: str
    model: str = ""
    total_dev_count: int = 0
    total_compute: int = 0
    total_vram: int = 0
    numa: int = 0
    healthy: bool = False
    link_zone: int = 0


METAX_DEVICES_ANNOTATION = "metax-tech.com/node-gpu-devices"
METAX_SGPU_PER_DEVICE = 16  # HAMi's MetaX guide: up to 16 sGPUs per card


def fixture_names() -> list[str]:
    return sorted([*PRINT_FIXTURES, *JSON_FIXTURES])


def load_topology(
    source: str,
    *,
    node: str = "node-0",
    model: str | None = None,
    memory_mib: int | None = None,
    require_model: bool = True,
) -> NodeTopology:
    """A shipped fixture by name, or a file: JSON fixture (*.json) or a topo print (anything else).

    `model` / `memory_mib` override what a topo print's table says (JSON fixtures name their own).
    A print file with no model is refused when `require_model` (a node agent publishes the
    memory); otherwise its GPUs get PLACEHOLDER_MODEL and `memory_mib` (0 when not given),
    which is all a whole-GPU choice needs.
    """
    if source in PRINT_FIXTURES:
        spec = PRINT_FIXTURES[source]
        text = _fixture_text(spec.file)
        return _from_print(
            text,
            node=node,
            machine_type=source,
            model=model or spec.model,
            memory_mib=memory_mib,
            origin=f"fixture {source}",
        )
    if source in JSON_FIXTURES:
        return _from_json(_fixture_text(JSON_FIXTURES[source]), node=node, origin=f"fixture {source}")
    path = Path(source)
    if not path.is_file():
        raise FixtureError(
            f"topology source {source!r}: not a shipped fixture ({', '.join(fixture_names())}) nor an existing file"
        )
    text = path.read_text(encoding="utf-8", errors="replace")
    origin = f"file {path.name}"
    if path.suffix.lower() == ".json":
        return _from_json(text, node=node, origin=origin)
    # Read the print first: a print that does not parse is reported for what it is
    # (the line and why), whether or not a model was given.
    placeholder = _from_print(
        text, node=node, machine_type=path.stem, model=PLACEHOLDER_MODEL, memory_mib=memory_mib or 0, origin=origin
    )
    if model:
        return _from_print(text, node=node, machine_type=path.stem, model=model, memory_mib=memory_mib, origin=origin)
    if require_model:
        raise FixtureError(
            f"topology source {source!r}: a topo print does not name the GPU model; pass model (--model)"
        )
    return placeholder


def read_fixture(name: str) -> TopologyFixture:
    """The decoded JSON fixture of a shipped name (for its labels, annotations and source)."""
    if name not in JSON_FIXTURES:
        raise FixtureError(f"fixture {name!r}: not a shipped JSON fixture ({', '.join(sorted(JSON_FIXTURES))})")
    return _decode_fixture(_fixture_text(JSON_FIXTURES[name]), origin=f"fixture {name}")


def fixture_source(name: str) -> str:
    """The public source a shipped fixture names."""
    if name in PRINT_FIXTURES:
        return source_line(_fixture_text(PRINT_FIXTURES[name].file))
    return read_fixture(name).source


def fixture_note(name: str) -> str:
    """What a shipped fixture assumes beyond its source ("" when nothing)."""
    return PRINT_FIXTURES[name].note if name in PRINT_FIXTURES else ""


def fixture_node_labels(name: str) -> dict[str, str]:
    """Labels a node of this machine type carries (GPU feature discovery's for NVIDIA, the instance type for AWS)."""
    if name in JSON_FIXTURES:
        return dict(read_fixture(name).labels)
    topology = load_topology(name)
    first = topology.devices[0]
    return {
        "nvidia.com/gpu.product": first.model.replace(" ", "-"),
        "nvidia.com/gpu.memory": str(first.memory_mib),
        "nvidia.com/gpu.count": str(len(topology.devices)),
    }


def fixture_node_annotations(name: str, *, node: str = "node-0") -> dict[str, str]:
    """Annotations a node of this machine type carries; MetaX nodes get HAMi's device list with link zones."""
    annotations = dict(read_fixture(name).annotations) if name in JSON_FIXTURES else {}
    topology = load_topology(name, node=node)
    if any(d.vendor is Vendor.METAX for d in topology.devices):
        annotations[METAX_DEVICES_ANNOTATION] = metax_devices_annotation(topology.devices)
    return annotations


def metax_devices_annotation(devices: tuple[Device, ...]) -> str:
    entries = [
        MetaxDeviceInfo(
            uuid=d.uuid,
            model=d.model,
            total_dev_count=METAX_SGPU_PER_DEVICE,
            total_compute=d.cores,
            total_vram=d.memory_mib,
            numa=d.numa_node if d.numa_node is not None else 0,
            healthy=d.healthy,
            link_zone=d.link_zone or 0,
        )
        for d in devices
        if d.vendor is Vendor.METAX
    ]
    return msgspec.json.encode(entries).decode()


def model_memory_mib(model: str) -> int:
    """Memory of a GPU model: the table, else the "<n>GB" in its name."""
    if model in GPU_MODEL_MEMORY_MIB:
        return GPU_MODEL_MEMORY_MIB[model]
    match = _MEMORY_IN_NAME.search(model)
    if match:
        return int(match.group(1)) * 1024
    raise FixtureError(
        f"GPU model {model!r}: memory unknown (not in the model table, no '<n>GB' in the name); "
        "pass memory_mib (--memory-mib)"
    )


# --- internals -----------------------------------------------------------------------------


def _fixture_text(file: str) -> str:
    return importlib.resources.files(FIXTURE_PACKAGE).joinpath(file).read_text(encoding="utf-8")


def _from_print(
    text: str, *, node: str, machine_type: str, model: str, memory_mib: int | None, origin: str
) -> NodeTopology:
    memory = memory_mib if memory_mib is not None else model_memory_mib(model)
    if memory < 0 or (memory == 0 and model != PLACEHOLDER_MODEL):
        raise FixtureError(f"{origin}: memory_mib must be positive, got {memory}")
    cited = source_line(text)
    try:
        return parse_topo_matrix(
            text,
            node=node,
            machine_type=machine_type,
            model=model,
            memory_mib=memory,
            source=f"{origin}: {cited}" if cited else origin,
        )
    except TopoMatrixError as exc:
        raise FixtureError(f"{origin}: {exc}") from exc


def _from_json(text: str, *, node: str, origin: str) -> NodeTopology:
    fixture = _decode_fixture(text, origin=origin)
    devices = tuple(
        Device(
            index=d.index,
            uuid=d.uuid or synthetic_uuid(descriptor(d.vendor).uuid_prefix, node, fixture.machine_type, d.index),
            vendor=d.vendor,
            model=d.model,
            memory_mib=d.memory_mib,
            numa_node=d.numa_node,
            cores=d.cores,
            link_zone=d.link_zone,
            nvswitch_links=d.nvswitch_links,
            healthy=d.healthy,
        )
        for d in fixture.devices
    )
    return NodeTopology(
        node=node,
        machine_type=fixture.machine_type,
        devices=devices,
        links=fixture.links,
        source=f"{origin}: {fixture.source}",
    )


def _decode_fixture(text: str, *, origin: str) -> TopologyFixture:
    try:
        fixture = msgspec.json.decode(text, type=TopologyFixture)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise FixtureError(f"{origin}: {exc}") from exc
    _check_fixture(fixture, origin)
    return fixture


def _check_fixture(fixture: TopologyFixture, origin: str) -> None:
    if not fixture.source.strip():
        raise FixtureError(f"{origin}: `source` is empty: a fixture must name its public source")
    if not fixture.devices:
        raise FixtureError(f"{origin}: `devices` is empty")
    indices: set[int] = set()
    for position, device in enumerate(fixture.devices):
        where = f"{origin}: devices[{position}]"
        if device.index in indices:
            raise FixtureError(f"{where}.index: {device.index} appears twice")
        if device.memory_mib <= 0:
            raise FixtureError(f"{where}.memory_mib: must be positive, got {device.memory_mib}")
        if device.cores <= 0:
            raise FixtureError(f"{where}.cores: must be positive, got {device.cores}")
        indices.add(device.index)
    by_pair: dict[tuple[int, int], Link] = {}
    for position, link in enumerate(fixture.links):
        where = f"{origin}: links[{position}]"
        for field, value in (("src", link.src), ("dst", link.dst)):
            if value not in indices:
                raise FixtureError(f"{where}.{field}: {value} is not a device index")
        if link.src == link.dst:
            raise FixtureError(f"{where}: a device cannot link to itself ({link.src})")
        if (link.src, link.dst) in by_pair:
            raise FixtureError(f"{where}: link {link.src}->{link.dst} listed twice")
        if link.nvlinks <= 0 and link.pcie is None:
            raise FixtureError(f"{where}: a link needs nvlinks > 0 or a pcie level")
        by_pair[(link.src, link.dst)] = link
    for (src, dst), link in by_pair.items():
        reverse = by_pair.get((dst, src))
        if reverse is None:
            raise FixtureError(f"{origin}: links: {src}->{dst} has no reverse {dst}->{src} (list both directions)")
        if (reverse.nvlinks, reverse.pcie) != (link.nvlinks, link.pcie):
            raise FixtureError(f"{origin}: links: {src}->{dst} and {dst}->{src} disagree")
