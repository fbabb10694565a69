"""`OUT/ab-state.json`: the sequential test an A/B runs, kept beside its results so that
`gate ab --resume OUT` adds blocks to the same test (its design, thresholds and calibration
fixed at its start) instead of starting a new one (docs/compare.md, "Resuming an A/B").

Written atomically after every block and at the end. A resume refuses, naming why: a test
that is over (decided, or its design's rounds done), results that do not belong to the state
(other plan, other number of rounds, a broken measurement), another runner class, or builds
whose vLLM differs from the one measured before.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from gate.core.errors import GateError
from gate.core.files import load_json_model, write_atomic
from gate.judge.ab_design import ABDesign
from gate.judge.noise import Noise, NoiseCalibration, runner_key
from gate.judge.verdict import Outcome, Verdict
from gate.measure.results import Results
from gate.plan.spec import Plan
from gate.plan.thresholds import Thresholds
from gate.runner.fingerprint import Fingerprint

STATE_FILE = "ab-state.json"
STATE_SCHEMA_VERSION = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BuildIdentity(_Strict):
    """A build as measured: how it was launched and which vLLM it is."""

    python: str
    env: dict[str, str] = Field(default_factory=dict)
    vllm_version: str | None = None
    vllm_commit: str | None = None
    watched_digest: str | None = Field(
        None, description="the digest of its hot-path files (VllmOrigin): two commits overlaid "
        "on one installed build share a version, not their files")

    @classmethod
    def of(cls, python: str, env: dict[str, str], fp: Fingerprint) -> BuildIdentity:
        return cls(python=python, env=env, vllm_version=fp.vllm_version,
                   vllm_commit=fp.vllm_commit,
                   watched_digest=fp.vllm_origin.watched_digest if fp.vllm_origin else None)

    def differs(self, fp: Fingerprint) -> str | None:
        now = (fp.vllm_version, fp.vllm_commit)
        if now != (self.vllm_version, self.vllm_commit):
            return f"vLLM {self.vllm_version} ({self.vllm_commit}) before, {now[0]} ({now[1]}) now"
        digest = fp.vllm_origin.watched_digest if fp.vllm_origin else None
        if self.watched_digest and digest and digest != self.watched_digest:
            return (f"its hot-path files differ (digest {self.watched_digest} before, "
                    f"{digest} now): another commit")
        return None


class FixedDesign(_Strict):
    """What the sequential test fixed at its start."""

    rounds_per_block: int = Field(ge=1)
    max_rounds: int = Field(ge=1)
    block_s: float | None = Field(None, description="expected runner seconds of one block")
    checks: list[str] = Field(default_factory=list)
    description: str = ""
    note: str = Field("", description="what the calibration predicts beyond the design")

    @classmethod
    def of(cls, design: ABDesign) -> FixedDesign:
        return cls(rounds_per_block=design.design.rounds_per_block,
                   max_rounds=design.design.max_rounds, block_s=design.block_s,
                   checks=list(design.checks), description=design.describe(),
                   note=design.note)


class ABState(_Strict):
    schema_version: int = STATE_SCHEMA_VERSION
    plan: str
    plan_hash: str
    runner_key: str
    thresholds: Thresholds
    design: FixedDesign
    calibrations: list[NoiseCalibration] = Field(default_factory=list)
    noise_description: str = ""
    builds: dict[str, BuildIdentity]
    rounds_done: int = 0
    outcome: Outcome | None = None
    finished: bool = False
    started_in: str | None = Field(
        None, description="where the test started (the CI run's URL), for a rerun's notes")

    def noise(self) -> Noise:
        return Noise(tuple(self.calibrations), self.noise_description)

    def after(self, rounds: int, verdict: Verdict | None, *, finished: bool) -> ABState:
        return self.model_copy(update={"rounds_done": rounds, "finished": finished,
                                       "outcome": verdict.outcome if verdict else None})

    def check_resumable(self, plan: Plan, earlier: dict[str, Results],
                        fingerprints: dict[str, Fingerprint]) -> None:
        """GateError naming why these results and builds cannot continue this test."""
        problems = self._problems(plan, earlier, fingerprints)
        if problems:
            raise GateError("cannot resume this A/B:\n  - " + "\n  - ".join(problems))

    def _problems(self, plan: Plan, earlier: dict[str, Results],
                  fingerprints: dict[str, Fingerprint]) -> list[str]:
        if self.finished:
            return [f"its sequential test is over ({self.outcome.value if self.outcome else '?'}"
                    f" after {self.rounds_done} of {self.design.max_rounds} rounds): a new A/B "
                    "starts a new test"]
        out = []
        if plan.measurement_hash() != self.plan_hash:
            out.append(f"the results' plan hash {plan.measurement_hash()} is not the state's "
                       f"{self.plan_hash}")
        for label, res in earlier.items():
            rounds = len({c.repeat for c in res.cells})
            if rounds != self.rounds_done:
                out.append(f"{label} results hold {rounds} rounds, the state {self.rounds_done}")
            if res.status != "complete":
                out.append(f"the {label} measurement broke ({res.status}): an error is final")
        keys = {runner_key(fp) for fp in fingerprints.values()} - {self.runner_key}
        out += [f"this runner is {key!r}, the test ran on {self.runner_key!r}" for key in keys]
        for label, fp in fingerprints.items():
            if (why := self.builds[label].differs(fp)) is not None:
                out.append(f"the {label} build is not the one measured: {why}")
        return out


def load_state(path: Path) -> ABState:
    return load_json_model(ABState, path, "A/B state file")


def save_state(state: ABState, path: Path) -> None:
    write_atomic(path, state.model_dump_json(indent=1))
