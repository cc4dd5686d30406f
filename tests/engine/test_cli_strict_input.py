"""`engine place --snapshot` reads its file strictly: unknown fields are errors with their path, and
Kubernetes-style names are taken as the fields they name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core.model import PlaceInput
from schemas.gangs import PodGroup
from topoplace.cli import main
from topoplace.strict_input import snake_case, strict_convert

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _cluster() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / "snapshot-nvidia-cluster.json").read_text())
    return data


def _run(tmp_path: Path, data: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    path = tmp_path / "in.json"
    path.write_text(json.dumps(data))
    code = main(["engine", "place", "--snapshot", str(path)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_misspelled_node_field_is_refused_with_its_path_and_the_field_meant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _cluster()
    node = data["snapshot"]["nodes"][2]
    node["redy"] = node.pop("ready")
    code, out, err = _run(tmp_path, data, capsys)
    assert code == 2 and out == ""
    assert "$.snapshot.nodes[2].redy: unknown field (did you mean ready?)" in err


def test_a_kubernetes_style_node_selector_is_honoured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _cluster()
    code, out, _ = _run(tmp_path, data, capsys)
    assert code == 0 and json.loads(out)["node"] == "h100-a"  # the best pair without a selector
    data["request"]["nodeSelector"] = {"kubernetes.io/hostname": "dgx1-b"}
    code, out, _ = _run(tmp_path, data, capsys)
    assert code == 0 and json.loads(out)["node"] == "dgx1-b"


def test_one_field_in_both_spellings_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _cluster()
    data["request"]["nodeSelector"] = {"kubernetes.io/hostname": "dgx1-b"}
    data["request"]["node_selector"] = {"kubernetes.io/hostname": "dgx1-a"}
    code, _, err = _run(tmp_path, data, capsys)
    assert code == 2
    assert "$.request.nodeSelector: given twice, also as node_selector" in err


def test_an_unknown_top_level_key_lists_the_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _cluster()
    data["pods"] = []
    code, _, err = _run(tmp_path, data, capsys)
    assert code == 2 and "$.pods: unknown field (fields: gang, request, snapshot)" in err


def _gang(tmp_path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / "gang-volcano.json").read_text())
    return data


def test_a_negative_min_member_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _gang(tmp_path)
    data["gang"]["podgroup"]["spec"]["minMember"] = -1
    code, _, err = _run(tmp_path, data, capsys)
    assert code == 2 and "gang.podgroup.spec.minMember: must not be negative, got -1" in err


def test_a_gang_member_named_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _gang(tmp_path)
    data["gang"]["pods"][1]["uid"] = data["gang"]["pods"][0]["uid"]
    code, _, err = _run(tmp_path, data, capsys)
    assert code == 2 and "gang.pods[1].uid" in err and "is also gang.pods[0]" in err


def test_a_podgroup_as_kubectl_prints_it_keeps_its_other_fields(tmp_path: Path) -> None:
    data = _gang(tmp_path)
    data["gang"]["podgroup"]["metadata"]["uid"] = "5e0c"  # kubectl prints more than the engine reads
    data["gang"]["podgroup"]["status"] = {"phase": "Pending"}
    data["snapshot"].pop("hypernodes")  # kubectl objects, read by their own decoder
    placed = strict_convert(data, PlaceInput, lenient=(PodGroup,))
    assert placed.gang is not None and placed.gang.podgroup is not None


@given(st.from_regex(r"[a-z][a-z0-9]{1,6}(_[a-z][a-z0-9]{1,6}){0,3}", fullmatch=True))
def test_snake_case_undoes_camel_case(name: str) -> None:
    camel = name.split("_")[0] + "".join(part.capitalize() for part in name.split("_")[1:])
    assert snake_case(camel) == snake_case(name) == name


def test_every_shipped_example_is_read_strictly() -> None:
    for path in sorted(EXAMPLES.glob("*.json")):
        raw = msgspec.json.decode(path.read_bytes())
        raw["snapshot"].pop("hypernodes", None)  # kubectl objects, read by their own decoder
        strict_convert(raw, PlaceInput, lenient=(PodGroup,))
