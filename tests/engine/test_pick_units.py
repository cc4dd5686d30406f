"""`engine pick` scores its choice and the sets it passed over in one unit, so no passed-over set shows a
higher score than the choice (a Neuron pick once gave its choice 0 and each alternative its free group)."""

from __future__ import annotations

import json

import pytest

from topoplace.cli import main

FIXTURES = {"dgx-h100": 8, "dgx1-v100": 8, "metax-8gpu-2zone": 8, "trn1.32xlarge": 16, "inf2.48xlarge": 12}


@pytest.mark.parametrize("fixture", sorted(FIXTURES))
@pytest.mark.parametrize("count", [1, 4])  # Trainium takes 1, 4, 8 or 16
def test_no_alternative_outscores_the_choice(fixture: str, count: int, capsys: pytest.CaptureFixture[str]) -> None:
    free = ",".join(str(i) for i in range(FIXTURES[fixture]) if i != 1)  # one device in use
    assert main(["engine", "pick", "--topology", fixture, "--count", str(count), "--free", free]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["devices"]
    for alternative in answer.get("alternatives", []):
        assert alternative["score"] <= answer["score"], alternative
