"""The node policy contract: a node's score for one choice of devices, from what its vendor measures.

A node policy (the value of `hami.io/node-scheduler-policy`: binpack, spread,
fragmentation) is a strategy that works for every vendor, because it reads
only what the vendor measures of the node (`NodeMeasures`, made by the
vendor's `measures(scratch, request)`):

- the vendor's own terms for the choice (NVIDIA: link quality and the
  remainder it breaks; MetaX: its zones or card preference; Neuron: the
  largest free group it shrinks), which every policy but FGD's adds around
  its own term: score = lead + policy term + tail;
- the node's fill after the choice (0..1) and what a full node weighs
  against those terms;
- each device's free share (`FreeShare`) once the pod holds some devices,
  the pod's share of them, whether the node is busy already: FGD's measure;
- HAMi's node usage before the pod (mode hami: every policy HAMi knows is
  scored by HAMi's usage, `policies/hami_usage.py`, in the policy's direction).

A policy never asks which vendor it scores, and a vendor never asks which
policy scores it: it measures, with one exception it cannot avoid, the
direction (`packs`) of measures that come in a packing and a spreading form
(MetaX's whole-card topology annotations).

Adding a policy: a module in `engine/node/policies/` exporting `Policy`, a class
made once per engine with the engine's memo, and its module in
`NODE_POLICY_MODULES` (`engine/node/policies/__init__.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import msgspec

from engine.core.memo import Memo
from engine.node.fragmentation import FreeShare
from engine.node.vendor import DeviceRequest, NodeScore, NodeScratch, SetChoice
from schemas.events import DeviceAssignment

DIGITS = 6  # scores and parts are rounded so that float noise never reorders equal answers


class OwnTerms(msgspec.Struct, frozen=True, kw_only=True):
    """The vendor's own score terms for one choice, around the policy's: score = lead + policy term + tail."""

    lead: float = 0.0
    lead_parts: dict[str, float] = {}
    tail: float = 0.0
    tail_parts: dict[str, float] = {}


class NodeMeasures(Protocol):
    """What a vendor measures of one node for one request (its plugin's `measures`)."""

    @property
    def scratch(self) -> NodeScratch: ...

    @property
    def request(self) -> DeviceRequest:
        """The vendor's request (carrying the workload and the pod's CPU when the policy reads them)."""
        ...

    @property
    def fill_weight(self) -> float:
        """What a full node's fill weighs against the vendor's own terms."""
        ...

    @property
    def hami_spread_base(self) -> float:
        """HAMi's spread, higher-is-better, is this less the usage."""
        ...

    def own_terms(self, choice: SetChoice, packs: bool) -> OwnTerms:
        """The vendor's own terms for `choice` (`packs`: the policy prefers fuller nodes)."""
        ...

    def fill_after(self, choice: SetChoice) -> float:
        """The share of the node's devices in use once the pod holds `choice`, 0..1."""
        ...

    def hami_usage(self) -> float:
        """HAMi's node usage before the pod (its node_policy.go score)."""
        ...

    def free_shares(self, taken: tuple[DeviceAssignment, ...]) -> list[FreeShare]:
        """Each device's free share once the pod holds `taken` (nothing: as the node is now)."""
        ...

    def taken_milli(self, taken: tuple[DeviceAssignment, ...]) -> int:
        """Thousandths of a device the pod takes with `taken`, summed over its devices (0: none)."""
        ...

    def busy(self) -> bool:
        """Some device of the vendor on the node holds a pod already."""
        ...


class NodePolicy(Protocol):
    """One node policy, made once per engine (see the module docstring)."""

    name: str  # its value of hami.io/node-scheduler-policy
    packs: bool  # it prefers fuller nodes: the direction of HAMi's usage and of a vendor's two-form measures
    hami: bool  # HAMi has it too: mode hami accepts it (and scores it by HAMi's usage)
    reads_workload: bool  # it weighs the cluster's workload classes (then pods without devices are scored too)

    def score(self, measures: NodeMeasures, choice: SetChoice) -> NodeScore:
        """The node's score for `choice` (higher = better, comparable across nodes), with named parts."""
        ...

    def device_ranks(self, measures: NodeMeasures, options: Sequence[tuple[DeviceAssignment, ...]]) -> list[int] | None:
        """For a pod that takes a share of one device: each option's rank by this policy (lower = better;
        the vendor breaks ties), or None when the policy leaves the choice to the vendor."""
        ...


class PolicyClass(Protocol):
    def __call__(self, memo: Memo) -> NodePolicy: ...


def around(measures: NodeMeasures, choice: SetChoice, packs: bool, term: float, parts: dict[str, float]) -> NodeScore:
    """The policy's `term` (named by `parts`) between the vendor's own terms: lead + term + tail."""
    own = measures.own_terms(choice, packs)
    score = own.lead + term + own.tail
    return NodeScore(score=round(score, DIGITS), parts={**own.lead_parts, **parts, **own.tail_parts})
