"""deploy/kubernetes's NetworkPolicies: in, only the health and metrics port; out, Kafka, DNS, OTLP, and the
API server for the services that call it (finding 1: no NetworkPolicy; finding 11)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import deploy_manifests as manifests
import pytest
from test_deploy import OBJECTS, WORKLOADS, config_map_settings, name_of, needed_by_account

POLICIES = manifests.of_kind(OBJECTS, "NetworkPolicy")


def selects(policy: dict[str, Any], labels: dict[str, str]) -> bool:
    selector = policy["spec"]["podSelector"]
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        assert expression["operator"] == "In", "this reader knows In only"
        if labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


def policies_of(workload: dict[str, Any], direction: str) -> list[dict[str, Any]]:
    labels = workload["spec"]["template"]["metadata"]["labels"]
    return [p for p in POLICIES if selects(p, labels) and direction in p["spec"]["policyTypes"]]


def allowed_ports(workload: dict[str, Any], direction: str) -> set[tuple[object, str]]:
    key = "ingress" if direction == "Ingress" else "egress"
    return {
        (port["port"], port["protocol"])
        for policy in policies_of(workload, direction)
        for rule in policy["spec"].get(key, [])
        for port in rule["ports"]
    }


def namespace_of(host: str) -> str:
    """<service>.<namespace>.svc[...]: the namespace of a cluster DNS name."""
    parts = host.split(".")
    assert len(parts) >= 3 and parts[2] == "svc", f"{host} is not a cluster service name"
    return parts[1]


def egress_rule_to_port(workload: dict[str, Any], port: int) -> dict[str, Any]:
    (rule,) = [
        rule
        for policy in policies_of(workload, "Egress")
        for rule in policy["spec"]["egress"]
        if any(p["port"] == port for p in rule["ports"])
    ]
    return rule


@pytest.mark.parametrize("workload", WORKLOADS, ids=name_of)
def test_only_the_metrics_port_is_reachable(workload: dict[str, Any]) -> None:
    assert policies_of(workload, "Ingress"), "no ingress policy: every port open"
    (container,) = manifests.containers(workload)
    (port,) = container["ports"]
    assert allowed_ports(workload, "Ingress") == {(port["name"], "TCP")}


@pytest.mark.parametrize("workload", WORKLOADS, ids=name_of)
def test_egress_reaches_kafka_dns_and_the_trace_collector_named_in_the_settings(workload: dict[str, Any]) -> None:
    settings = config_map_settings()
    assert settings.kafka_bootstrap is not None and settings.otlp_endpoint is not None
    for server in settings.kafka_bootstrap.split(","):
        host, _, port = server.rpartition(":")
        (peer,) = egress_rule_to_port(workload, int(port))["to"]
        assert peer == {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace_of(host)}}}
    otlp = urlsplit(settings.otlp_endpoint)
    assert otlp.hostname is not None and otlp.port is not None
    (peer,) = egress_rule_to_port(workload, otlp.port)["to"]
    assert peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] == namespace_of(otlp.hostname)
    assert {(53, "UDP"), (53, "TCP")} <= allowed_ports(workload, "Egress")


@pytest.mark.parametrize("workload", WORKLOADS, ids=name_of)
def test_only_the_services_that_call_the_api_may_reach_the_api_server(workload: dict[str, Any]) -> None:
    calls_the_api = bool(needed_by_account()[manifests.service_account(workload)])
    assert ({(443, "TCP"), (6443, "TCP")} <= allowed_ports(workload, "Egress")) is calls_the_api
