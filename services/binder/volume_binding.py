"""A pod's PersistentVolumeClaims bound on its node before its Binding: kube-scheduler's VolumeBinding PreBind.

An `Enforcer` (services/binder/enforcers/base.py) whose `before_binding` runs before every enforcement
path's, as kube's PreBind order has VolumeBinding before DynamicResources. For the placement's node,
against the binder's own watch (volume_watch.py), never a topic:

1. the pod's claims are checked again with the engine's volume rules (engine.decide.kube.volumes): a
   node they no longer allow is a conflict, and the placer plans the pod again;
2. each unbound claim gets its volume there (`binding_plan`): a static PersistentVolume is pre-bound
   to it (`spec.claimRef` with the claim's uid and `pv.kubernetes.io/bound-by-controller`, under the
   volume's resourceVersion, as kube's binder updates it), or the claim is annotated
   `volume.kubernetes.io/selected-node: <node>` for its provisioner;
3. the binder waits, woken by its watch, until every claim is Bound (`spec.volumeName` and
   `status.phase: Bound`), at most `bind_timeout_seconds` (kube's bindTimeout, 600 s by default);
   a claim whose provisioner gave up (it removed `selected-node`) ends the wait at once;
4. the bound volumes are checked against the node once more (trust nothing) before the Binding.

A wait that ends without every claim bound fails the binding with kube-scheduler's words: the pod
gets `PodScheduled=False, reason=SchedulerError` and goes back to the placer, which plans it again.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from engine.decide.kube.volumes import ClaimBinding, binding_plan, resolve_volumes, volume_failure
from schemas.events import BindingOutcome, PlacementEvent
from schemas.volumes import SELECTED_NODE
from services.binder.enforcers.base import ApiCall, Enforcer, NotBound
from services.binder.volume_watch import StorageWatch
from topoplace.kube_storage import PodVolumesObject

log = logging.getLogger(__name__)

_pod_volumes = msgspec.json.Decoder(PodVolumesObject)

MERGE_PATCH = "application/merge-patch+json"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
SCHEDULER_ERROR = "SchedulerError"  # v1.PodReasonSchedulerError: a PreBind plugin failed
PREBIND = 'running PreBind plugin "VolumeBinding"'
DEFAULT_BIND_TIMEOUT_SECONDS = 600.0


class VolumeBinder(Enforcer):
    """Binds a placement's claims on its node (see the module's text)."""

    def __init__(
        self,
        core: client.CoreV1Api,
        storage: StorageWatch,
        *,
        pod_claims: Callable[[str], tuple[str, ...] | None],
        node_labels: Callable[[str], Mapping[str, str] | None],
        bind_timeout_seconds: float = DEFAULT_BIND_TIMEOUT_SECONDS,
    ) -> None:
        """`pod_claims(uid)`: the claim names of the pod as the binder's watch has its spec (None: unknown);
        `node_labels(node)`: the Node's labels as the watch has them (None: no such node)."""
        self._core = core
        self._storage = storage
        self._pod_claims = pod_claims
        self._node_labels = node_labels
        self.bind_timeout_seconds = bind_timeout_seconds

    def applies(self, placement: PlacementEvent) -> bool:
        return True  # whether the pod mounts claims is known from the watch, in before_binding

    async def before_binding(self, placement: PlacementEvent, call: ApiCall) -> NotBound | None:
        """None when the pod mounts no claim, or every claim is bound on the placement's node."""
        names = self._pod_claims(placement.uid)
        if names is None:  # the watch lags behind the pod: its spec is read from the server
            names = await self._read_claims(placement, call)
        if not names:
            return None
        labels = self._node_labels(placement.node)
        if labels is None:
            return NotBound(outcome=BindingOutcome.CONFLICT, reason=f"node {placement.node} is not known")
        refused = self._check(placement, names, labels)
        if refused is not None:
            return refused
        rules = resolve_volumes(placement.namespace, names, self._storage.catalog())
        plan = binding_plan(rules, placement.node, labels)
        try:
            for binding in plan:
                await self._write(placement, binding, call)
        except ApiException as exc:
            if exc.status in (404, 409):
                what = "a claim or volume changed meanwhile"
                return NotBound(outcome=BindingOutcome.CONFLICT, reason=f"{PREBIND}: {what} ({exc.reason})")
            raise
        keys = tuple(f"{placement.namespace}/{name}" for name in names)
        provisioned = frozenset(b.claim for b in plan if not b.volume)
        settled = functools.partial(self._settled, keys, provisioned, set())
        if not await self._storage.wait_until(settled, self.bind_timeout_seconds):
            return _timed_out(placement, keys)
        given_up = [key for key in keys if not self._bound(key)]
        if given_up:
            reason = f"{PREBIND}: binding volumes: provisioning failed for PVC {', '.join(given_up)}"
            return NotBound(outcome=BindingOutcome.FAILED, reason=reason, condition=SCHEDULER_ERROR)
        return self._check(placement, names, labels)  # what was bound must fit the node too

    async def _read_claims(self, placement: PlacementEvent, call: ApiCall) -> tuple[str, ...]:
        """The pod's claim names as the server has them; none for a pod gone or replaced under its name
        (its Binding's uid precondition then refuses it, as for any pod)."""
        read = functools.partial(
            self._core.read_namespaced_pod, placement.name, placement.namespace, _preload_content=False
        )
        try:
            pod = _pod_volumes.decode(await call("read pod", read))
        except ApiException as exc:
            if exc.status == 404:
                return ()
            raise
        if pod.metadata.uid != placement.uid:
            return ()
        return pod.claim_names()

    def _check(self, placement: PlacementEvent, names: tuple[str, ...], labels: Mapping[str, str]) -> NotBound | None:
        rules = resolve_volumes(placement.namespace, names, self._storage.catalog())
        failure = volume_failure(rules, placement.node, labels)
        if failure is None:
            return None
        plugin, reasons = failure
        reason = f"{plugin}: node {placement.node}: {', '.join(reasons)}"
        return NotBound(outcome=BindingOutcome.CONFLICT, reason=reason)

    async def _write(self, placement: PlacementEvent, binding: ClaimBinding, call: ApiCall) -> None:
        claim = self._storage.claim(binding.claim)
        if claim is None:
            raise ApiException(status=404, reason=f"PersistentVolumeClaim {binding.claim} is gone")
        meta = claim.metadata
        if binding.volume:
            volume = self._storage.volume(binding.volume)
            if volume is None:
                raise ApiException(status=404, reason=f"PersistentVolume {binding.volume} is gone")
            ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": meta.namespace, "name": meta.name}
            body = {
                "metadata": {
                    "resourceVersion": volume.metadata.resource_version,  # the volume as checked, or 409
                    "annotations": {BOUND_BY_CONTROLLER: "yes"},
                },
                "spec": {"claimRef": {**ref, "uid": meta.uid, "resourceVersion": meta.resource_version}},
            }
            patch: Callable[..., Awaitable[Any]] = functools.partial(
                self._core.patch_persistent_volume, binding.volume, body
            )
            operation = "pre-bind persistent volume"
        elif meta.annotations.get(SELECTED_NODE) == placement.node:
            return  # asked already (an earlier try of this placement)
        else:
            body = {"metadata": {"uid": meta.uid, "annotations": {SELECTED_NODE: placement.node}}}
            patch = functools.partial(
                self._core.patch_namespaced_persistent_volume_claim, meta.name, meta.namespace, body
            )
            operation = "select node of claim"
        await call(
            operation,
            functools.partial(patch, _content_type=MERGE_PATCH, _preload_content=False),
        )
        log.info(
            "binder.volume_requested",
            extra={"fields": {"claim": binding.claim, "volume": binding.volume, "node": placement.node}},
        )

    def _bound(self, key: str) -> bool:
        claim = self._storage.claim(key)
        return claim is not None and claim.bound

    def _settled(self, keys: tuple[str, ...], provisioned: frozenset[str], asked: set[str]) -> bool:
        """Every claim bound, or one gone, or one whose provisioner gave up: the watch showed it with our
        selected-node (`asked` remembers which), then without it."""
        for key in keys:
            claim = self._storage.claim(key)
            if claim is None:
                return True
            if claim.bound:
                continue
            if key in provisioned:
                if SELECTED_NODE in claim.metadata.annotations:
                    asked.add(key)
                elif key in asked:
                    return True
            return False
        return True


def _timed_out(placement: PlacementEvent, keys: tuple[str, ...]) -> NotBound:
    log.warning(
        "binder.volumes_not_bound",
        extra={"fields": {"pod": f"{placement.namespace}/{placement.name}", "claims": list(keys)}},
    )
    reason = f"{PREBIND}: binding volumes: context deadline exceeded"
    return NotBound(outcome=BindingOutcome.FAILED, reason=reason, condition=SCHEDULER_ERROR)
