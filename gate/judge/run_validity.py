"""Whether a measurement can be judged at all: run status, failed requests, guided outputs that
do not follow their schema, and A/B runs that are not comparable. Any of these makes the
verdict `error`: the figures say nothing about speed.

Pure functions from typed models to errors (and the validity checks shown in the verdict).
"""

from __future__ import annotations

from gate.judge.checks import HIGHER, LOWER
from gate.judge.first_cause import RUN_ERROR
from gate.judge.verdict import Check, Outcome
from gate.measure.output_shape import guided_output_shape
from gate.measure.results import Results, is_guided
from gate.plan.runner_pin import label
from gate.plan.thresholds import Thresholds
from gate.runner.fingerprint import runner_line


def integrity_errors(results: Results, who: str) -> list[str]:
    """Why the measurement in `results` cannot be judged at all (empty when it can)."""
    out = []
    if results.status != "complete" and not results.errors:
        out.append(f"{who} run status is {results.status!r}, not complete")
    out += [f"{who}{RUN_ERROR}{e}" for e in results.errors]
    measured = [c for c in results.cells if c.phase in ("drain", "sweep")]
    if not measured:
        out.append(f"{who} results hold no measured cells")
    failed = [c for c in measured if c.failed > 0]
    if failed:
        total = sum(c.failed for c in failed)
        where = ", ".join(f"{c.key.label}: {c.failed}" for c in failed[:6])
        sample = next((r.error for r in results.records if r.error and r.phase != "warmup"), None)
        out.append(
            f"{who}: {total} request(s) failed ({where})" + (f"; first error: {sample[:200]}" if sample else "")
        )
    for c in measured:
        if c.completed == 0:
            out.append(f"{who}: cell {c.key.label} completed no requests")
    return out


def validity_checks(results: Results, thresholds: Thresholds, who: str = "head") -> tuple[list[Check], list[str]]:
    guided = [c for c in results.cells if is_guided(c.arm) and c.phase in ("drain", "sweep")]
    completed = sum(c.completed for c in guided)
    if not completed:
        return [], []
    errors = []
    checked = sum(c.valid_outputs + c.invalid_outputs for c in guided)
    valid = sum(c.valid_outputs for c in guided)
    share = valid / completed
    if checked < completed:
        errors.append(
            f"{who}: only {checked} of {completed} guided outputs were validated against their schema"
        )
    if share < thresholds.validity_min:
        errors.append(
            f"{who}: {completed - valid} of {completed} guided outputs are not valid JSON for their "
            f"schema ({share:.1%} valid, {thresholds.validity_min:.0%} required): the grammar was not "
            "applied or the output was cut off"
        )
    lengths = sum(c.length_finishes for c in guided)
    if lengths > thresholds.max_length_finishes:
        errors.append(
            f"{who}: {lengths} guided request(s) ended with finish_reason=length "
            f"(allowed {thresholds.max_length_finishes}): raise max_tokens or fix the schema"
        )
    failed = sum(c.failed for c in results.cells if c.phase in ("drain", "sweep"))
    bad_share = share < thresholds.validity_min or checked < completed
    checks = [
        Check(name="validity.guided_valid_share", label="valid guided JSON share", kind="validity",
              direction=HIGHER, unit="share", head=share, threshold=thresholds.validity_min,
              outcome=Outcome.ERROR if bad_share else Outcome.PASS,
              note=f"{valid}/{completed} valid"),
        Check(name="validity.guided_length_finishes", label="guided finish_reason=length",
              kind="validity", direction=LOWER, unit="requests", head=float(lengths),
              threshold=float(thresholds.max_length_finishes),
              outcome=Outcome.ERROR if lengths > thresholds.max_length_finishes else Outcome.PASS),
        Check(name="requests.failed", label="failed requests", kind="validity", direction=LOWER,
              unit="requests", head=float(failed), threshold=0.0,
              outcome=Outcome.ERROR if failed else Outcome.PASS),
    ]
    return checks, errors


