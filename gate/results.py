"""results.json: the seam between `gate run` and everything after it.

Schema (version 1) is documented in docs/results-schema.md. Every stage after `run` reads
only this file, so a verdict can be recomputed offline from a CI artifact.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from gate import __version__
from gate.errors import GateError, load_json_model
from gate.fingerprint import Fingerprint
from gate.plan import Plan

RESULTS_SCHEMA_VERSION = 1

Arm = Literal["guided", "free"]
Phase = Literal["warmup", "drain", "sweep"]


class RequestRecord(BaseModel):
    """One request as the client saw it. Times in seconds; send_s relative to run start."""

    model_config = ConfigDict(extra="forbid")

    index: int
    phase: Phase
    arm: Arm
    concurrency: int
    repeat: int = 0
    send_s: float
    ttft_s: float | None = None
    itl_s: list[float] = Field(default_factory=list, description="every gap between chunks")
    e2el_s: float | None = None
    output_tokens: int | None = Field(None, description="from the usage block")
    prompt_tokens: int | None = None
    finish_reason: str | None = None
    http_status: int | None = None
    error: str | None = None
    text: str = ""
    json_valid: bool | None = Field(None, description="guided only: parsed and validated")
    validation_error: str | None = None

    @property
    def ok(self) -> bool:
        """Completed with HTTP 200, no error, and a usage block."""
        return self.error is None and self.http_status == 200 and self.output_tokens is not None


class Distribution(BaseModel):
    """A metric's distribution in milliseconds, with vLLM bench serve's names."""

    model_config = ConfigDict(extra="forbid")

    mean: float
    std: float
    p50: float
    p90: float
    p99: float
    count: int


class CellSummary(BaseModel):
    """One measured cell: the drain, or one (concurrency, arm) of the sweep, one repeat."""

    model_config = ConfigDict(extra="forbid")

    phase: Literal["drain", "sweep"]
    arm: Arm
    concurrency: int
    repeat: int
    requests: int
    completed: int
    failed: int
    duration_s: float
    total_output_tokens: int
    request_throughput: float = Field(description="completed / duration, req/s")
    output_throughput: float = Field(description="output tokens / duration, tok/s")
    ttft_ms: Distribution | None = None
    tpot_ms: Distribution | None = None
    itl_ms: Distribution | None = None
    e2el_ms: Distribution | None = None
    valid_outputs: int = 0
    invalid_outputs: int = 0
    length_finishes: int = 0

    @model_validator(mode="before")
    @classmethod
    def _drop_derived(cls, data: Any) -> Any:
        # requests_per_min is computed and written to results.json: reading it back must not
        # trip extra="forbid".
        if isinstance(data, dict) and "requests_per_min" in data:
            data = {k: v for k, v in data.items() if k != "requests_per_min"}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def requests_per_min(self) -> float:
        return self.request_throughput * 60.0

    @property
    def key(self) -> str:
        return "drain" if self.phase == "drain" else f"c{self.concurrency}-{self.arm}"


class LevelRatio(BaseModel):
    """Guided over free at one concurrency level and repeat. Healthy TPOT ratio ~1.0 on GPUs."""

    model_config = ConfigDict(extra="forbid")

    concurrency: int
    repeat: int
    tpot_p50_ratio: float | None
    output_throughput_ratio: float | None


class ServerInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base_url: str
    started_by_gate: bool
    model: str
    command: list[str] = Field(default_factory=list)
    log_path: str | None = None
    env_overrides: dict[str, str] = Field(
        default_factory=dict, description="environment of this build only (A/B arms)"
    )
    startup_s: float | None = None
    exit_code: int | None = None


class Results(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = RESULTS_SCHEMA_VERSION
    gate_version: str = __version__
    label: str = Field("head", description="which build this is: head, base, or free text")
    created_at: str
    plan: Plan
    plan_hash: str
    fingerprint: Fingerprint
    server: ServerInfo
    status: Literal["complete", "error", "interrupted"] = "complete"
    errors: list[str] = Field(default_factory=list, description="what broke the measurement")
    timings_s: dict[str, float] = Field(default_factory=dict, description="where the time went")
    cells: list[CellSummary] = Field(default_factory=list)
    ratios: list[LevelRatio] = Field(default_factory=list)
    records: list[RequestRecord] = Field(default_factory=list)

    def cell(self, phase: str, arm: str, concurrency: int, repeat: int = 0) -> CellSummary | None:
        for c in self.cells:
            if (c.phase, c.arm, c.concurrency, c.repeat) == (phase, arm, concurrency, repeat):
                return c
        return None

    def cells_of(self, phase: str, arm: str | None = None, concurrency: int | None = None):
        return [
            c
            for c in self.cells
            if c.phase == phase
            and (arm is None or c.arm == arm)
            and (concurrency is None or c.concurrency == concurrency)
        ]


def write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file in the same folder, so a crash never leaves half a file
    and a failed run never clobbers what was stored before."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_results(results: Results, path: Path) -> None:
    write_atomic(path, results.model_dump_json(indent=1))


def load_results(path: str | Path) -> Results:
    path = Path(path)
    if path.is_dir():
        path = path / "results.json"
    results = load_json_model(Results, path, f"results file (schema v{RESULTS_SCHEMA_VERSION})")
    if results.schema_version != RESULTS_SCHEMA_VERSION:
        raise GateError(
            f"{path} has results schema v{results.schema_version}; this gate reads v{RESULTS_SCHEMA_VERSION}"
        )
    return results
