"""The `topoplace` command: a bad setting is one line naming the variable and exit code 2, for every command."""

from __future__ import annotations

import pytest

from topoplace.cli import main


@pytest.mark.parametrize(
    "argv",
    [["topics", "ensure"], ["demo", "--pods", "1"], ["workload", "submit", "--pods", "1"]],
)
def test_a_bad_setting_is_reported_by_name(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TOPOPLACE_HEALTH_PORT", "not-a-port")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"topoplace {argv[0]}: TOPOPLACE_HEALTH_PORT: ")
    assert "Traceback" not in err