def ab_errors(head: Results, base: Results) -> list[str]:
    """Why head and base results are not comparable, naming each difference."""
    out = []
    if head.plan_hash != base.plan_hash:
        diff = plan_differences(base.plan.model_dump(mode="json"), head.plan.model_dump(mode="json"))
        out.append(
            f"plan_hash differs: base {base.plan_hash} (plan {base.plan.name!r}), head {head.plan_hash} "
            f"(plan {head.plan.name!r})" + (f": {'; '.join(diff)}" if diff else "")
        )
    hb, hh = base.fingerprint.hardware_key, head.fingerprint.hardware_key
    if hb != hh:
        out.append(f"hardware differs: base {hb!r}, head {hh!r}")
    rb, rh = base.fingerprint.model_runner, head.fingerprint.model_runner
    if rb and rh and rb != rh:
        out.append(
            f"model runner differs: base {runner_line(base.fingerprint)}, head "
            f"{runner_line(head.fingerprint)}: the builds ran different structured-output code "
            "paths; pin one runner for both (VLLM_USE_V2_MODEL_RUNNER in the plan's server.env, "
            "or --model-runner)")
    return out


def shape_warnings(results: Results, thresholds: Thresholds, who: str) -> list[str]:
    """The workload's shape as it ran against the plan's expectation: guided outputs far
    shorter than expected mean prefill, not decode steps with guided rows, fills the cells
    (docs/compare.md#the-workloads-shape)."""
    expected = results.plan.workload.expected.output_tokens
    share = thresholds.output_length_min_share
    shape = guided_output_shape(results.records)
    if not expected or share is None or shape is None or shape.mean_tokens >= share * expected:
        return []
    return [f"{who}: guided outputs averaged {shape.mean_tokens:.0f} tokens, under "
            f"{share:.0%} of the {expected} the plan expects: the workload did not have its "
            "intended shape (short outputs dilute the per-step decode cost this plan measures)"]


def runner_notes(results: Results, who: str) -> tuple[list[str], list[str]]:
    """(errors, warnings) about the model runner that served `results`
    (docs/compare.md#the-model-runner): a log that names two runners, or a runner other than
    the one the environment pinned, is an error; a server the gate started whose log named
    none is a warning."""
    fp = results.fingerprint
    served = results.doctor.served if results.doctor else None
    if served and served.runner_conflict:
        named = ", ".join(label(r) for r in served.runner_conflict)
        return [f"{who}: the server logs name more than one model runner ({named}): which "
                "structured-output path was measured is not known; pin one with "
                "VLLM_USE_V2_MODEL_RUNNER"], []
    if fp.model_runner_source == "server log" and fp.model_runner_pinned \
            and fp.model_runner != fp.model_runner_pinned:
        return [f"{who}: VLLM_USE_V2_MODEL_RUNNER pins the {label(fp.model_runner_pinned)} but "
                f"the {label(fp.model_runner)} served (vLLM: {fp.model_runner_line})"], []
    if results.server.started_by_gate and fp.model_runner_source != "server log":
        return [], [f"{who}: the server log did not say which model runner served"]
    return [], []


def plan_differences(a: dict, b: dict, prefix: str = "", limit: int = 6) -> list[str]:
    """Paths where two plan dumps differ (base value -> head value), for error messages."""
    out: list[str] = []
    for key in sorted(set(a) | set(b)):
        if key in ("repeats", "thresholds", "name", "description"):
            continue
        va, vb, path = a.get(key), b.get(key), f"{prefix}{key}"
        if isinstance(va, dict) and isinstance(vb, dict):
            out += plan_differences(va, vb, path + ".", limit)
        elif va != vb:
            out.append(f"{path}: {va!r} -> {vb!r}")
        if len(out) >= limit:
            break
    return out[:limit]


# ---------------------------------------------------------------- the verdict



