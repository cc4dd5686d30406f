"""deploy/kubernetes: valid objects of a current Kubernetes, settings the code reads, RBAC that fits the code."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from collections import defaultdict
from pathlib import Path
from typing import Any

import certifi
import deploy_kube_calls as kube_calls
import deploy_manifests as manifests
import grimp
import kubernetes_validate
import pytest
import yaml
from deploy_kube_calls import KubeCall, Permission
from kubernetes_validate import utils as kv_utils

from topoplace import config
from topoplace.cli import build_parser

OBJECTS = manifests.render()
WORKLOADS = manifests.workloads(OBJECTS)
NAMESPACE = "topoplace"

# Which code a workload runs: its command, as `topoplace <args>`, -> the service's entry module.
ENTRY_MODULES: dict[tuple[str, ...], str] = {
    ("collector", "node"): "services.collector.node.agent",
    ("collector", "cluster"): "services.collector.cluster.watcher",
    ("placer",): "services.placer.service",
    ("binder",): "services.binder.service",
}
# Modules that call the API but run in no deployed service: demo and test-cluster tools.
NOT_DEPLOYED = ("topoplace.dev.demo", "topoplace.dev.commands.workload")
# Calls made only on HAMi nodes (its node lock): granted by the optional component components/hami,
# never by the base, which may patch no Node at all.
HAMI_MODULES = frozenset({"services.binder.hami_lock"})
HAMI_OBJECTS = manifests.render(components=("hami",))
# Variables set for the container runtime, not for topoplace.
RUNTIME_VARIABLES = {"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"}


def kubernetes_version() -> str:
    """The newest Kubernetes release whose schemas kubernetes-validate ships."""
    return str(kv_utils.latest_version())


def name_of(obj: dict[str, Any]) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


# --- the objects are what a current API server accepts ------------------------------------------


@pytest.mark.parametrize("obj", HAMI_OBJECTS, ids=name_of)
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
    for directory in (manifests.KUSTOMIZE_DIR, manifests.COMPONENTS_DIR / "hami"):
        listed = set(manifests.kustomization(directory)["resources"])
        on_disk = {p.name for p in directory.glob("*.yaml")} - {"kustomization.yaml"}
        assert listed == on_disk, directory
    assert manifests.kustomization(manifests.COMPONENTS_DIR / "hami")["kind"] == "Component"


def kubectl_kustomize(directory: Path) -> list[dict[str, Any]]:
    rendered = subprocess.run(["kubectl", "kustomize", str(directory)], capture_output=True, text=True, check=True)
    return [doc for doc in yaml.safe_load_all(rendered.stdout) if doc is not None]


def identity(obj: dict[str, Any]) -> tuple[str, str, str]:
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_kubectl_kustomize_renders_what_these_tests_read(tmp_path: Path) -> None:
    # An overlay as docs/deploy.md writes one: the base plus HAMi's component.
    base = os.path.relpath(manifests.KUSTOMIZE_DIR, tmp_path)
    (tmp_path / "kustomization.yaml").write_text(f"resources: [{base}]\ncomponents: [{base}/components/hami]\n")
    for rendered, read in ((kubectl_kustomize(manifests.KUSTOMIZE_DIR), OBJECTS),
                           (kubectl_kustomize(tmp_path), HAMI_OBJECTS)):  # fmt: skip
        assert sorted(map(identity, rendered)) == sorted(map(identity, read))
        by_identity = {identity(o): o for o in read}
        assert all(o == by_identity[identity(o)] for o in rendered)


def test_namespaced_objects_live_in_the_namespace() -> None:
    cluster_scoped = {
        "Namespace", "PriorityClass", "ClusterRole", "ClusterRoleBinding",
        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
    }  # fmt: skip
    for obj in HAMI_OBJECTS:
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


CA_FILE = "/etc/topoplace/kafka-ca/ca.crt"


def container_environment(container: dict[str, Any]) -> dict[str, str]:
    """What a container's environment holds: the ConfigMap, then its env (a Secret's key as a stand-in)."""
    (settings,) = [o for o in manifests.of_kind(OBJECTS, "ConfigMap") if o["metadata"]["name"] == "topoplace-settings"]
    environment = {k: str(v) for k, v in settings["data"].items()}
    for entry in container.get("env", []):
        source = entry.get("valueFrom", {})
        if "secretKeyRef" in source:
            environment[entry["name"]] = f"{source['secretKeyRef']['name']}/{source['secretKeyRef']['key']}"
        elif "value" in entry:
            environment[entry["name"]] = entry["value"]
    return environment


def container_settings(container: dict[str, Any]) -> config.Settings:
    environment = container_environment(container)
    assert environment["KAFKA_SSL_CAFILE"] == CA_FILE  # mounted from topoplace-kafka-ca; any readable file here
    readable = {"KAFKA_SSL_CAFILE": certifi.where()}
    if "TOPOPLACE_DECISION_KEY_FILE" in environment:  # mounted from topoplace-decision-key; any text file here
        mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
        assert environment["TOPOPLACE_DECISION_KEY_FILE"].startswith(mounts["decision-key"] + "/")
        readable["TOPOPLACE_DECISION_KEY_FILE"] = __file__
    return config.Settings.from_env({**environment, **readable})


def config_map_settings() -> config.Settings:
    return container_settings(next(manifests.containers(WORKLOADS[0])))


def test_the_settings_config_map_holds_only_variables_the_configuration_reads() -> None:
    (settings,) = manifests.of_kind(OBJECTS, "ConfigMap")
    assert sorted(set(settings["data"]) - set(config.ENV_VARS)) == []
    parsed = config_map_settings()  # and the values parse: a typo fails here, not in a pod
    assert parsed.kafka_bootstrap and parsed.otlp_endpoint and parsed.health_port


def test_the_config_map_holds_no_secret() -> None:
    (settings,) = manifests.of_kind(OBJECTS, "ConfigMap")
    assert not {"KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD"} & set(settings["data"])


@pytest.mark.parametrize("workload", WORKLOADS, ids=name_of)
def test_every_service_speaks_sasl_ssl_as_its_own_principal_from_its_own_secret(workload: dict[str, Any]) -> None:
    (container,) = manifests.containers(workload)
    security = container_settings(container).kafka_security
    assert security.protocol == "SASL_SSL" and security.sasl_mechanism is not None
    assert security.sasl_mechanism.startswith("SCRAM-")  # the password never crosses the wire
    env = {e["name"]: e.get("valueFrom", {}).get("secretKeyRef") for e in container["env"]}
    secret = f"topoplace-kafka-{manifests.service_account(workload).removeprefix('topoplace-')}"
    assert env["KAFKA_SASL_USERNAME"] == {"name": secret, "key": "username"}
    assert env["KAFKA_SASL_PASSWORD"] == {"name": secret, "key": "password"}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
    assert CA_FILE.startswith(mounts["kafka-ca"]["mountPath"] + "/") and mounts["kafka-ca"]["readOnly"]
    assert volumes["kafka-ca"] == {"name": "kafka-ca", "configMap": {"name": "topoplace-kafka-ca"}}


def test_no_two_services_share_a_kafka_principal() -> None:
    secrets = [
        e["valueFrom"]["secretKeyRef"]["name"]
        for w in WORKLOADS
        for c in manifests.containers(w)
        for e in c["env"]
        if e["name"] == "KAFKA_SASL_PASSWORD"
    ]
    assert len(secrets) == len(set(secrets)) == len(WORKLOADS)


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


def needed_by_account(*, hami: bool = True) -> dict[str, set[Permission]]:
    """What each service's calls need; without `hami`, leaving out the calls made on HAMi nodes only."""
    graph = grimp.build_graph("services", "topoplace", "schemas")
    needed: dict[str, set[Permission]] = defaultdict(set)
    for account, entry in components().items():
        modules = graph.find_upstream_modules(entry) | {entry}
        if not hami:
            modules -= HAMI_MODULES
        needed[account] = {p for call in CALLS if call.module in modules for p in call.permissions}
    return needed


