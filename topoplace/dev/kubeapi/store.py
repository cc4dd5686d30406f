"""The object store: objects by key, one global resourceVersion, a bounded change log, watchers.

Every write is synchronous (no await inside), so on one event loop a list and the
watch that follows it cannot miss a change: the log is appended and the watchers
are fed in the same step as the object changes.
"""

from __future__ import annotations

import copy
import random
import time
import uuid
from collections import deque
from typing import Any, Protocol

import msgspec

from topoplace.dev.kubeapi import patches, resources, validation
from topoplace.dev.kubeapi.changes import ADDED, DELETED, MODIFIED, Change, Changes, Object, Subscription
from topoplace.dev.kubeapi.errors import (
    ApiError,
    already_exists,
    bad_request,
    conflict,
    gone,
    invalid,
    not_found,
    stale_version,
    uid_precondition_failed,
)
from topoplace.dev.kubeapi.priority import admit_priority
from topoplace.dev.kubeapi.resources import ResourceType
from topoplace.dev.kubeapi.selectors import Selector

_NAME_SUFFIX_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet kube's generateName uses
_encoder = msgspec.json.Encoder()
Objects = list[Object]  # an alias: inside ObjectStore, `list` names its method
ObjectKey = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped


class Controller(Protocol):
    """What kube-controller-manager would do, run in the same step as each committed change.

    It may write through the store (its writes are changes too, committed after this one);
    it must not raise: a failure is the controller's to remember and retry.
    """

    def on_change(self, store: ObjectStore, change: Change) -> None: ...


def _clone(obj: Any) -> Any:
    """A deep copy of a JSON value; a msgspec round trip is several times faster than copy.deepcopy."""
    return msgspec.json.decode(_encoder.encode(obj))


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _rtype(resource: ResourceType | str) -> ResourceType:
    if isinstance(resource, ResourceType):
        return resource
    try:
        return resources.BY_KEY[resource]
    except KeyError:
        raise ValueError(f"resource: unknown resource type {resource!r}; known: {sorted(resources.BY_KEY)}") from None


