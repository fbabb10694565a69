"""A GPU pair that is a fair pair (issue 26, item 7): two servers of one pair whose logs report
different KV cache sizes are not compared, and two servers that share one GPU with KV caches
sized from free memory are refused before they start."""

from __future__ import annotations

from pathlib import Path

from support.factories import fingerprint, gpu_plan
from support.paths import FIXTURES

from gate.core.progress import Progress
from gate.flows import sides as ab_sides
from gate.measure.measured_build import MeasuredBuild
from gate.measure.results import ServerInfo
from gate.plan.spec import load_plan
from gate.runner.doctor import DoctorReport, served_facts
from gate.runner.probes import parse_server_log

LOGS = FIXTURES / "server_logs"
GPU_KV = "GPU KV cache size: 301,424 tokens"


def served_from(label: str, log_text: str) -> MeasuredBuild:
    """A build measured on a server that wrote `log_text`, as the doctor reads it."""
    build = MeasuredBuild(load_plan("cpu-smoke"), label, "", "", Progress(quiet=True))
    build.doctor = DoctorReport(served=served_facts([], parse_server_log(log_text), 2))
    return build


def log(name: str) -> str:
    return (LOGS / name).read_text()


def test_the_fixture_logs_report_their_kv_cache_size():
    assert parse_server_log(log("gpu_v2.log")).kv_cache_tokens == 301_424
    assert parse_server_log(log("cpu_v1.log")).kv_cache_tokens == 1_048_576


def test_two_logs_with_different_kv_caches_are_not_a_fair_pair():
    """The head's server started second on a shared GPU and got less of it."""
    assert GPU_KV in log("gpu_v2.log")
    smaller = log("gpu_v2.log").replace(GPU_KV, "GPU KV cache size: 288,112 tokens")
    why = ab_sides.kv_mismatch(served_from("base", log("gpu_v2.log")), served_from("head", smaller))
    assert why is not None
    assert "the base server's KV cache holds 301,424 tokens and the head's 288,112" in why
    assert "server.kv_cache_memory_bytes" in why


def test_the_same_kv_cache_or_a_log_that_does_not_say_is_no_mismatch():
    v2, v1 = served_from("base", log("gpu_v2.log")), served_from("head", log("gpu_v1_pinned.log"))
    assert ab_sides.kv_mismatch(v2, v1) is None  # 301,424 tokens both (the runner rule is its own)
    silent = "\n".join(ln for ln in log("gpu_v2.log").splitlines() if "KV cache size" not in ln)
    assert ab_sides.kv_mismatch(v2, served_from("head", silent)) is None
    assert ab_sides.kv_mismatch(v2, MeasuredBuild(load_plan("cpu-smoke"), "head", "", "",
                                            Progress(quiet=True))) is None  # not read at all


def sides_on(gpus: int) -> dict[str, ab_sides.Side]:
    fp = fingerprint("NVIDIA A100-SXM4-80GB", gpus=gpus) if gpus else fingerprint()
    return {label: ab_sides.Side(
        build=ab_sides.Build(label=label), out=Path(label),
        info=ServerInfo(base_url="", started_by_gate=True, model=""), fingerprint=fp)
        for label in ("base", "head")}


def pair_plan(*, kv: int | None, servers: str = "persistent"):
    """The shipped pair plan (both servers up on one GPU), its KV cache fixed or not."""
    plan = load_plan("a100-gemma3-1b-pair")
    return plan.model_copy(update={
        "server": plan.server.model_copy(update={"kv_cache_memory_bytes": kv}),
        "ab": plan.ab.model_copy(update={"servers": servers})})


def test_the_shipped_pair_plan_fixes_its_kv_cache():
    shipped = load_plan("a100-gemma3-1b-pair")
    assert shipped.ab.servers == "persistent" and shipped.server.kv_cache_memory_bytes
    assert ab_sides.shared_gpu_problem(shipped, sides_on(1)) is None


def test_two_servers_on_one_gpu_need_a_fixed_kv_cache_size():
    why = ab_sides.shared_gpu_problem(pair_plan(kv=None), sides_on(1))
    assert why is not None and "set server.kv_cache_memory_bytes" in why
    assert "ab.servers: per_round" in why


def test_one_server_at_a_time_or_no_gpu_needs_none():
    assert ab_sides.shared_gpu_problem(pair_plan(kv=None, servers="per_round"), sides_on(1)) is None
    assert ab_sides.shared_gpu_problem(pair_plan(kv=None), sides_on(0)) is None
    assert gpu_plan().ab.servers == "per_round"  # the plan default: one server at a time
    assert ab_sides.shared_gpu_problem(gpu_plan(), sides_on(1)) is None
