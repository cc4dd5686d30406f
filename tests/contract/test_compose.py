"""compose.yaml cannot run here (no Docker engine): check what can be checked without one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from topoplace import config
from topoplace.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
TOPOPLACE_SERVICES = {name: svc for name, svc in COMPOSE["services"].items() if svc.get("image") == "topoplace:dev"}


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
