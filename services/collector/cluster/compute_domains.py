"""NVIDIA's ComputeDomains (resource.nvidia.com): which claim template is a domain's channel's.

A ComputeDomain names, in `spec.channel.resourceClaimTemplate.name`, the ResourceClaimTemplate its
pods' channel claims are made from. NVIDIA's DRA driver does not keep those pods inside one NVLink
clique (dra-driver-nvidia-gpu #804); the scheduler must, so a pending pod's claim made from such a
template names the domain (PodClaim.compute_domain) and the placer keeps the gang in one clique, as
`engine place --cluster` does (topoplace/cluster_objects/gang_claims.py). Nothing is published of
the domains themselves: they are kept in the pod tracker, and a change republishes the pending pods
(their gangs) made from the template.
"""

from __future__ import annotations

import msgspec

from services.collector.cluster.objects import ObjectMeta
from services.collector.cluster.trackers import Outcome, PodTracker

COMPUTE_DOMAIN_GROUP, COMPUTE_DOMAINS = "resource.nvidia.com", "computedomains"
COMPUTE_DOMAIN_VERSIONS = ("v1beta1",)


class _Named(msgspec.Struct, kw_only=True):
    name: str = ""


class _Channel(msgspec.Struct, kw_only=True, rename="camel"):
    resource_claim_template: _Named = msgspec.field(default_factory=_Named)


class _Spec(msgspec.Struct, kw_only=True):
    channel: _Channel | None = None


class ComputeDomain(msgspec.Struct, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: _Spec = msgspec.field(default_factory=_Spec)


def domain_key(domain: ComputeDomain) -> str:
    return f"{domain.metadata.namespace}/{domain.metadata.name}"


def channel_template(domain: ComputeDomain) -> str:
    """The name of the domain's channel claim template ("": none given)."""
    channel = domain.spec.channel
    return channel.resource_claim_template.name if channel is not None else ""


class ComputeDomainsOfPods:
    """ComputeDomains, kept in the pod tracker's map of channel templates (the Tracker protocol of kinds.py)."""

    def __init__(self, pods: PodTracker) -> None:
        self._pods = pods
        self._templates: dict[str, tuple[str, str]] = {}  # domain key -> (namespace, its channel template)

    def __len__(self) -> int:
        return len(self._templates)

    def relisted(self, objs: list[ComputeDomain], now: float, *, force: bool = False) -> Outcome:
        outcome = Outcome()
        present = {domain_key(d) for d in objs}
        for key in sorted(k for k in self._templates if k not in present):
            outcome.extend(self.gone(key, now))
        for domain in objs:
            outcome.extend(self.observe(domain, now))
        return outcome

    def observe(self, obj: ComputeDomain, now: float) -> Outcome:
        key, namespace, template = domain_key(obj), obj.metadata.namespace, channel_template(obj)
        outcome = Outcome()
        before = self._templates.get(key)
        if before is not None and before != (namespace, template):
            outcome.extend(self.gone(key, now))  # its channel names another template now
        if not template:
            return outcome
        self._templates[key] = (namespace, template)
        return outcome.extend(self._pods.compute_domain(namespace, template, key, now))

    def gone(self, key: str, now: float) -> Outcome:
        known = self._templates.pop(key, None)
        if known is None:
            return Outcome()
        return self._pods.compute_domain(known[0], known[1], None, now)