def runner_findings(results: Results, who: str) -> tuple[list[str], list[str]]:
    """(errors, warnings) from the runner doctor's look at the serving processes: a finding
    that invalidates the measurement (torch threads beyond the CPUs it may use, another
    process on the GPU) makes the verdict an error that says what to fix."""
    if results.doctor is None:
        return [], []
    errors = [f"{who} runner: {f.title}; fix: {f.fix}" for f in results.doctor.invalidating]
    warnings = [f"{who} runner: {f.title}" + (f"; fix: {f.fix}" if f.fix else "")
                for f in results.doctor.findings if f.severity.value == "warning"]
    return errors, warnings


# The runner during the measurement: when these move, the figures moved with them.
STEAL_WARN_PCT = 2.0  # mean share of CPU time stolen by the hypervisor over the run
STEAL_CELL_WARN_PCT = 10.0  # in any one cell
CLOCK_WARN_SPREAD = 0.10  # the CPU clock's range over the run, as a share of its lowest
DRIFT_WARN_PCT = 10.0  # the base build's figure from its first block to its last


def machine_warnings(runs: list[Results]) -> list[str]:
    """What the runner did during these runs' cells (one machine: the A/B's two builds
    together): steal time, and a CPU clock that moved."""
    cells = [c for res in runs for c in res.cells if c.machine is not None]
    steal = [(c.machine.steal_pct, c.key.label) for c in cells
             if c.machine and c.machine.steal_pct is not None]
    out = []
    if steal:
        mean = sum(s for s, _ in steal) / len(steal)
        worst, where = max(steal)
        if mean > STEAL_WARN_PCT or worst > STEAL_CELL_WARN_PCT:
            out.append(f"the hypervisor took {mean:.1f}% of this runner's CPU time during the "
                       f"cells (steal; {worst:.0f}% in {where}): the figures include it, and "
                       "it varies from minute to minute; a runner with dedicated CPUs is "
                       "steadier")
    clock = [c.machine.cpu_mhz for c in cells if c.machine and c.machine.cpu_mhz]
    if clock and max(clock) > (1 + CLOCK_WARN_SPREAD) * min(clock):
        out.append(f"the CPU clock ranged from {min(clock):.0f} to {max(clock):.0f} MHz during "
                   "the cells: a cell measured at a lower clock is slower for it (set the "
                   "governor to performance, or use a runner with a fixed clock)")
    return out


def drift_warnings(base: Results, rounds_per_block: int) -> list[str]:
    """The base build's headline figures from its first block to its last: the same build on
    the same runner, so a move is the runner's (thermal, credits, neighbours)."""
    out = []
    for phase, arm, metric in (("drain", "guided", "output_throughput"),
                               ("sweep", "guided", "tpot_p50")):
        levels = sorted({c.key.concurrency for c in base.cells_of(phase, arm)})
        for level in levels:
            by_round: dict[int, float] = {}
            for c in base.cells_of(phase, arm, level):
                if (value := _figure(c, metric)) is not None:
                    by_round[c.repeat] = value
            blocks = sorted({r // rounds_per_block for r in by_round})
            if len(blocks) < 2:
                continue
            first, last = (_mean([v for r, v in by_round.items()
                                  if r // rounds_per_block == b]) for b in (blocks[0], blocks[-1]))
            move = (last / first - 1.0) * 100.0
            if abs(move) > DRIFT_WARN_PCT:
                what = "drain output tok/s" if phase == "drain" else f"TPOT p50 at c={level}"
                out.append(f"base: {what} moved by {move:+.0f}% from its first block to its "
                           f"last ({blocks[-1] + 1} blocks): the same build on the same runner, "
                           "so the runner drifted while the A/B ran (each block pairs the "
                           "builds, so the paired figures cancel most of it)")
    return out


def _figure(cell, metric: str) -> float | None:
    if metric == "tpot_p50":
        return cell.tpot_ms.p50 if cell.tpot_ms is not None and cell.tpot_ms.count else None
    return getattr(cell, metric) or None


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)