class ObjectStore:
    def __init__(self, *, log_size: int = 10_000, watch_buffer: int = 10_000) -> None:
        self._objects: dict[str, dict[ObjectKey, Object]] = {r.key: {} for r in resources.ALL}
        self._revision = 0
        self._log: deque[Change] = deque(maxlen=log_size)
        self._compacted_through = 0  # changes up to this revision are no longer in the log
        self._subscriptions: dict[str, set[Subscription]] = {r.key: set() for r in resources.ALL}
        self._watch_buffer = watch_buffer
        self._controllers: list[Controller] = []

    def add_controller(self, controller: Controller) -> None:
        self._controllers.append(controller)

    @property
    def revision(self) -> int:
        return self._revision

    # --- reads ----------------------------------------------------------------------------------

    def get(self, resource: ResourceType | str, name: str, namespace: str | None = None) -> Object:
        rtype = _rtype(resource)
        obj = self._objects[rtype.key].get(self._key(rtype, namespace, name))
        if obj is None:
            raise not_found(rtype.plural, name)
        return obj

    def list(
        self, resource: ResourceType | str, namespace: str | None = None, selector: Selector | None = None
    ) -> tuple[Objects, int]:
        """Matching objects (namespace None = all namespaces) and the revision they were read at."""
        rtype = _rtype(resource)
        items = [
            obj
            for key, obj in sorted(self._objects[rtype.key].items())  # by namespace, then name, as etcd keys sort
            if (namespace is None or key[0] == namespace) and (selector is None or selector.matches(obj))
        ]
        return items, self._revision

    # --- writes ---------------------------------------------------------------------------------

    def create(self, resource: ResourceType | str, obj: Object, *, namespace: str | None = None) -> Object:
        rtype = _rtype(resource)
        obj = _clone(obj)
        if not isinstance(obj, dict):
            raise bad_request("the body must be a JSON object")
        if obj.get("kind", rtype.kind) != rtype.kind:
            raise bad_request(f'{obj["kind"]} in version "{rtype.version}" cannot be handled as a {rtype.kind}')
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        ns = self._namespace_of(rtype, namespace, meta)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self._generated_name(rtype, ns, meta["generateName"])
        validation.check_name(rtype, meta.get("name", ""))
        key = (ns, meta["name"])
        if key in self._objects[rtype.key]:
            raise already_exists(rtype.plural, meta["name"])
        if rtype.namespaced:
            meta["namespace"] = ns
        obj["kind"], obj["apiVersion"] = rtype.kind, rtype.api_version
        now = _now()
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now
        meta.pop("deletionTimestamp", None)
        validation.validate(rtype, obj)
        if rtype is resources.PODS:
            admit_priority(obj, list(self._objects[resources.PRIORITYCLASSES.key].values()))
        validation.prepare_create(rtype, obj, now)
        return self._commit(rtype, key, ADDED, obj, None)

    def replace(
        self,
        resource: ResourceType | str,
        name: str,
        obj: Object,
        *,
        namespace: str | None = None,
        status_only: bool = False,
    ) -> Object:
        rtype = _rtype(resource)
        obj = _clone(obj)
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata", {}), dict):
            raise bad_request("the body must be a JSON object with object metadata")
        meta = obj.setdefault("metadata", {})
        if meta.get("name") and meta["name"] != name:
            raise bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL ({name})")
        meta["name"] = name
        if rtype.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        old = self.get(rtype, name, namespace)
        # A PUT body's uid is a precondition, checked first, as the real server's storage checks it
        # (storage.Preconditions from rest.DefaultUpdatedObjectInfo): 409, not a silent overwrite.
        if meta.get("uid") and meta["uid"] != old["metadata"]["uid"]:
            raise uid_precondition_failed(rtype.plural, name, meta["uid"], old["metadata"]["uid"])
        if meta.get("resourceVersion") and meta["resourceVersion"] != old["metadata"]["resourceVersion"]:
            raise stale_version(rtype.plural, name)
        return self._update(rtype, old, obj, status_only)

    def patch(
        self,
        resource: ResourceType | str,
        name: str,
        content_type: str,
        body: Any,
        *,
        namespace: str | None = None,
        status_only: bool = False,
    ) -> Object:
        rtype = _rtype(resource)
        if rtype.custom and content_type.split(";")[0].strip().lower() == patches.STRATEGIC:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{patches.JSON_PATCH}, {patches.MERGE}, application/apply-patch+yaml",
            )
        old = self.get(rtype, name, namespace)
        new = patches.apply_patch(content_type, old, body)
        meta = new.get("metadata")
        if not isinstance(meta, dict):
            raise invalid(rtype.kind, name, "metadata", "Required value")
        if meta.get("name") != name:
            raise invalid(rtype.kind, name, "metadata.name", "Invalid value: field is immutable")
        # A uid in a patch is checked as the real server checks it: a PATCH carries no storage
        # precondition, but rest.BeforeUpdate validates metadata.uid as immutable (422), so a patch
        # meant for a pod that was deleted and re-created under its name changes nothing.
        if meta.get("uid") and meta["uid"] != old["metadata"]["uid"]:
            raise invalid(rtype.kind, name, "metadata.uid", f'Invalid value: "{meta["uid"]}": field is immutable')
        # a resourceVersion inside the patch is a precondition, as on the real server
        if meta.get("resourceVersion") != old["metadata"]["resourceVersion"]:
            raise stale_version(rtype.plural, name)
        return self._update(rtype, old, new, status_only)

    def delete(
        self, resource: ResourceType | str, name: str, *, namespace: str | None = None, uid: str | None = None
    ) -> Object:
        """Remove the object, or, while it has finalizers, mark it with a deletionTimestamp (MODIFIED);
        it goes when an update empties its finalizers. No grace period otherwise (the simulated kubelet
        stops a pod at once). `uid`: DeleteOptions.preconditions.uid, checked as storage checks it."""
        rtype = _rtype(resource)
        key = self._key(rtype, namespace, name)
        old = self._objects[rtype.key].get(key)
        if old is None:
            raise not_found(rtype.plural, name)
        if uid is not None and uid != old["metadata"]["uid"]:
            raise uid_precondition_failed(rtype.plural, name, uid, old["metadata"]["uid"])
        if old["metadata"].get("finalizers"):
            if old["metadata"].get("deletionTimestamp"):
                return old  # already being deleted: nothing changes
            marked = copy.copy(old)
            marked["metadata"] = {**old["metadata"], "deletionTimestamp": _now(), "deletionGracePeriodSeconds": 0}
            return self._commit(rtype, key, MODIFIED, marked, old)
        gone_obj = copy.copy(old)
        gone_obj["metadata"] = dict(old["metadata"])
        return self._commit(rtype, key, DELETED, gone_obj, old)

    def delete_collection(
        self, resource: ResourceType | str, namespace: str | None = None, selector: Selector | None = None
    ) -> Objects:
        rtype = _rtype(resource)
        items, _ = self.list(rtype, namespace, selector)
        return [self.delete(rtype, o["metadata"]["name"], namespace=o["metadata"].get("namespace")) for o in items]

    def bind(self, namespace: str, name: str, binding: Object) -> Object:
        """pods/binding: assign a pending pod to a node, with the real server's checks and errors."""
        if not isinstance(binding, dict):
            raise bad_request("the body must be a JSON object")
        meta = binding.get("metadata") or {}
        target = binding.get("target") or {}
        if meta.get("name") and meta["name"] != name:
            raise bad_request("name in URL does not match name in Binding object")
        node = target.get("name") if isinstance(target, dict) else None
        if not node:
            raise invalid("Binding", name, "target.name", "Required value")
        pod = self.get(resources.PODS, name, namespace)
        if meta.get("uid") and meta["uid"] != pod["metadata"]["uid"]:
            raise uid_precondition_failed("pods", name, meta["uid"], pod["metadata"]["uid"])
        if meta.get("resourceVersion") and meta["resourceVersion"] != pod["metadata"]["resourceVersion"]:
            raise stale_version("pods", name)
        if pod["metadata"].get("deletionTimestamp"):
            raise conflict("pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
        current = (pod.get("spec") or {}).get("nodeName")
        if current:
            raise conflict("pods/binding", name, f'pod {name} is already assigned to node "{current}"')
        if (pod.get("spec") or {}).get("schedulingGates"):
            raise conflict("pods/binding", name, f"pod {name} has non-empty .spec.schedulingGates")
        new = _clone(pod)
        new["spec"]["nodeName"] = node
        (new.get("status") or {}).pop("nominatedNodeName", None)  # a stale hint once bound
        if meta.get("annotations"):
            new["metadata"].setdefault("annotations", {}).update(meta["annotations"])
        new["status"] = validation.running_status(new.get("status") or {}, _now())
        return self._commit(resources.PODS, (namespace, name), MODIFIED, new, pod)

    # --- watch ----------------------------------------------------------------------------------

    def subscribe(
        self, resource: ResourceType | str, namespace: str | None, since: int | None
    ) -> tuple[Changes, Subscription]:
        """Changes after `since` (None: the current objects as ADDED) and an inbox for later ones.

        Raises 410 Gone when `since` is older than the log keeps.
        """
        rtype = _rtype(resource)
        if since is None:
            items, rev = self.list(rtype, namespace)
            initial = [
                Change(
                    revision=rev, type=ADDED, resource=rtype.key, namespace=o["metadata"].get("namespace", ""), obj=o
                )
                for o in items
            ]
        else:
            if since < self._compacted_through:
                raise gone(f"too old resource version: {since} ({self._compacted_through + 1})")
            initial = []
            for change in reversed(self._log):
                if change.revision <= since:
                    break
                if change.resource == rtype.key and (namespace is None or change.namespace == namespace):
                    initial.append(change)
            initial.reverse()
        sub = Subscription(rtype.key, namespace, self._watch_buffer)
        self._subscriptions[rtype.key].add(sub)
        return initial, sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._subscriptions[sub.resource].discard(sub)

    def compact(self) -> None:
        """Forget the change log, as an etcd compaction does: watches from before now get 410 Gone."""
        self._compacted_through = self._revision
        self._log.clear()

    def close_watches(self) -> None:
        for subs in self._subscriptions.values():
            for sub in subs:
                sub.close()
            subs.clear()

    # --- internals ------------------------------------------------------------------------------

    def _update(self, rtype: ResourceType, old: Object, new: Object, status_only: bool) -> Object:
        if status_only:
            new = {**old, "status": new.get("status")}
            new["metadata"] = dict(old["metadata"])
            validation.check_status_update(rtype, old, new)
        else:
            meta = new["metadata"] = dict(new["metadata"])  # never write into the old object's metadata
            for field in ("uid", "creationTimestamp", "namespace", "deletionTimestamp"):
                if field in old["metadata"]:
                    meta[field] = old["metadata"][field]
            new["kind"], new["apiVersion"] = rtype.kind, rtype.api_version
            if rtype.has_status:
                # the main resource ignores status writes; /status is the way to change it
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            validation.validate(rtype, new)
            validation.check_update(rtype, old, new)
        key = self._key(rtype, old["metadata"].get("namespace"), old["metadata"]["name"])
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            return self._commit(rtype, key, DELETED, new, old)  # the last finalizer went: the object goes
        return self._commit(rtype, key, MODIFIED, new, old)

    def _commit(self, rtype: ResourceType, key: ObjectKey, kind: str, obj: Object, old: Object | None) -> Object:
        self._revision += 1
        obj["metadata"]["resourceVersion"] = str(self._revision)
        if kind == DELETED:
            del self._objects[rtype.key][key]
        else:
            self._objects[rtype.key][key] = obj
        if len(self._log) == self._log.maxlen:
            self._compacted_through = self._log[0].revision
        change = Change(revision=self._revision, type=kind, resource=rtype.key, namespace=key[0], obj=obj, old=old)
        self._log.append(change)
        for sub in self._subscriptions[rtype.key]:
            sub.offer(change)
        for controller in self._controllers:
            controller.on_change(self, change)
        return obj

    def _key(self, rtype: ResourceType, namespace: str | None, name: str) -> ObjectKey:
        return ((namespace or "default") if rtype.namespaced else "", name)

    def _namespace_of(self, rtype: ResourceType, namespace: str | None, meta: Object) -> str:
        if not rtype.namespaced:
            return ""
        given = meta.get("namespace")
        if namespace and given and given != namespace:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        return namespace or given or "default"

    def _generated_name(self, rtype: ResourceType, namespace: str, prefix: str) -> str:
        while True:
            name = prefix + "".join(random.choices(_NAME_SUFFIX_CHARS, k=5))
            if (namespace, name) not in self._objects[rtype.key]:
                return name
