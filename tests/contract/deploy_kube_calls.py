"""The Kubernetes API calls the code makes, found in its source, as RBAC permissions.

Every attribute that names a method of a kubernetes-asyncio API class
(CoreV1Api.patch_namespaced_pod, CustomObjectsApi.list_cluster_custom_object
...) counts as a call, whether it is called or handed over (to
functools.partial, to topoplace.informer's Informer). A method handed to Informer
is listed and then watched, so it needs `watch` too. Each method maps to its
permissions through one small explicit table: a method missing from it fails
the tests, so a new call cannot slip past the RBAC check.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kubernetes_asyncio import client

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("services", "topoplace")


@dataclass(frozen=True)
class Permission:
    group: str  # "" for the core group
    resource: str  # with its subresource: "pods/binding"
    verb: str

    def __str__(self) -> str:
        return f"{self.verb} {self.resource}" + (f".{self.group}" if self.group else "")


@dataclass(frozen=True)
class KubeCall:
    module: str
    line: int
    method: str
    permissions: tuple[Permission, ...]


CORE, DRA, COORDINATION, APPS = "", "resource.k8s.io", "coordination.k8s.io", "apps"
STORAGE = "storage.k8s.io"

# Typed methods -> (group, resource, verb). Only the methods the code uses (the test says which is missing).
METHODS: dict[str, tuple[str, str, str]] = {
    "list_pod_for_all_namespaces": (CORE, "pods", "list"),
    "list_namespaced_pod": (CORE, "pods", "list"),
    "read_namespaced_pod": (CORE, "pods", "get"),
    "create_namespaced_pod": (CORE, "pods", "create"),
    "patch_namespaced_pod": (CORE, "pods", "patch"),
    "patch_namespaced_pod_status": (CORE, "pods/status", "patch"),
    "create_namespaced_pod_binding": (CORE, "pods/binding", "create"),
    "create_namespaced_event": (CORE, "events", "create"),
    "patch_namespaced_event": (CORE, "events", "patch"),
    "list_node": (CORE, "nodes", "list"),
    "list_namespace": (CORE, "namespaces", "list"),
    "list_service_for_all_namespaces": (CORE, "services", "list"),
    "list_replication_controller_for_all_namespaces": (CORE, "replicationcontrollers", "list"),
    "list_replica_set_for_all_namespaces": (APPS, "replicasets", "list"),
    "list_stateful_set_for_all_namespaces": (APPS, "statefulsets", "list"),
    "read_node": (CORE, "nodes", "get"),
    "create_node": (CORE, "nodes", "create"),
    "patch_node": (CORE, "nodes", "patch"),
    "list_resource_slice": (DRA, "resourceslices", "list"),
    "create_resource_slice": (DRA, "resourceslices", "create"),
    "create_namespaced_resource_claim_template": (DRA, "resourceclaimtemplates", "create"),
    "list_device_class": (DRA, "deviceclasses", "list"),
    "create_device_class": (DRA, "deviceclasses", "create"),
    "list_resource_claim_for_all_namespaces": (DRA, "resourceclaims", "list"),
    "read_namespaced_resource_claim": (DRA, "resourceclaims", "get"),
    "list_namespaced_resource_claim": (DRA, "resourceclaims", "list"),
    "create_namespaced_resource_claim": (DRA, "resourceclaims", "create"),
    "delete_namespaced_resource_claim": (DRA, "resourceclaims", "delete"),
    "patch_namespaced_resource_claim": (DRA, "resourceclaims", "patch"),
    "replace_namespaced_resource_claim": (DRA, "resourceclaims", "update"),
    "patch_namespaced_resource_claim_status": (DRA, "resourceclaims/status", "patch"),
    "replace_namespaced_resource_claim_status": (DRA, "resourceclaims/status", "update"),
    "list_resource_claim_template_for_all_namespaces": (DRA, "resourceclaimtemplates", "list"),
    "patch_namespaced_lease": (COORDINATION, "leases", "patch"),
    "list_persistent_volume_claim_for_all_namespaces": (CORE, "persistentvolumeclaims", "list"),
    "patch_namespaced_persistent_volume_claim": (CORE, "persistentvolumeclaims", "patch"),
    "list_persistent_volume": (CORE, "persistentvolumes", "list"),
    "patch_persistent_volume": (CORE, "persistentvolumes", "patch"),
    "list_storage_class": (STORAGE, "storageclasses", "list"),
    "list_csi_node": (STORAGE, "csinodes", "list"),
    "list_pod_disruption_budget_for_all_namespaces": ("policy", "poddisruptionbudgets", "list"),
    "delete_namespaced_pod": (CORE, "pods", "delete"),
}
# Library classes that call the API on our behalf: naming one counts as making its calls.
LIBRARY_CALLS: dict[str, tuple[tuple[str, str, str], ...]] = {
    # kubernetes-asyncio's leader election: reads, creates and renews (replaces) its Lease.
    "LeaseLock": (
        (COORDINATION, "leases", "get"),
        (COORDINATION, "leases", "create"),
        (COORDINATION, "leases", "update"),
    ),
}
# CustomObjectsApi methods -> (verb, position of `plural` among the arguments); group is argument 0.
CUSTOM_METHODS: dict[str, tuple[str, int]] = {
    "list_cluster_custom_object": ("list", 2),
    "get_cluster_custom_object": ("get", 3),
    "create_cluster_custom_object": ("create", 2),
    "patch_cluster_custom_object": ("patch", 2),
    "list_namespaced_custom_object": ("list", 3),
    "create_namespaced_custom_object": ("create", 3),
    "get_namespaced_custom_object": ("get", 4),
    "patch_namespaced_custom_object": ("patch", 3),
    "patch_namespaced_custom_object_status": ("patch", 3),
}
# The helper that lists, then watches from that version (every service's: topoplace.informer), and
# the cluster watcher's rows of watched kinds, each of whose list calls an Informer lists and watches with.
LIST_WATCH = frozenset({"Informer", "WatchedKind"})


def api_method_names() -> frozenset[str]:
    """Every public method of every kubernetes-asyncio API class."""
    names: set[str] = set()
    for name, cls in inspect.getmembers(client, inspect.isclass):
        if name.endswith("Api"):
            names |= {m for m in vars(cls) if not m.startswith("_") and not m.endswith("_with_http_info")}
    return frozenset(names)


def scan(root: Path = ROOT) -> Iterator[KubeCall]:
    methods = api_method_names()
    for package in SCANNED:
        for path in sorted((root / package).rglob("*.py")):
            module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
            yield from _calls_in(module, ast.parse(path.read_text(), str(path)), methods)


def _calls_in(module: str, tree: ast.Module, methods: frozenset[str]) -> Iterator[KubeCall]:
    watched = {id(node) for call in ast.walk(tree) if _is_list_watch(call) for node in ast.walk(call)}
    handed: dict[int, list[ast.expr]] = {}  # attribute -> the arguments that follow it
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute):
                handed.setdefault(id(node.func), node.args)
            if node.args and isinstance(node.args[0], ast.Attribute) and _name(node.func) == "partial":
                handed[id(node.args[0])] = node.args[1:]
    our_modules = _our_module_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in LIBRARY_CALLS:
            permissions = tuple(Permission(*p) for p in LIBRARY_CALLS[node.id])
            yield KubeCall(module=module, line=node.lineno, method=node.id, permissions=permissions)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or node.attr not in methods:
            continue
        if isinstance(node.value, ast.Name) and node.value.id in our_modules:
            continue  # a function of one of our modules that shares a name (nvml_source.read_node)
        permissions = list(_permissions(module, node.attr, handed.get(id(node), []), node.lineno))
        if id(node) in watched:
            permissions += [Permission(p.group, p.resource, "watch") for p in permissions if p.verb == "list"]
        yield KubeCall(module=module, line=node.lineno, method=node.attr, permissions=tuple(permissions))


def _our_module_names(tree: ast.Module) -> set[str]:
    """Names bound to modules of our packages by the imports of a file."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in SCANNED:
            for alias in node.names:
                if _is_our_module(f"{node.module}.{alias.name}"):
                    names.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            names |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] in SCANNED}
    return names


def _is_our_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _permissions(module: str, method: str, args: list[ast.expr], line: int) -> Iterator[Permission]:
    if method in METHODS:
        yield Permission(*METHODS[method])
        return
    if method in CUSTOM_METHODS:
        verb, plural_at = CUSTOM_METHODS[method]
        if len(args) <= plural_at:
            raise LookupError(f"{module}:{line}: {method} without group and plural as positional arguments")
        group = _constant(module, args[0])
        plural = _constant(module, args[plural_at])
        yield Permission(group, plural, verb)
        return
    raise LookupError(
        f"{module}:{line}: {method} is a Kubernetes API method missing from tests/contract/deploy_kube_calls.py's "
        "table: add what it needs (group, resource, verb) there and to the RBAC of the service that calls it"
    )


def _constant(module: str, expr: ast.expr) -> str:
    """A string literal, or a module-level name bound to one."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, ast.Name):
        value = getattr(importlib.import_module(module), expr.id, None)
        if isinstance(value, str):
            return value
    raise LookupError(f"{module}: {ast.unparse(expr)} is not a string this scan can resolve")


def _is_list_watch(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and _name(node.func) in LIST_WATCH


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Subscript):  # a generic's parameters: WatchedKind[Pod](...)
        return _name(func.value)
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""
