"""The Raft soak runner (tests/chaos/raft_soak.py) on a few seeds: no figures are asserted."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from dataplane.raft.core import RaftNode, Ready
from tests.chaos import raft_soak
from tests.chaos.raft_soak import Outcome, Progress, record, run_chunk, run_variant, table
from tests.dataplane.test_raft_simulation import Simulation, check


def _break_simulation(monkeypatch: pytest.MonkeyPatch) -> None:
    original = Simulation.observe

    def broken(self: Simulation, i: int, node: RaftNode, rd: Ready) -> None:
        original(self, i, node, rd)
        check(self.max_committed < 5, "injected failure")

    monkeypatch.setattr(Simulation, "observe", broken)


def test_chunk_adds_up_seeds_and_keeps_the_hardest() -> None:
    out = run_chunk(3, 0, 0, 3, 600)
    assert out.seeds == 3
    assert not out.failures
    assert out.stats.steps >= 3 * 600
    assert out.hardest is not None
    assert out.hardest[1] in range(3)
    singles = [run_chunk(3, 0, seed, seed + 1, 600).hardest for seed in range(3)]
    assert out.hardest == max(s for s in singles if s is not None)


def test_failing_seeds_are_named_and_the_run_goes_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _break_simulation(monkeypatch)
    monkeypatch.setattr(raft_soak, "MAX_CHUNK", 1)
    with ThreadPoolExecutor(1) as pool:
        out = run_variant(pool, "3v", 3, 2000, workers=1, progress=Progress(3))
    assert out.seeds == 3
    assert [f.seed for f in out.failures] == [0, 1, 2]
    printed = capsys.readouterr().out
    for seed in range(3):
        assert f"FAILED [3v] SEED={seed} " in printed
        assert f"re-run: RAFT_SEED={seed} RAFT_STEPS=2000 " in printed
    assert "| 3v | 3 |" in table({"3v": out})


def test_record_appends_each_run_under_one_heading(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n## Other\n\nkept\n")
    record(results, "### run one\n\n| a |")
    record(results, "### run two\n\n| b |")
    text = results.read_text()
    assert text.startswith("# Benchmark results\n\n## Other\n\nkept\n")
    assert text.count("## Raft simulation") == 1
    assert text.index("### run one") < text.index("### run two") < text.index(raft_soak.END)


def test_main_runs_every_variant_and_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "RESULTS.md"
    argv = ["--seeds", "2", "--steps", "300", "--workers", "2", "--record"]
    assert raft_soak.main([*argv, "--results", str(results)]) == 0
    printed = capsys.readouterr().out
    for name in raft_soak.VARIANT_SHAPES:
        assert f"| {name} | 2 |" in printed
    assert "| all | 8 |" in printed
    text = results.read_text()
    assert "## Raft simulation" in text
    assert "| all | 8 |" in text


def test_outcomes_add_up() -> None:
    a = Outcome(seeds=2, hardest=(5, 9))
    a.add(Outcome(seeds=1, hardest=(5, 3)))
    a.add(Outcome(seeds=1, hardest=(4, 1)))
    assert (a.seeds, a.hardest) == (4, (5, 3))
