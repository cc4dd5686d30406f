"""deploy/kubernetes: valid objects of a current Kubernetes, settings the code reads, RBAC that fits the code."""

from __future__ import annotations

import re
import tomllib
from collections import defaultdict
from typing import Any

import deploy_kube_calls as kube_calls
import deploy_manifests as manifests
import grimp
import kubernetes_validate
import pytest
from deploy_kube_calls import KubeCall, Permission
from kubernetes_validate import utils as kv_utils

from topoplace import config
from topoplace.cli import build_parser

OBJECTS = manifests.render()
WORKLOADS = manifests.workloads(OBJECTS)
NAMESPACE = "topoplace"

# Which code a workload runs: its command, as `topoplace <args>`, -> the service's entry module.
ENTRY_MODULES: dict[tuple[str, ...], str] = {
    ("collector", "node"): "services.collector.node_agent",
    ("collector", "cluster"): "services.collector.cluster_watcher",
    ("placer",): "services.placer.service",
    ("binder",): "services.binder.service",
}
# Modules that call the API but run in no deployed service: demo and test-cluster tools.
NOT_DEPLOYED = ("topoplace.demo", "topoplace.commands.workload")
# Permissions granted ahead of the code that will use them (the tests fail on any other grant
# that no call needs): the placer and binder are about to read gangs, the network tree and DRA
# objects, allocate ResourceClaims and take HAMi's node lock.
_SCHEDULING_READS = [
    Permission(group, resource, verb)
    for group, resources in (
        ("topology.volcano.sh", ("hypernodes",)),
        ("scheduling.volcano.sh", ("podgroups",)),
        ("kueue.x-k8s.io", ("topologies",)),
        ("resource.k8s.io", ("resourceslices", "resourceclaims", "deviceclasses", "resourceclaimtemplates")),
    )
    for resource in resources
    for verb in ("list", "watch")
]
PLANNED: dict[str, list[Permission]] = {
    "topoplace-cluster-watcher": _SCHEDULING_READS,
    "topoplace-placer": _SCHEDULING_READS,
    "topoplace-binder": [
        Permission("", "pods/status", "patch"),
        Permission("", "nodes", "patch"),
        Permission("resource.k8s.io", "resourceclaims", "get"),
        Permission("resource.k8s.io", "resourceclaims", "update"),
        Permission("resource.k8s.io", "resourceclaims", "patch"),
        Permission("resource.k8s.io", "resourceclaims/status", "update"),
        Permission("resource.k8s.io", "resourceclaims/status", "patch"),
    ],
}
# Variables set for the container runtime, not for topoplace.
RUNTIME_VARIABLES = {"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"}


def kubernetes_version() -> str:
    """The newest Kubernetes release whose schemas kubernetes-validate ships."""
    return str(kv_utils.latest_version())


def name_of(obj: dict[str, Any]) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


# --- the objects are what a current API server accepts ------------------------------------------


@pytest.mark.parametrize("obj", OBJECTS, ids=name_of)
def test_every_object_is_valid_against_the_kubernetes_openapi_schema(obj: dict[str, Any]) -> None:
    version = kubernetes_version()
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        pytest.skip(f"{name_of(obj)}: kubernetes-validate has no schema for {obj['apiVersion']} in {version}")


def test_the_validator_rejects_a_broken_object() -> None:
    # So that the test above can fail: an unknown field and a port that is not a number.
    broken = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "x", "namespace": NAMESPACE, "colour": "red"},
        "spec": {"ports": [{"port": "http"}]},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, kubernetes_version(), strict=True)


def test_the_kustomization_lists_every_manifest_file() -> None:
    listed = set(manifests.kustomization()["resources"])
    on_disk = {p.name for p in manifests.KUSTOMIZE_DIR.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk


def test_namespaced_objects_live_in_the_namespace() -> None:
    cluster_scoped = {"Namespace", "PriorityClass", "ClusterRole", "ClusterRoleBinding"}
    for obj in OBJECTS:
        if obj["kind"] in cluster_scoped:
            assert "namespace" not in obj["metadata"], name_of(obj)
        else:
            assert obj["metadata"].get("namespace") == NAMESPACE, name_of(obj)
    assert [o["metadata"]["name"] for o in manifests.of_kind(OBJECTS, "Namespace")] == [NAMESPACE]


# --- the workloads ----------------------------------------------------------------------------------


def test_each_service_runs_as_its_kind() -> None:
    kinds = {tuple(c["args"][:2]): w["kind"] for w in WORKLOADS for c in manifests.containers(w)}
    assert kinds == {
        ("collector", "node"): "DaemonSet",
        ("collector", "cluster"): "Deployment",
        ("placer",): "Deployment",
        ("binder",): "Deployment",
    }


@pytest.mark.parametrize("workload", WORKLOADS, ids=name_of)
def test_every_command_is_a_real_topoplace_subcommand(workload: dict[str, Any]) -> None:
    for container in manifests.containers(workload):
        args = build_parser().parse_args(container["args"])
        assert callable(args.func)


@pytest.mark.parametrize("workload", WORKLOADS, ids=name_of)
def test_probes_and_metrics_port_are_the_health_server(workload: dict[str, Any]) -> None:
    settings = config_map_settings()
    for container in manifests.containers(workload):
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports == {"metrics": settings.health_port}
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}


@pytest.mark.parametrize("workload", WORKLOADS, ids=name_of)
def test_images_are_pinned_to_the_package_version(workload: dict[str, Any]) -> None:
    version = tomllib.loads((manifests.ROOT / "pyproject.toml").read_text())["project"]["version"]
    for container in manifests.containers(workload):
        assert container["image"] == f"topoplace:{version}"


