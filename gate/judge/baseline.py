"""Stored baselines: one YAML file per (hardware, model, plan) in baselines/.

A baseline holds the figures `gate compare` judges (per-repeat values, or mean/std/n when
only a summary is known), the identity it is matched on (plan name and hash, hardware key,
model), where the figures came from (`measured` by `gate baseline update` on a commit, or
`reported` from a public source) and the earlier entries it replaced.

Matching never guesses: a baseline applies only when plan name, hardware and model agree,
and the plan hash too when both sides have one. Anything else is an error naming the
difference.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from gate.core.errors import GateError
from gate.core.store import StrictModel, load_record, load_records, slug, write_record
from gate.measure.results import Results
from gate.plan.spec import Plan

BASELINE_SCHEMA_VERSION = 1
MAX_HISTORY = 20


class Figure(StrictModel):
    """One figure: per-repeat values, or a summary (mean, std, n)."""

    values: list[float] | None = Field(None, description="one value per repeat")
    mean: float | None = None
    std: float | None = Field(None, ge=0, description="spread of one measurement (1 sigma)")
    n: int | None = Field(None, ge=1, description="measurements behind the mean")
    unit: str = ""
    note: str = ""

    @model_validator(mode="after")
    def _has_a_value(self) -> Figure:
        if self.values:
            if any(v <= 0 for v in self.values):
                raise ValueError("values must all be > 0")
        elif self.mean is None:
            raise ValueError("give either values (per repeat) or mean (with std and n)")
        elif self.mean <= 0:
            raise ValueError("mean must be > 0")
        return self

    @property
    def point(self) -> float:
        if self.values:
            return sum(self.values) / len(self.values)
        assert self.mean is not None  # the model requires values or a mean
        return float(self.mean)

    @property
    def count(self) -> int:
        return len(self.values) if self.values else (self.n or 1)


class Provenance(StrictModel):
    kind: Literal["measured", "reported"]
    date: str | None = Field(None, description="ISO date the figures were taken or reported")
    commit: str | None = Field(None, description="vLLM (or repository) commit measured")
    branch: str | None = None
    source: str | None = Field(None, description="who produced them: `gate baseline update`, an issue")
    url: str | None = None
    results: str | None = Field(None, description="the results.json the figures came from")
    gate_version: str | None = Field(
        None, description="the gate that measured them (0.1.0+g<commit> from a checkout)")
    note: str = ""

    @model_validator(mode="after")
    def _reported_has_source(self) -> Provenance:
        if self.kind == "reported" and not (self.url or self.source):
            raise ValueError("a reported baseline needs a url or source")
        return self


class HistoryEntry(StrictModel):
    provenance: Provenance
    plan_hash: str | None = None
    vllm_version: str | None = None
    figures: dict[str, Figure]


class Baseline(StrictModel):
    schema_version: int = BASELINE_SCHEMA_VERSION
    description: str = ""
    plan: str = Field(description="plan name, e.g. a100-gemma4-26b")
    plan_hash: str | None = Field(None, description="Plan.measurement_hash(); null: not known")
    hardware_key: str = Field(description="Fingerprint.hardware_key, or an fnmatch pattern of it")
    model: str = Field(description="model name, compared case-insensitively on its last path part")
    vllm_version: str | None = None
    vllm_commit: str | None = None
    plan_facts: dict[str, Any] = Field(
        default_factory=dict,
        description="plan settings checked when plan_hash is null (drain_requests, max_num_seqs, ...)",
    )
    provenance: Provenance
    figures: dict[str, Figure] = Field(min_length=1)
    history: list[HistoryEntry] = Field(default_factory=list)


# ---------------------------------------------------------------- identity of a run


def model_key(plan: Plan) -> str:
    """The model a plan serves, as baselines name it: last path part, lower case."""
    if plan.server.model:
        return plan.server.model.rstrip("/").split("/")[-1].lower()
    t = plan.server.tiny_model
    assert t is not None  # a plan names a model folder or a tiny model
    return f"tiny-random-v{t.vocab_size}-h{t.hidden_size}-l{t.num_layers}"


def plan_facts(plan: Plan) -> dict[str, Any]:
    spec = plan.server.speculative_config or {}
    return {
        "drain_requests": plan.drain.requests,
        "drain_concurrency": plan.drain.concurrency,
        "max_num_seqs": plan.server.max_num_seqs,
        "max_tokens": plan.workload.max_tokens,
        "num_speculative_tokens": spec.get("num_speculative_tokens"),
    }


def mismatches(baseline: Baseline, results: Results) -> list[str]:
    """Every way `baseline` does not describe the run in `results`; empty when it applies."""
    out = []
    if baseline.plan != results.plan.name:
        out.append(f"plan: baseline {baseline.plan!r}, results {results.plan.name!r}")
    hw = results.fingerprint.hardware_key
    if not fnmatch.fnmatchcase(hw.lower(), baseline.hardware_key.lower()):
        out.append(f"hardware: baseline {baseline.hardware_key!r}, results {hw!r}")
    if baseline.model.split("/")[-1].lower() != model_key(results.plan):
        out.append(f"model: baseline {baseline.model!r}, results {model_key(results.plan)!r}")
    if baseline.plan_hash and baseline.plan_hash != results.plan_hash:
        out.append(
            f"plan_hash: baseline {baseline.plan_hash}, results {results.plan_hash} "
            "(the plan's server/workload/drain/sweep changed)"
        )
    facts = plan_facts(results.plan)
    for key, value in baseline.plan_facts.items():
        if key in facts and facts[key] != value:
            out.append(f"plan {key}: baseline {value!r}, results {facts[key]!r}")
    return out


# ---------------------------------------------------------------- load and match


def load_baseline(path: str | Path) -> Baseline:
    return load_record(Baseline, path, "baseline", BASELINE_SCHEMA_VERSION)


def load_all(directory: str | Path) -> list[tuple[Path, Baseline]]:
    return load_records(Baseline, directory, "baseline", BASELINE_SCHEMA_VERSION)


def find_baseline(directory: str | Path, results: Results) -> tuple[Path, Baseline]:
    """The one baseline in `directory` that applies to `results`, or a GateError that says
    what was found and why none applies."""
    found = load_all(directory)
    who = (
        f"plan {results.plan.name!r} on {results.fingerprint.hardware_key!r} "
        f"with model {model_key(results.plan)!r}"
    )
    if not found:
        raise GateError(
            f"no baselines in {directory} for {who}. Compare against the base build instead "
            "(gate compare HEAD --against BASE_RESULTS) or record one with `gate baseline update`."
        )
    fits = [(p, b) for p, b in found if not mismatches(b, results)]
    if not fits:
        near = [(p, b) for p, b in found if b.plan == results.plan.name] or found
        lines = [f"no baseline in {directory} matches {who}:"]
        for p, b in near[:8]:
            lines.append(f"  {p.name}: " + "; ".join(mismatches(b, results)))
        lines.append(
            "Compare against the base build instead (gate compare HEAD --against BASE_RESULTS) "
            "or record a baseline for this runner with `gate baseline update`."
        )
        raise GateError("\n".join(lines))
    # Prefer a measured baseline with the same plan hash over a reported one.
    fits.sort(key=lambda pb: (pb[1].plan_hash != results.plan_hash, pb[1].provenance.kind != "measured"))
    best = fits[0]
    rank = (best[1].plan_hash != results.plan_hash, best[1].provenance.kind != "measured")
    tied = [p.name for p, b in fits if (b.plan_hash != results.plan_hash, b.provenance.kind != "measured") == rank]
    if len(tied) > 1:
        raise GateError(
            f"several baselines in {directory} match {who}: {', '.join(tied)}; pass one with --baseline FILE"
        )
    return best


# ---------------------------------------------------------------- update


def default_filename(results: Results) -> str:
    return f"{slug(results.plan.name)}--{slug(results.fingerprint.hardware_key)}--{slug(model_key(results.plan))}.yaml"


def refuse_branch(branch: str | None, default_branch: str, force: bool) -> str | None:
    """Why a baseline must not be written from this branch, or None when it may."""
    if force:
        return None
    if not branch:
        return (
            "cannot tell which branch these results come from: pass --branch (or set "
            "GITHUB_REF_NAME), or --force-branch to record anyway"
        )
    if branch != default_branch:
        return (
            f"results are from branch {branch!r}, not the default branch {default_branch!r}: "
            "baselines are recorded from the default branch only (--force-branch overrides)"
        )
    return None


def existing_for(directory: Path, results: Results) -> tuple[Path, Baseline] | None:
    """A stored baseline with the same plan, hardware and model (the plan hash may differ)."""
    for path, b in load_all(directory):
        left = [m for m in mismatches(b, results) if not m.startswith(("plan_hash", "plan "))]
        if not left:
            return path, b
    return None


def build_baseline(
    results: Results,
    figures: dict[str, list[float]],
    provenance: Provenance,
    units: dict[str, str] | None = None,
) -> Baseline:
    fp = results.fingerprint
    units = units or {}
    return Baseline(
        description=f"measured by gate on {fp.hardware_key}",
        plan=results.plan.name,
        plan_hash=results.plan_hash,
        hardware_key=fp.hardware_key,
        model=model_key(results.plan),
        vllm_version=fp.vllm_version,
        vllm_commit=fp.vllm_commit,
        plan_facts={k: v for k, v in plan_facts(results.plan).items() if v is not None},
        provenance=provenance,
        figures={name: Figure(values=vals, unit=units.get(name, "")) for name, vals in figures.items() if vals},
    )


def update_baseline(
    directory: str | Path,
    results: Results,
    *,
    figures: dict[str, list[float]],
    provenance: Provenance,
    units: dict[str, str] | None = None,
) -> Path:
    """Write or refresh the baseline for `results` in `directory`, keeping what it replaced in
    its history. The caller has checked that the results are fit to be a baseline."""
    directory = Path(directory)
    new = build_baseline(results, figures, provenance, units)
    if not new.figures:
        raise GateError("the results hold no figures to record (no drain and no guided sweep cells)")
    existing = existing_for(directory, results)
    path = existing[0] if existing else directory / default_filename(results)
    if existing:
        old = existing[1]
        entry = HistoryEntry(
            provenance=old.provenance,
            plan_hash=old.plan_hash,
            vllm_version=old.vllm_version,
            figures=old.figures,
        )
        new.history = [entry, *old.history][:MAX_HISTORY]
        new.description = old.description or new.description
    write_record(path, new)
    return path


