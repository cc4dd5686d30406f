"""One engine's node policies, made from the registered policy classes: read, resolved by mode.

A request carries its policy's name as the pod wrote it (`vendor.node_policy_name`); a
vendor's `parse_request` checks it (`check`), so a pod naming an unknown policy is refused
naming the annotation; the node loop and a vendor's search resolve it (`resolve`): in mode
hami, a policy HAMi knows is scored by HAMi's usage.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from engine.core.errors import RequestError
from engine.core.memo import Memo
from engine.core.model import Mode, WorkloadClass
from engine.node.policies.hami_usage import HamiUsage
from engine.node.policy import NodePolicy, PolicyClass
from engine.node.vendor import DEFAULT_NODE_POLICY, NODE_POLICY, DeviceRequest


class NodePolicies:
    """The policies of one engine, by name, in registration order."""

    def __init__(self, classes: Sequence[PolicyClass], memo: Memo) -> None:
        made = [policy(memo) for policy in classes]
        self.by_name: Mapping[str, NodePolicy] = {p.name: p for p in made}
        if len(self.by_name) != len(made):
            raise ValueError(f"a node policy is registered twice: {[p.name for p in made]}")
        if DEFAULT_NODE_POLICY not in self.by_name:
            raise ValueError(f"the default node policy {DEFAULT_NODE_POLICY!r} is not registered")
        self.hami: Mapping[str, NodePolicy] = {p.name: HamiUsage(p) for p in made if p.hami}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.by_name)

    def reads_workload(self, name: str | None) -> bool:
        """Whether the policy of that name (a cluster's setting; None: none) reads the workload."""
        found = self.by_name.get(name) if name is not None else None
        return found is not None and found.reads_workload

    def check(self, request: DeviceRequest) -> None:
        """RequestError naming the annotation when the request's policy is not registered."""
        self.named(request.node_policy)

    def named(self, name: str) -> NodePolicy:
        found = self.by_name.get(name)
        if found is None:
            names = list(self.by_name)
            listed = " or ".join(names) if len(names) <= 2 else f"{', '.join(names[:-1])} or {names[-1]}"
            raise RequestError(NODE_POLICY, f"must be {listed}, got {name!r}")
        return found

    def resolve(self, name: str, mode: Mode) -> NodePolicy:
        """The policy that scores a request in `mode`; RequestError for a policy mode hami does not know."""
        policy = self.named(name)
        if mode is Mode.HAMI:
            found = self.hami.get(name)
            if found is None:
                allowed = " or ".join(self.hami)
                raise RequestError(NODE_POLICY, f"{name!r} is not a HAMi policy (mode hami: {allowed})")
            return found
        return policy

    def with_workload(
        self, request: DeviceRequest, workload: tuple[WorkloadClass, ...], mode: Mode, cpu_milli: int | None = None
    ) -> DeviceRequest:
        """The request as its node policy reads it: with the cluster's workload classes and (`cpu_milli`, when
        the nodes' CPU is read) the pod's CPU, for a policy that reads the workload (so they are part of the
        answer tables' request key exactly when they can change an answer).

        Raises RequestError for a node policy that is not registered, or that mode hami does not know."""
        if self.resolve(request.node_policy, mode).reads_workload and workload:
            return msgspec.structs.replace(request, workload=workload, cpu_milli=cpu_milli)
        return request
