"""One descriptor per accelerator vendor: the names every part of topoplace reads for it.

The engine's vendor packages read their resources and device noun here, the binder
what a Node advertises of the vendor, the collector the UUID prefix of a fixture's
devices, the CLI the resource that asks for whole devices. A vendor in `Vendor`
without a descriptor is an error (`descriptor` raises; a test checks every one).
"""

from __future__ import annotations

import msgspec

from schemas.topology import Vendor


class VendorDescriptor(msgspec.Struct, frozen=True, kw_only=True):
    """How Kubernetes, HAMi and users name one vendor's devices."""

    vendor: Vendor
    device_noun: str  # a device in a user's words: "2 of 8 GPUs free", "Neuron device 3"
    uuid_prefix: str  # what the vendor's device UUIDs start with, before "-" ("GPU-8f2a...")
    whole: str  # the extended resource of whole devices (a count)
    whole_aliases: tuple[str, ...] = ()  # older names of the same whole devices, asked and advertised alike
    shares: str = ""  # a count of shares of devices (MetaX sGPU); "" when shares ride on `whole`
    memory_share: str = ""  # device memory per device of a share
    memory_percent_share: str = ""  # device memory per device of a share, in percent
    compute_share: str = ""  # percent of each device's compute for a share
    cores: str = ""  # a count of the devices' cores, asked instead of whole devices (NeuronCores)
    advertised: tuple[str, ...] = ()  # what the Node object advertises of the vendor, whole devices first
    hami_types: tuple[str, ...] = ()  # HAMi's device type names, where topoplace writes HAMi's annotations

    @property
    def unreported(self) -> tuple[str, ...]:
        """Resources checked per device that no Node reports (the share's memory and compute)."""
        return tuple(r for r in (self.memory_share, self.memory_percent_share, self.compute_share) if r)

    @property
    def whole_names(self) -> tuple[str, ...]:
        """Every name a pod may ask whole devices by, the current one first."""
        return (self.whole, *self.whole_aliases)

    @property
    def resources(self) -> tuple[str, ...]:
        """Every resource a pod may ask of this vendor."""
        named = (*self.whole_names, self.shares, self.memory_share, self.memory_percent_share, self.compute_share)
        return tuple(r for r in (*named, self.cores) if r)


NVIDIA = VendorDescriptor(
    vendor=Vendor.NVIDIA,
    device_noun="GPU",
    uuid_prefix="GPU",
    whole="nvidia.com/gpu",
    memory_share="nvidia.com/gpumem",
    memory_percent_share="nvidia.com/gpumem-percentage",
    compute_share="nvidia.com/gpucores",
    advertised=("nvidia.com/gpu",),
    hami_types=("NVIDIA",),
)
METAX = VendorDescriptor(
    vendor=Vendor.METAX,
    device_noun="MetaX card",
    uuid_prefix="GPU",
    whole="metax-tech.com/gpu",
    shares="metax-tech.com/sgpu",
    memory_share="metax-tech.com/vmemory",
    compute_share="metax-tech.com/vcore",
    advertised=("metax-tech.com/gpu", "metax-tech.com/sgpu"),
)
# The Neuron device plugin advertises whole devices as `neurondevice` (`neuron` is its older name,
# still advertised by it and the one HAMi's default configuration reads) and their NeuronCores as
# `neuroncore`: 2 per device on trn1/inf2, 4 on inf1, 4 or 8 on trn2 (docs/vendors-metax-neuron.md).
NEURON = VendorDescriptor(
    vendor=Vendor.NEURON,
    device_noun="Neuron device",
    uuid_prefix="NEURON",
    whole="aws.amazon.com/neurondevice",
    whole_aliases=("aws.amazon.com/neuron",),
    cores="aws.amazon.com/neuroncore",
    advertised=("aws.amazon.com/neurondevice", "aws.amazon.com/neuron"),
)

DESCRIPTORS: tuple[VendorDescriptor, ...] = (NVIDIA, METAX, NEURON)


def descriptor(vendor: Vendor) -> VendorDescriptor:
    """The vendor's descriptor; LookupError names a vendor that has none."""
    for found in DESCRIPTORS:
        if found.vendor is vendor:
            return found
    raise LookupError(f"vendor {vendor.value!r} has no descriptor in schemas/vendors.py")
