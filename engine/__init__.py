"""The topology engine: which node and which devices a pod gets, and why.

Pure and deterministic: no I/O, no clock, no randomness; the same snapshot and
request give the same decision. An `Engine` (decide/engine.py) owns its vendor
plugins and every memo table it keeps: nothing is shared between engines.
Four levels, each a package that imports only the ones below it
(import-linter's `layers` contract):

    decide/     one decision: engine.py (Engine), pod.py (claim.py, ranking.py, explanation.py),
                node_rules.py, kube/ (kube-scheduler's node filters), gang/ (a gang in one network domain)
    cluster/    the cluster: index.py (nodes grouped into device classes), network/ (the network tree)
    node/       one node: answer.py (the node answer every vendor shares), vendor.py (the contract),
                registry.py (which vendors and node policies, made per engine), vendors/<name>/ (nvidia,
                metax, neuron), policy.py (the node policy contract), policies/<name>.py (binpack, spread,
                fragmentation, hami_usage), search*.py, fragmentation.py (+ fragment_memo.py), explain.py
    core/       what all read: model.py, errors.py, limits.py, memo.py, quantities.py, node_key.py, validate.py

The functions below are for one-off callers (the CLI, a script): each call
uses a fresh engine, so nothing is remembered between calls. A long-lived
caller (the placer, the benchmark) keeps an Engine instead.
"""

from __future__ import annotations

from engine.cluster.index import ClusterIndex
from engine.cluster.network import NetworkTree
from engine.core.errors import RequestError
from engine.core.limits import Limits
from engine.core.model import (
    Allocation,
    Decision,
    Mode,
    NodeState,
    NodeVerdict,
    PlaceInput,
    PodRequest,
    Snapshot,
    WorkloadClass,
)
from engine.decide.engine import DeviceChoice, Engine, node_reads
from engine.decide.gang import GangClaims, GangDecision, GangRequest
from engine.node.registry import VendorRegistry
from engine.node.vendor import SetCandidate
from engine.node.vendors import registry

__all__ = [
    "Allocation",
    "ClusterIndex",
    "Decision",
    "DeviceChoice",
    "Engine",
    "Limits",
    "Mode",
    "NodeState",
    "NodeVerdict",
    "PlaceInput",
    "PodRequest",
    "RequestError",
    "SetCandidate",
    "Snapshot",
    "VendorRegistry",
    "WorkloadClass",
    "choose_devices",
    "index_of",
    "new_index",
    "place",
    "place_gang",
]


def place(snapshot: Snapshot, request: PodRequest, mode: Mode = Mode.DEFAULT, *, explain: bool = False) -> Decision:
    """`Engine.place` by a fresh engine of the registered vendors."""
    return Engine().place(snapshot, request, mode, explain=explain)


def index_of(snapshot: Snapshot) -> ClusterIndex:
    """A new cluster index of `snapshot` (RequestError when a node name appears twice)."""
    return Engine().index_of(snapshot)


def new_index(*, cpu: bool = False) -> ClusterIndex:
    """An empty index reading what the registered vendors read of a node (`cpu`: and its CPU, which a
    fragmentation workload naming CPU needs; without it the policy does not weigh CPU). Its class ids
    are its own: any engine can place over it."""
    return ClusterIndex(node_reads(registry, cpu=cpu))


def choose_devices(node: NodeState, request: PodRequest, mode: Mode = Mode.DEFAULT) -> DeviceChoice:
    """`Engine.choose_devices` by a fresh engine of the registered vendors."""
    return Engine().choose_devices(node, request, mode)


def place_gang(
    vendors: VendorRegistry,
    index: ClusterIndex,
    tree: NetworkTree,
    gang: GangRequest,
    mode: Mode = Mode.DEFAULT,
    *,
    workload: tuple[WorkloadClass, ...] = (),
    claims: GangClaims | None = None,
) -> GangDecision:
    """`Engine.place_gang` by a fresh engine of `vendors`."""
    return Engine(vendors).place_gang(index, tree, gang, mode, workload=workload, claims=claims)
