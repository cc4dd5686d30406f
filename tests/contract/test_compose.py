"""compose.yaml cannot run here (no Docker engine): check what can be checked without one."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from topoplace import config
from topoplace.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
TOPOPLACE_SERVICES = {
    name: svc for name, svc in COMPOSE["services"].items() if svc.get("image", "").startswith("topoplace:")
}
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
    environment: dict[str, Any] = TOPOPLACE_SERVICES[service]["environment"]
    unknown = sorted(set(environment) - set(config.ENV_VARS))
    assert unknown == []
    # And the values parse: a typo in a number or a boolean fails here, not in a container.
    config.Settings.from_env({k: str(v) for k, v in environment.items()})


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
