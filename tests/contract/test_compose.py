"""compose.yaml cannot run here (no Docker engine, no images): check what can be checked without one.

Against the Compose schema; against what each image needs (Kafka's listeners, KWOK's Kubernetes
version, Jaeger v2's ports, the topoplace image's commands, settings and health server); and the
one-shot seeding service run for real against the test API server.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import kubernetes_validate
import pytest
import yaml

from schemas.enforcement import ENFORCEMENT_LABEL
from topoplace import config
from topoplace.cli import build_parser
from topoplace.dev.demo import workload
from topoplace.dev.kubeapi import KubeApiServer, resources
from topoplace.health import HealthServer

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
TOPOPLACE_SERVICES = {name: svc for name, svc in SERVICES.items() if svc.get("image", "").startswith("topoplace:")}
# The topoplace services that keep running (and serve /readyz); the others run once and exit.
LONG_RUNNING = {name for name, svc in TOPOPLACE_SERVICES.items() if svc.get("restart") != "no"}
# Compose's `${VAR:-default}`: the value a service gets when VAR is not set (as in these tests).
INTERPOLATION = re.compile(r"\$\{(\w+):?-([^}]*)\}")
# An image tag that names a release: v1.2.3 or 1.2.3, maybe with a suffix (-k8s.v1.33.0, -slim-bookworm).
PINNED_TAG = re.compile(r"^v?\d+\.\d+(\.\d+)?([-.][\w.]+)*$")


def test_compose_file_is_valid_against_the_official_schema() -> None:
    schema = json.loads((Path(__file__).parent / "compose-spec.json").read_text())
    jsonschema.Draft7Validator(schema).validate(COMPOSE)  # the spec declares draft-07


def test_compose_brings_up_every_part_of_the_pipeline() -> None:
    images = {svc.get("image", "") for svc in COMPOSE["services"].values()}
    assert any(i.startswith("apache/kafka") for i in images)
    assert any(i.startswith("registry.k8s.io/kwok/cluster") for i in images)
    assert any(i.startswith("jaegertracing/") for i in images)
    commands = {tuple(svc["command"][:2]) for svc in TOPOPLACE_SERVICES.values()}
    for wanted in [("placer",), ("binder",), ("collector", "cluster"), ("collector", "fleet"), ("workload", "submit")]:
        assert any(c[: len(wanted)] == wanted for c in commands), wanted


@pytest.mark.parametrize("service", sorted(TOPOPLACE_SERVICES))
def test_every_service_command_is_a_real_topoplace_subcommand(service: str) -> None:
    args = build_parser().parse_args(TOPOPLACE_SERVICES[service]["command"])
    assert callable(args.func)


@pytest.mark.parametrize("service", sorted(TOPOPLACE_SERVICES))
def test_every_environment_variable_is_read_by_the_configuration(service: str) -> None:
    environment = environment_of(service)
    unknown = sorted(set(environment) - set(config.ENV_VARS))
    assert unknown == []
    # And the values parse: a typo in a number or a boolean fails here, not in a container.
    settings = config.Settings.from_env(environment)
    # What the service asks of them at start, beyond parsing: the seal's key (the binder and the
    # cluster watcher), an API server to reach (there is no kubeconfig and no in-cluster account).
    command = tuple(SERVICES[service]["command"][:2])
    if command[:1] == ("binder",) or command == ("collector", "cluster"):
        settings.require_decision_key()
    if command[:1] in {("binder",), ("workload",)} or command == ("collector", "cluster"):
        assert settings.kube_api_url, service


def environment_of(service: str) -> dict[str, str]:
    """The service's environment as its container gets it, with compose's defaults filled in."""
    environment: dict[str, Any] = SERVICES[service].get("environment", {})
    return {k: INTERPOLATION.sub(lambda m: m[2], str(v)) for k, v in environment.items()}


def test_files_the_services_mount_exist() -> None:
    for svc in TOPOPLACE_SERVICES.values():
        for arg in svc["command"]:
            if arg.startswith("/etc/topoplace/"):
                assert (ROOT / "deploy" / "compose" / arg.removeprefix("/etc/topoplace/")).is_file(), arg


@pytest.mark.parametrize("service", sorted(COMPOSE["services"]))
def test_every_image_is_pinned_by_version(service: str) -> None:
    image = COMPOSE["services"][service]["image"]
    name, _, tag = image.rpartition(":")
    assert name and PINNED_TAG.match(tag), image


def test_the_topoplace_image_is_tagged_with_the_package_version() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert {svc["image"] for svc in TOPOPLACE_SERVICES.values()} == {f"topoplace:{version}"}


def test_the_dockerfile_base_image_is_pinned_by_version() -> None:
    bases = [line.split()[1] for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("FROM ")]
    assert bases and all(PINNED_TAG.match(base.rpartition(":")[2]) for base in bases), bases


def test_the_kwok_health_check_runs_a_tool_the_image_has() -> None:
    # registry.k8s.io/kwok/cluster is Alpine (busybox: sh, wget) with kwok and kwokctl; kubectl is
    # only reachable as `kwokctl kubectl`, not on PATH.
    (kwok,) = [svc for svc in COMPOSE["services"].values() if svc["image"].startswith("registry.k8s.io/kwok/cluster")]
    test = kwok["healthcheck"]["test"]
    command = test[1] if test[0] == "CMD" else test[1].split()[0]
    assert command in {"wget", "kwokctl", "sh", "/bin/sh"}, test
    assert "8080" in " ".join(test) and "/readyz" in " ".join(test)


def test_the_docker_build_context_leaves_out_local_state() -> None:
    ignored = {
        line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines() if line.strip() and line[0] != "#"
    }
    assert {".git", ".venv", "bench/results", "**/__pycache__", ".pytest_cache", ".mypy_cache"} <= ignored
    # ... but keeps what the Dockerfile copies.
    copies = [line.split()[1:-1] for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("COPY ")]
    copied = {source for sources in copies for source in sources}
    assert copied and not copied & ignored, copied


# --- Kafka: the services in the network and tools on the host each reach an address they can resolve ---


def kafka_listeners(variable: str) -> dict[str, tuple[str, int]]:
    """KAFKA_LISTENERS or KAFKA_ADVERTISED_LISTENERS as {listener name: (host, port)}."""
    (kafka,) = [svc for svc in SERVICES.values() if svc["image"].startswith("apache/kafka:")]
    found = {}
    for entry in kafka["environment"][variable].split(","):
        url = urlsplit(entry)  # NAME://host:port, host empty for every interface
        found[url.scheme.upper()] = (url.hostname or "", int(url.port or 0))
    return found


def kafka_service() -> tuple[str, dict[str, Any]]:
    (found,) = [(name, svc) for name, svc in SERVICES.items() if svc["image"].startswith("apache/kafka:")]
    return found


def test_kafka_advertises_each_listener_it_opens_except_the_controllers() -> None:
    name, kafka = kafka_service()
    environment = kafka["environment"]
    listening, advertised = kafka_listeners("KAFKA_LISTENERS"), kafka_listeners("KAFKA_ADVERTISED_LISTENERS")
    controllers = set(environment["KAFKA_CONTROLLER_LISTENER_NAMES"].split(","))
    protocols = dict(pair.split(":") for pair in environment["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert set(listening) == set(protocols), "every listener needs a security protocol, and only those"
    assert set(advertised) == set(listening) - controllers
    for listener, (_, port) in advertised.items():
        assert listening[listener][1] == port, f"{listener} is advertised on {port}, opened on {listening[listener][1]}"
    # The brokers talk to each other on a listener advertised under the service's network name
    # (unset, Kafka takes the listener named after security.inter.broker.protocol, PLAINTEXT).
    assert advertised[environment.get("KAFKA_INTER_BROKER_LISTENER_NAME", "PLAINTEXT")][0] == name
    voters = {int(v.split("@")[0]): v.split("@")[1] for v in environment["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(",")}
    (controller,) = controllers
    assert voters == {int(environment["KAFKA_NODE_ID"]): f"{name}:{listening[controller][1]}"}


def test_the_services_bootstrap_from_an_address_advertised_on_the_compose_network() -> None:
    name, _ = kafka_service()
    advertised = set(kafka_listeners("KAFKA_ADVERTISED_LISTENERS").values())
    for service in TOPOPLACE_SERVICES:
        host, _, port = environment_of(service)["KAFKA_BOOTSTRAP"].rpartition(":")
        assert host == name and (host, int(port)) in advertised, service


def test_tools_on_the_host_reach_kafka_on_a_published_localhost_listener() -> None:
    # `topoplace explain` and `topics tail` from the host: the broker hands out the advertised
    # address, so it must be one the host resolves, on a port compose publishes as the same port.
    _, kafka = kafka_service()
    on_host = [(h, p) for h, p in kafka_listeners("KAFKA_ADVERTISED_LISTENERS").values() if h == "localhost"]
    assert on_host, "no listener is advertised for the host"
    published = {str(entry) for entry in kafka.get("ports", [])}
    for _, port in on_host:
        assert f"{port}:{port}" in published, f"localhost:{port} is advertised but not published"


def test_the_docs_say_how_to_reach_kafka_from_the_host() -> None:
    ((_, port),) = [a for a in kafka_listeners("KAFKA_ADVERTISED_LISTENERS").values() if a[0] == "localhost"]
    for doc in ("README.md", "docs/deploy.md"):
        text = (ROOT / doc).read_text()
        assert f"KAFKA_BOOTSTRAP=localhost:{port} topoplace explain" in text, doc
        assert f"KAFKA_BOOTSTRAP=localhost:{port} topoplace topics tail" in text, doc


def test_the_pods_the_docs_explain_are_pods_the_compose_workload_submits() -> None:
    args = build_parser().parse_args(SERVICES["workload"]["command"])
    submitted = {f"{args.namespace}/{pod.name}" for pod in workload.generate(args.pods, args.seed)}
    for doc in ("README.md", "docs/deploy.md"):
        explained = re.findall(r"topoplace\s+explain\s+([a-z0-9-]+/[a-z0-9-]+)", (ROOT / doc).read_text())
        assert explained and set(explained) <= submitted, doc


# --- health: every long-running service is checked, and what waits on it waits for healthy ---


def test_every_long_running_topoplace_service_has_a_readiness_health_check() -> None:
    assert {"placer", "binder", "collector-nodes", "collector-cluster"} <= LONG_RUNNING
    for service in sorted(LONG_RUNNING):
        check = SERVICES[service].get("healthcheck", {})
        assert check.get("test") and not check.get("disable"), service
        assert "/readyz" in " ".join(check["test"]), service


def test_every_one_shot_service_runs_no_health_check() -> None:
    # A one-shot serves no /readyz: a check it inherits would only mark it unhealthy.
    for service in sorted(set(TOPOPLACE_SERVICES) - LONG_RUNNING):
        check = SERVICES[service].get("healthcheck", {})
        assert not check.get("test") or check.get("disable") is True, service


def test_a_service_waited_on_for_health_has_a_health_check() -> None:
    for service, svc in SERVICES.items():
        for target, dependency in svc.get("depends_on", {}).items():
            assert target in SERVICES, f"{service} depends on {target}, which is not a service"
            if dependency["condition"] == "service_healthy":
                check = SERVICES[target].get("healthcheck", {})
                assert check.get("test") and not check.get("disable"), f"{service} waits for {target}'s health"


def test_the_workload_waits_for_every_long_running_service_to_be_healthy() -> None:
    depends_on = SERVICES["workload"]["depends_on"]
    assert {t for t, d in depends_on.items() if d["condition"] == "service_healthy"} >= LONG_RUNNING


@pytest.mark.parametrize("ready", [True, False])
async def test_the_health_check_passes_exactly_when_the_service_is_ready(ready: bool) -> None:
    # The check as compose runs it in the container (python from the image), against the real
    # health server on the port the service's environment names.
    (test,) = {tuple(SERVICES[s]["healthcheck"]["test"]) for s in LONG_RUNNING}
    assert test[0] == "CMD" and test[1] == "python", test
    health = HealthServer(0, ready=lambda: ready, host="127.0.0.1")
    port = await health.start()
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable, *test[2:], env={**os.environ, "TOPOPLACE_HEALTH_PORT": str(port)}
        )
        assert await process.wait() == (0 if ready else 1)
    finally:
        await health.stop()


def test_every_long_running_service_serves_health_on_the_port_its_check_asks() -> None:
    for service in sorted(LONG_RUNNING):
        assert config.Settings.from_env(environment_of(service)).health_port > 0, service
        assert "TOPOPLACE_HEALTH_PORT" in " ".join(SERVICES[service]["healthcheck"]["test"]), service


# --- one image build; the images each part needs ---


def test_the_topoplace_image_is_built_once() -> None:
    builders = [name for name, svc in TOPOPLACE_SERVICES.items() if "build" in svc]
    assert len(builders) == 1, builders
    for name, svc in TOPOPLACE_SERVICES.items():
        if name not in builders:  # compose builds before it creates containers: never pull what it builds
            assert svc.get("pull_policy") == "never", name


def kwok_kubernetes_version() -> tuple[int, int, int]:
    (image,) = [svc["image"] for svc in SERVICES.values() if svc["image"].startswith("registry.k8s.io/kwok/cluster:")]
    found = re.search(r"-k8s\.v(\d+)\.(\d+)\.(\d+)$", image)
    assert found, image
    major, minor, patch = (int(part) for part in found.groups())
    return major, minor, patch


def test_kwoks_kubernetes_serves_dra_v1() -> None:
    # resource.k8s.io/v1 (DRA, GA) is served, on by default, from Kubernetes 1.34.
    assert kwok_kubernetes_version() >= (1, 34, 0)


def test_jaeger_is_v2_and_receives_the_otlp_the_services_send() -> None:
    (jaeger,) = [(n, s) for n, s in SERVICES.items() if s["image"].startswith("jaegertracing/")]
    name, svc = jaeger
    # v2's single image; all-in-one is the retired v1 line.
    assert svc["image"].startswith("jaegertracing/jaeger:2."), svc["image"]
    assert "16686:16686" in svc.get("ports", [])  # the UI
    for service in TOPOPLACE_SERVICES:
        endpoint = urlsplit(environment_of(service)["OTEL_EXPORTER_OTLP_ENDPOINT"])
        assert (endpoint.scheme, endpoint.hostname, endpoint.port) == ("http", name, 4318), service  # OTLP/HTTP


# --- the one-shot seeding service, run as compose runs it, against the test API server ---


def seeding_service() -> str:
    (name,) = [n for n, svc in TOPOPLACE_SERVICES.items() if svc["command"][:2] == ["workload", "seed-cluster"]]
    return name


async def run_seeding(url: str) -> tuple[int, str]:
    """The seeding service's command with its environment, the API server's URL aside."""
    service = seeding_service()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "topoplace.cli",
        *SERVICES[service]["command"],
        env={**os.environ, **environment_of(service), "TOPOPLACE_KUBE_API_URL": url},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await process.communicate()
    return int(process.returncode or 0), err.decode()


async def test_the_seeding_service_creates_the_dra_pool_the_workload_names() -> None:
    async with KubeApiServer() as server:
        code, err = await run_seeding(server.url)
        assert code == 0, err
        assert (await run_seeding(server.url))[0] == 0  # a second `docker compose up` seeds again, harmlessly
        store = server.store
        nodes, _ = store.list(resources.NODES)
        slices, _ = store.list(resources.RESOURCESLICES)
        classes, _ = store.list(resources.DEVICECLASSES)
        namespace = build_parser().parse_args(SERVICES["workload"]["command"]).namespace
        templates, _ = store.list(resources.RESOURCECLAIMTEMPLATES, namespace)
    dra_nodes = {n["metadata"]["name"] for n in nodes if n["metadata"]["labels"].get(ENFORCEMENT_LABEL) == "dra"}
    assert dra_nodes, "no node is labelled for the DRA pool"
    # Each DRA node's GPUs are in its ResourceSlices (and its NICs): without them the node has none.
    assert {s["spec"]["nodeName"] for s in slices if s["spec"]["driver"] == "gpu.nvidia.com"} == dra_nodes
    # The claim templates the workload's DRA pods name, where they are submitted, asking classes that exist.
    named = {kind.claim_template for kind in workload.MIX if kind.claim_template}
    named |= {pod.claim_template for pod in workload.dra_showcase_pods()}
    assert named and named <= {t["metadata"]["name"] for t in templates}
    class_names = {c["metadata"]["name"] for c in classes}
    for template in templates:
        for request in template["spec"]["spec"]["devices"]["requests"]:
            assert request["exactly"]["deviceClassName"] in class_names
    # What KWOK's real API server gets must be valid there: its Kubernetes release's schema, strict
    # (resource.k8s.io/v1 exists from 1.34; a pool without generation and slice count is refused).
    major, minor, _ = kwok_kubernetes_version()
    for obj in [*slices, *classes, *templates]:
        kubernetes_validate.validate(obj, f"{major}.{minor}.0", strict=True)


async def test_seeding_says_in_one_line_when_the_api_server_serves_no_dra() -> None:
    # A Kubernetes older than 1.34 (KWOK's v1.33 image): nodes are created, DRA is a 404.
    from aiohttp import web

    async def echo(request: web.Request) -> web.Response:
        return web.json_response(await request.json(), status=201)

    async def not_found(request: web.Request) -> web.Response:
        body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}
        return web.json_response(body, status=404)

    app = web.Application()
    app.router.add_post("/api/v1/nodes", echo)
    app.router.add_route("*", "/{path:.*}", not_found)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        code, err = await run_seeding(f"http://127.0.0.1:{port}")
    finally:
        await runner.cleanup()
    assert code == 1
    assert err.startswith("topoplace workload: ") and "resource.k8s.io/v1" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
