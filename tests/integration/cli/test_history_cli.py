"""`gate history` end to end on files and the local GitHub server: nights recorded, change
points detected, the alert issued with its bisect, an acknowledgement checked and applied, and
`gate baseline update` refusing a regressed night."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import factories as f
from support.cli import gate_in_process
from support.fake_github import TOKEN

from gate.history.replay import nights
from gate.judge.baseline import load_all
from gate.judge.verdict import load_verdict, save_verdict
from gate.report.pictures import sparkline

SHAS = [f"{i:02x}" * 20 for i in range(1, 60)]
PR_HEAD = "e" * 40


@pytest.fixture
def env(fake, monkeypatch):
    for key, value in fake.job_env(TOKEN).items():
        monkeypatch.setenv(key, value)
    for key in ("GITHUB_REF_NAME", "GITHUB_SHA", "GITHUB_EVENT_PATH"):
        monkeypatch.delenv(key, raising=False)
    fake.workflows["gate-bisect.yml"] = {"good", "bad", "plan", "issue"}
    fake.permissions.update({"maintainer": "write", "reader": "read"})
    fake.pulls[12] = {"number": 12, "head": {"sha": PR_HEAD}}
    return fake


def night(tmp_path: Path, i: int, rpm: float) -> Path:
    results = f.drain_results([rpm, rpm * 1.01], plan=f.cpu_plan(), fp=f.fingerprint())
    return f.results_folder(tmp_path / f"night{i}", results)


def record(tmp_path, db, values, start=0, extra=None):
    extra = extra or {}
    for i, rpm in enumerate(values, start):
        proc = gate_in_process("history", "add", night(tmp_path, i, rpm), "--db", db,
                               "--commit", SHAS[i], "--commit-time",
                               f"2026-01-{i + 1:02d}T03:00:00+00:00", "--branch", "main",
                               *[str(x) for x in extra.get(i, [])])
        assert proc.returncode == 0, proc.stderr


def test_nights_detection_alert_and_dashboard(tmp_path, env):
    db = tmp_path / "history.sqlite"
    record(tmp_path, db, nights(30, level=233.0, sd=0.03, seed=1, step_at=20, step=121 / 233))
    show = gate_in_process("history", "show", "--db", db)
    assert show.returncode == 0 and "drain.req_per_min" in show.stdout and "30" in show.stdout
    cps = tmp_path / "changepoints.json"
    detect = gate_in_process("history", "detect", "--db", db, "--out", cps,
                             "--fail-on-regression")
    assert detect.returncode == 1, detect.stdout  # a regression stands
    assert f"{SHAS[19][:12]}..{SHAS[20][:12]}" in detect.stdout and "regression" in detect.stdout
    assert gate_in_process("history", "detect", "--db", db).returncode == 0
    alert = gate_in_process("history", "alert", "--db", db, "--detection", cps,
                            "--bisect-plan", "a100-gemma4-26b-pr")
    assert alert.returncode == 0, alert.stderr
    # cpu-smoke judges drain req/min (its output tok/s is the same measurement, not judged)
    assert [d["inputs"] for d in env.dispatches] == [{
        "good": SHAS[19], "bad": SHAS[20], "plan": "a100-gemma4-26b-pr", "issue": "1"}]
    assert len(env.issues) == 1
    again = gate_in_process("history", "alert", "--db", db, "--detection", cps)
    assert again.returncode == 0 and len(env.issues) == 1 and len(env.dispatches) == 1
    html = tmp_path / "dashboard.html"
    board = gate_in_process("history", "dashboard", "--db", db, "--out", html)
    assert board.returncode == 0 and html.read_text().count('<svg class="chart"') == 1
    png = tmp_path / "chart.png"
    chart = gate_in_process("history", "chart", "--db", db, "--check", "drain.req_per_min",
                            "--out", png)
    assert chart.returncode == 0 and png.read_bytes()[:4] == b"\x89PNG"


def test_a_night_is_recorded_once_and_bad_input_is_a_clear_error(tmp_path, env):
    db = tmp_path / "history.sqlite"
    record(tmp_path, db, [233.0])
    again = gate_in_process("history", "add", night(tmp_path, 0, 200.0), "--db", db, "--commit",
                            SHAS[0], "--branch", "main")
    assert again.returncode == 2 and "already recorded" in again.stderr
    skipped = gate_in_process("history", "add", night(tmp_path, 0, 200.0), "--db", db,
                              "--commit", SHAS[0], "--branch", "main", "--if-new")
    assert skipped.returncode == 0 and "nothing added" in skipped.stdout
    missing = gate_in_process("history", "show", "--db", tmp_path / "none.sqlite")
    assert missing.returncode == 2 and "gate: error: no history file" in missing.stderr
    lone = gate_in_process("history", "add", night(tmp_path, 1, 1.0), "--db", db, "--pr", "3",
                           "--commit", SHAS[1], "--branch", "main")
    assert lone.returncode == 2 and "--pr and --pr-head go together" in lone.stderr


def test_acknowledged_only_by_a_writer_for_the_current_head_and_applied(tmp_path, env):
    db = tmp_path / "history.sqlite"
    base = ["--db", db, "--pr", "12", "--sha", PR_HEAD]
    refused = gate_in_process("history", "acknowledge", *base, "--check", "drain.req_per_min",
                              "--reason", "on purpose", "--login", "reader")
    assert refused.returncode == 2
    assert "reader has read access to octo/vllm: acknowledging a slowdown needs write access" \
        in refused.stderr
    for check in ("drain.req_per_min", "sweep.c8.tpot_p50_ms"):
        ok = gate_in_process("history", "acknowledge", *base, "--check", check, "--reason",
                             "pin memory before the h2d copy", "--login", "maintainer")
        assert ok.returncode == 0, ok.stderr
    listed = gate_in_process("history", "acknowledgements", "--db", db)
    assert listed.stdout.count("maintainer") == 2 and "reader" not in listed.stdout
    v = f.verdict()
    path = save_verdict(v.model_copy(update={"checks": [c for c in v.checks
                                                        if c.kind != "absolute"]}),
                        tmp_path / "verdict.json")
    applied = gate_in_process("history", "apply-acks", path, *base)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    verdict = load_verdict(path)
    assert verdict.outcome.value == "pass"
    assert [c.name for c in verdict.checks if c.acknowledged] == ["drain.req_per_min",
                                                                 "sweep.c8.tpot_p50_ms"]
    env.pulls[12] = {"number": 12, "head": {"sha": "f" * 40}}  # a new push
    stale = gate_in_process("history", "acknowledge", "--db", db, "--pr", "12", "--sha",
                            PR_HEAD, "--check", "drain.req_per_min", "--reason", "x",
                            "--login", "maintainer")
    assert stale.returncode == 2 and "a new push needs a new acknowledgement" in stale.stderr



def update(store, run, *extra):
    return gate_in_process("baseline", "update", run, "--baselines-dir", store, "--branch",
                           "main", "--commit", SHAS[5], *[str(x) for x in extra])


def test_a_regressed_night_is_never_promoted_to_baseline(tmp_path, env):
    store = tmp_path / "baselines"
    assert update(store, f.gpu_drain_folder(tmp_path / "good", [230.0, 232.0, 231.0])).returncode == 0
    before = {p.name: p.read_bytes() for p in store.iterdir()}
    slow = f.gpu_drain_folder(tmp_path / "slow", [121.0, 122.0, 120.0])
    proc = update(store, slow)
    assert proc.returncode == 2
    assert "a regressed run is never promoted" in proc.stderr
    assert "against the stored baseline" in proc.stderr
    assert {p.name: p.read_bytes() for p in store.iterdir()} == before


def cpu_run(tmp_path, name, rpm):
    results = f.drain_results([rpm, rpm * 1.01, rpm * 0.99], plan=f.cpu_plan(), fp=f.fingerprint())
    return f.results_folder(tmp_path / name, results)


@pytest.mark.parametrize("acknowledged", [True, False])
def test_the_baseline_moves_after_an_acknowledged_slowdown_merged(tmp_path, env, acknowledged):
    db, store = tmp_path / "history.sqlite", tmp_path / "baselines"
    values = nights(30, level=233.0, sd=0.03, seed=2, step_at=24, step=0.6)
    record(tmp_path, db, values[:24])
    assert update(store, cpu_run(tmp_path, "good", values[23])).returncode == 0
    if acknowledged:  # the slowdown comes as PR 12, acknowledged, then merged as night 24
        ok = gate_in_process("history", "acknowledge", "--db", db, "--pr", "12", "--sha",
                             PR_HEAD, "--check", "drain.req_per_min", "--reason",
                             "correctness first", "--login", "maintainer")
        assert ok.returncode == 0, ok.stderr
    record(tmp_path, db, values[24:], start=24,
           extra={24: ["--source", "post-merge", "--pr", "12", "--pr-head", PR_HEAD]})
    cps = tmp_path / "changepoints.json"
    assert gate_in_process("history", "detect", "--db", db, "--out", cps).returncode == 0
    (drain,) = [s for s in json.loads(cps.read_text())["series"]
                if s["check"] == "drain.req_per_min"]
    assert drain["latest_regressed"] is not acknowledged
    slow = cpu_run(tmp_path, "slow", values[-1])
    assert update(store, slow).returncode == 2  # slower than the baseline: without the history
    moved = update(store, slow, "--detection", cps)
    (path, baseline) = load_all(store)[0]
    if acknowledged:
        assert moved.returncode == 0, moved.stderr
        assert "drain.req_per_min slower on purpose: PR 12, acknowledged by maintainer: " \
            "correctness first" in baseline.provenance.note
        assert baseline.figures["drain.req_per_min"].point < 150
    else:
        assert moved.returncode == 2 and "gate history detect" in moved.stderr
        assert baseline.figures["drain.req_per_min"].point > 200


def test_the_report_shows_each_checks_history_on_main(tmp_path, env):
    db = tmp_path / "history.sqlite"
    record(tmp_path, db, [233.0, 228.0, 236.0, 231.0])
    head = f.results_folder(tmp_path / "head", f.drain_results(
        [121.0, 122.0], plan=f.cpu_plan(), fp=f.fingerprint()))
    verdict = save_verdict(f.verdict(), tmp_path / "verdict.json")
    proc = gate_in_process("report", "--verdict", verdict, "--head", head / "results.json",
                           "--history", db)
    assert proc.returncode == 0, proc.stderr
    assert "| At a glance | Against the threshold | Main, nightly |" in proc.stdout
    row = next(line for line in proc.stdout.split("\n")
               if line.startswith("| Drain req/min (guided) | `"))
    nightly = [(v * v * 1.01) ** 0.5 for v in (233.0, 228.0, 236.0, 231.0)]  # nights' geomeans
    assert row.endswith(f"| {sparkline(nightly)} |") and sparkline(nightly)[2] == "█"
