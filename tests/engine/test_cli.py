"""`topoplace engine place|pick` and `topoplace topo show` on the shipped examples and fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from topoplace.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CLUSTER = EXAMPLES / "snapshot-nvidia-cluster.json"
UNSCHEDULABLE = EXAMPLES / "snapshot-nvidia-unschedulable.json"


def test_place_prints_the_decision_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    # h100-a has GPUs 6 and 7 free (NV18 = 1800); no other node offers more than NV2 (200).
    assert main(["engine", "place", "--snapshot", str(CLUSTER)]) == 0
    decision = json.loads(capsys.readouterr().out)
    assert decision["node"] == "h100-a"
    assert [d["index"] for d in decision["devices"]] == [6, 7]
    assert decision["score_parts"]["set_score"] == 1800
    assert {a["node"] for a in decision["alternatives"]} == {"dgx1-a", "dgx1-b", "pcie-a", "pcie-b"}


def test_place_hami_mode_uses_hami_order(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engine", "place", "--snapshot", str(CLUSTER), "--mode", "hami"]) == 0
    decision = json.loads(capsys.readouterr().out)
    assert [d["index"] for d in decision["devices"]] == [7, 6]  # walked from the end


def test_place_explain_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engine", "place", "--snapshot", str(CLUSTER), "--explain"]) == 0
    out = capsys.readouterr().out
    assert "h100-a" in out
    assert "cordoned" in out
    assert "other nodes, best first" in out


def test_place_unschedulable_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engine", "place", "--snapshot", str(UNSCHEDULABLE)]) == 0
    decision = json.loads(capsys.readouterr().out)
    assert decision["node"] is None
    assert decision["reason"] == (
        "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) were not ready, 1 node(s) were unschedulable."
    )


def test_place_names_the_bad_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"snapshot": {"nodes": []}, "request": {"uid": 5}}))
    assert main(["engine", "place", "--snapshot", str(bad)]) == 2
    assert "$.request.uid" in capsys.readouterr().err


def test_pick_on_a_fixture_with_free_devices(capsys: pytest.CaptureFixture[str]) -> None:
    # DGX-1, GPU 1 busy: the NV2 pair (2,3) cuts the least idle link score (see test_nvidia_place).
    assert main(["engine", "pick", "--topology", "dgx1-v100", "--count", "2", "--free", "0,2,3,4,5,6,7"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["devices"] == [2, 3]
    assert out["score"] == 200
    assert all(a["score"] <= 200 for a in out["alternatives"])


def test_pick_hami_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engine", "pick", "--topology", "dgx1-v100", "--count", "2", "--free", "0,2,3,4,5,6,7",
                 "--mode", "hami"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["devices"] == [7, 6]


def test_pick_reports_when_nothing_fits(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engine", "pick", "--topology", "pcie-4gpu", "--count", "3", "--free", "0,1"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["devices"] == []
    assert out["reason"].startswith("2 of 4 GPUs free, 3 requested")


def test_pick_rejects_an_unknown_device(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engine", "pick", "--topology", "pcie-4gpu", "--count", "1", "--free", "0,9"]) == 2
    assert "--free: no device 9" in capsys.readouterr().err


def test_topo_show_prints_the_matrix_with_scores(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topo", "show", "--snapshot", str(CLUSTER), "--node", "dgx1-a"]) == 0
    out = capsys.readouterr().out
    assert "GPU7" in out
    assert "NV2" in out and "200" in out
    assert "SYS" in out
    assert " X " in out


def test_topo_show_from_a_fixture(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topo", "show", "--topology", "dgx-h100"]) == 0
    assert "NV18" in capsys.readouterr().out


def test_topo_show_unknown_node(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topo", "show", "--snapshot", str(CLUSTER), "--node", "nope"]) == 2
    assert "no node 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("snapshot-*.json")), ids=lambda p: p.name)
def test_every_example_snapshot_is_placed(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engine", "place", "--snapshot", str(example)]) == 0
    decision = json.loads(capsys.readouterr().out)
    assert decision["node"] is not None or decision["reason"].startswith("0/")