def granted(account: str, objects: list[dict[str, Any]] = OBJECTS) -> set[Permission]:
    return {
        Permission(group, resource, verb)
        for rule in manifests.rules_of(objects, NAMESPACE, account)
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_scan_finds_the_calls_the_services_make() -> None:
    # If the scan went blind (a renamed wrapper, a moved module), the exactness tests would pass on nothing.
    needed = needed_by_account()
    assert Permission("", "pods/binding", "create") in needed["topoplace-binder"]
    assert Permission("", "nodes", "patch") in needed["topoplace-binder"]  # HAMi's node lock
    assert Permission("", "pods", "watch") in needed["topoplace-cluster-watcher"]
    assert Permission("topology.volcano.sh", "hypernodes", "list") in needed["topoplace-cluster-watcher"]
    assert {c.module for c in CALLS} >= HAMI_MODULES


def test_every_api_call_is_made_by_a_deployed_service_or_a_demo_tool() -> None:
    graph = grimp.build_graph("services", "topoplace", "schemas")
    deployed = set().union(*(graph.find_upstream_modules(e) | {e} for e in ENTRY_MODULES.values()))
    stray = [
        f"{c.module}:{c.line} {c.method}"
        for c in CALLS
        if c.module not in deployed and not c.module.startswith(NOT_DEPLOYED)
    ]
    assert stray == []


ACCOUNTS = sorted({manifests.service_account(w) for w in WORKLOADS})


@pytest.mark.parametrize("account", ACCOUNTS)
def test_rbac_grants_exactly_what_the_services_calls_need(account: str) -> None:
    # Both directions: a call without its grant fails in the cluster; a grant without a call is
    # power nobody uses (finding 11: node patches, the placer's token, claim verbs).
    needed = needed_by_account(hami=False)[account]
    assert sorted(map(str, needed - granted(account))) == [], f"{account} lacks these"
    assert sorted(map(str, granted(account) - needed)) == [], f"{account} is granted more than its calls need"


@pytest.mark.parametrize("account", ACCOUNTS)
def test_with_hamis_component_rbac_grants_exactly_what_the_calls_need_hamis_node_lock_included(account: str) -> None:
    needed = needed_by_account(hami=True)[account]
    assert granted(account, HAMI_OBJECTS) == needed


def test_the_base_lets_the_binder_patch_no_node_and_the_hami_component_adds_only_the_lock() -> None:
    assert not {p for p in granted("topoplace-binder") if p.resource.startswith("nodes") and p.verb != "list"
                and p.verb != "watch"}  # fmt: skip
    added = granted("topoplace-binder", HAMI_OBJECTS) - granted("topoplace-binder")
    assert added == {Permission("", "nodes", "get"), Permission("", "nodes", "patch")}


def test_rbac_has_no_wildcards_and_no_secrets() -> None:
    for role in manifests.of_kind(HAMI_OBJECTS, "ClusterRole") + manifests.of_kind(HAMI_OBJECTS, "Role"):
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], name_of(role)
            assert "secrets" not in rule["resources"], name_of(role)


@pytest.mark.parametrize("workload", WORKLOADS, ids=name_of)
def test_a_service_that_calls_no_api_gets_no_token_and_no_role(workload: dict[str, Any]) -> None:
    account = manifests.service_account(workload)
    (service_account,) = [o for o in manifests.of_kind(OBJECTS, "ServiceAccount") if o["metadata"]["name"] == account]
    calls_the_api = bool(needed_by_account()[account])
    pod_automount = workload["spec"]["template"]["spec"].get("automountServiceAccountToken", True)
    assert pod_automount is calls_the_api, f"{account}: a token exactly when its service calls the API"
    assert service_account.get("automountServiceAccountToken", True) is calls_the_api
    if not calls_the_api:
        assert granted(account, HAMI_OBJECTS) == set()


def test_the_placer_calls_no_api_and_the_node_agent_neither() -> None:
    needed = needed_by_account()
    assert needed["topoplace-placer"] == set() and needed["topoplace-node-agent"] == set()