def test_the_node_agent_reads_nvml_on_gpu_nodes_with_its_node_name_from_the_downward_api() -> None:
    (agent,) = manifests.of_kind(OBJECTS, "DaemonSet")
    pod = agent["spec"]["template"]["spec"]
    assert pod["runtimeClassName"] == "nvidia"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    (container,) = pod["containers"]
    args = container["args"]
    assert args[args.index("--source") + 1] == "nvml"
    node_var = re.fullmatch(r"\$\((\w+)\)", args[args.index("--node") + 1])
    assert node_var is not None
    env = {e["name"]: e for e in container["env"]}
    assert env[node_var.group(1)]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}


# --- settings -----------------------------------------------------------------------------------------


def config_map_settings() -> config.Settings:
    (settings,) = [o for o in manifests.of_kind(OBJECTS, "ConfigMap") if o["metadata"]["name"] == "topoplace-settings"]
    return config.Settings.from_env({k: str(v) for k, v in settings["data"].items()})


def test_the_settings_config_map_holds_only_variables_the_configuration_reads() -> None:
    (settings,) = manifests.of_kind(OBJECTS, "ConfigMap")
    assert sorted(set(settings["data"]) - set(config.ENV_VARS)) == []
    parsed = config_map_settings()  # and the values parse: a typo fails here, not in a pod
    assert parsed.kafka_bootstrap and parsed.otlp_endpoint and parsed.health_port


@pytest.mark.parametrize("workload", WORKLOADS, ids=name_of)
def test_every_environment_variable_is_read_by_the_configuration(workload: dict[str, Any]) -> None:
    config_maps = {o["metadata"]["name"] for o in manifests.of_kind(OBJECTS, "ConfigMap")}
    for container in manifests.containers(workload):
        for source in container.get("envFrom", []):
            assert set(source) == {"configMapRef"} and source["configMapRef"]["name"] in config_maps
        # A variable outside the configuration is allowed only as $(NAME) in the arguments
        # (the downward API into the command line) or for the container runtime.
        in_args = {m for arg in container.get("args", []) for m in re.findall(r"\$\((\w+)\)", arg)}
        names = {e["name"] for e in container.get("env", [])}
        assert sorted(names - set(config.ENV_VARS) - in_args - RUNTIME_VARIABLES) == []


# --- RBAC: exactly what the code calls, for the service that calls it ---------------------------------


CALLS: list[KubeCall] = list(kube_calls.scan())


def components() -> dict[str, str]:
    """ServiceAccount -> the entry module of the service its workload runs."""
    found: dict[str, str] = {}
    for workload in WORKLOADS:
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        command = next(k for k in ENTRY_MODULES if tuple(container["args"][: len(k)]) == k)
        found[manifests.service_account(workload)] = ENTRY_MODULES[command]
    return found


def needed_by_account() -> dict[str, set[Permission]]:
    graph = grimp.build_graph("services", "topoplace", "schemas")
    needed: dict[str, set[Permission]] = defaultdict(set)
    for account, entry in components().items():
        modules = graph.find_upstream_modules(entry) | {entry}
        needed[account] = {p for call in CALLS if call.module in modules for p in call.permissions}
    return needed


def granted(account: str) -> set[Permission]:
    return {
        Permission(group, resource, verb)
        for rule in manifests.rules_of(OBJECTS, NAMESPACE, account)
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_scan_finds_the_calls_the_services_make() -> None:
    # If the scan went blind (a renamed wrapper, a moved module), the coverage test would pass on nothing.
    needed = needed_by_account()
    assert Permission("", "pods/binding", "create") in needed["topoplace-binder"]
    assert Permission("", "pods", "watch") in needed["topoplace-cluster-watcher"]
    assert Permission("topology.volcano.sh", "hypernodes", "list") in needed["topoplace-cluster-watcher"]


def test_every_api_call_is_made_by_a_deployed_service_or_a_demo_tool() -> None:
    graph = grimp.build_graph("services", "topoplace", "schemas")
    deployed = set().union(*(graph.find_upstream_modules(e) | {e} for e in ENTRY_MODULES.values()))
    stray = [
        f"{c.module}:{c.line} {c.method}"
        for c in CALLS
        if c.module not in deployed and not c.module.startswith(NOT_DEPLOYED)
    ]
    assert stray == []


@pytest.mark.parametrize("account", sorted({manifests.service_account(w) for w in WORKLOADS}))
def test_rbac_covers_every_call_of_the_service(account: str) -> None:
    missing = sorted(str(p) for p in needed_by_account()[account] - granted(account))
    assert missing == [], f"{account} lacks {missing}"


@pytest.mark.parametrize("account", sorted({manifests.service_account(w) for w in WORKLOADS}))
def test_rbac_grants_nothing_the_service_does_not_call_or_plan(account: str) -> None:
    extra = granted(account) - needed_by_account()[account] - set(PLANNED.get(account, []))
    assert sorted(str(p) for p in extra) == []


def test_rbac_has_no_wildcards_and_no_secrets() -> None:
    for role in manifests.of_kind(OBJECTS, "ClusterRole") + manifests.of_kind(OBJECTS, "Role"):
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], name_of(role)
            assert "secrets" not in rule["resources"], name_of(role)


def test_the_node_agent_has_no_api_access() -> None:
    (agent,) = manifests.of_kind(OBJECTS, "DaemonSet")
    account = manifests.service_account(agent)
    assert granted(account) == set() and needed_by_account()[account] == set()
    assert agent["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
