"""`topoplace demo` refuses options it cannot run with before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from topoplace.cli import main
from topoplace.dev.demo import runner


@pytest.fixture(autouse=True)
def nothing_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    async def must_not_run(*args: object, **kwargs: object) -> int:
        raise AssertionError("the demo started despite bad options")

    monkeypatch.setattr(runner, "run_demo", must_not_run)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "0"], "--rate: must be positive, got 0"),
        (["--rate", "-5"], "--rate: must be positive"),
        (["--pods", "-3"], "--pods: must be positive, got -3"),
        (["--pods", "0"], "--pods: must be positive"),
        (["--timeout", "0"], "--timeout: must be positive"),
    ],
)
def test_bad_numbers_are_refused_naming_the_option(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["demo", *args])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_a_report_in_a_missing_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "no-such-folder" / "report.json"
    assert main(["demo", "--report", str(report), "--work-dir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert f"--report: cannot write {report}: no folder" in err
    assert not (tmp_path / "w").exists()


def test_a_report_that_is_a_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--traces", str(tmp_path), "--report", str(tmp_path / "r.json")]) == 2
    assert "--traces: cannot write" in capsys.readouterr().err


def test_a_work_dir_that_is_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    work = tmp_path / "work"
    work.write_text("")
    assert main(["demo", "--report", str(tmp_path / "r.json"), "--work-dir", str(work)]) == 2
    assert "--work-dir: " in capsys.readouterr().err
