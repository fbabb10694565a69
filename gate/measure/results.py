"""results.json: the seam between `gate run` and everything after it.

Schema (version 1) is documented in docs/results-schema.md. Every stage after `run` reads
only this file, so a verdict can be recomputed offline from a CI artifact.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from gate import __version__
from gate.core.errors import GateError
from gate.core.files import load_json_model, write_atomic
from gate.plan.spec import Plan
from gate.runner.doctor import DoctorReport
from gate.runner.fingerprint import Fingerprint

RESULTS_SCHEMA_VERSION = 2

Arm = Literal["guided", "free", "unique"]
ARMS = ("guided", "free", "unique")
# Arms whose requests carry a schema: guided (the workload's schemas, the grammar cache hits
# after their first use) and unique (a schema per request that the server has not seen).
GUIDED_ARMS = ("guided", "unique")


def is_guided(arm: str) -> bool:
    return arm in GUIDED_ARMS
Phase = Literal["warmup", "drain", "sweep"]


@dataclass(frozen=True, order=True)
class CellKey:
    """What identifies a cell, its request records and its summary: the one way to name one."""

    phase: Phase
    arm: Arm
    concurrency: int
    repeat: int = 0

    @property
    def label(self) -> str:
        """`drain guided c=32 r1`, `sweep free c=8 r2`; warm-up cells have no repeat."""
        text = f"{self.phase} {self.arm} c={self.concurrency}"
        return text if self.phase == "warmup" else f"{text} r{self.repeat + 1}"

    @classmethod
    def parse(cls, label: str) -> CellKey:
        """The inverse of `label`; the repeat may be left out (r1)."""
        parts = label.split()
        try:
            phase, arm, conc, *rest = parts
            if phase not in ("warmup", "drain", "sweep") or arm not in ARMS:
                raise ValueError
            if not conc.startswith("c=") or len(rest) > 1:
                raise ValueError
            repeat = int(rest[0].removeprefix("r")) - 1 if rest else 0
            if not rest or rest[0].startswith("r"):
                return cls(phase, arm, int(conc[2:]), repeat)  # type: ignore[arg-type]
        except ValueError:
            pass
        raise GateError(f"{label!r} is not a cell label like 'sweep guided c=8 r1'")


class _Keyed(BaseModel):
    """A model carrying a cell's identity in flat fields (as results.json stores it)."""

    phase: Phase
    arm: Arm
    concurrency: int
    repeat: int = 0

    @property
    def key(self) -> CellKey:
        return CellKey(self.phase, self.arm, self.concurrency, self.repeat)


class RequestRecord(_Keyed):
    """One request as the client saw it. Times in seconds; send_s relative to run start."""

    model_config = ConfigDict(extra="forbid")

    index: int
    send_s: float
    ttft_s: float | None = None
    itl_s: list[float] = Field(default_factory=list, description="every gap between chunks")
    deliveries: int | None = Field(
        None, description="separate arrivals of output text (stream reads that carried a "
        "content chunk); far fewer than the tokens means the stream was held back")
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


class ServerTimes(BaseModel):
    """vLLM's own per-request histograms over one cell (its /metrics before and after the
    cell): means over the requests that finished in between, in ms. A guided request waits
    for its grammar in the scheduler's queue, so queue time is where compilation shows."""

    model_config = ConfigDict(extra="forbid")

    requests: int = Field(description="requests the histograms counted during the cell")
    queue_ms: float | None = Field(
        None, description="vllm:request_queue_time_seconds: queued to first scheduled (the "
        "wait for capacity, and for a guided request the wait for its grammar)")
    prefill_ms: float | None = Field(
        None, description="vllm:request_prefill_time_seconds: first scheduled to first token")
    ttft_ms: float | None = Field(
        None, description="vllm:time_to_first_token_seconds: the server's own TTFT")


class MachineSample(BaseModel):
    """What the runner did while a cell was measured (gate.runner.probes)."""

    model_config = ConfigDict(extra="forbid")

    steal_pct: float | None = Field(
        None, description="% of the machine's CPU time the hypervisor stole during the cell")
    cpu_mhz: float | None = Field(None, description="mean CPU clock at the cell's end, MHz")


class CellSummary(_Keyed):
    """One measured cell: the drain, or one (concurrency, arm) of the sweep, one repeat."""

    model_config = ConfigDict(extra="forbid")

    phase: Literal["drain", "sweep"]
    requests: int
    completed: int
    failed: int
    duration_s: float = Field(description="drain: first send to last byte; sweep: the window")
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
    coalesced_requests: int = Field(
        0, description="requests whose stream arrived coalesced (left out of the latencies)"
    )
    remeasured: int = Field(0, description="earlier attempts at this cell discarded as coalesced")
    discarded_coalesced: int = Field(
        0, description="coalesced requests in the discarded attempts"
    )
    warm_in_requests: int = Field(0, description="sent before the window opened (not measured)")
    filler_requests: int = Field(0, description="kept the load on after the window closed")
    server_times: ServerTimes | None = Field(
        None, description="vLLM's /metrics over the cell (None: not scraped or not exposed)")
    machine: MachineSample | None = Field(
        None, description="the runner during the cell: steal time, CPU clock (None: not read)")
    window_of: Literal["drain"] | None = Field(
        None, description="measured in that cell's window, not one of its own (ab.cells: "
        "judged; its requests are recorded under that cell)")

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



class LevelRatio(BaseModel):
    """Guided over free at one concurrency level and repeat. Healthy TPOT ratio ~1.0 on GPUs.
    The TTFT ratios are the wait before the first token that a schema adds (the grammar, its
    compilation on a cache miss): guided-minus-free TTFT relative to the free arm's."""

    model_config = ConfigDict(extra="forbid")

    concurrency: int
    repeat: int
    tpot_p50_ratio: float | None
    output_throughput_ratio: float | None
    ttft_p50_ratio: float | None = Field(None, description="guided TTFT p50 / free TTFT p50")
    unique_ttft_p50_ratio: float | None = Field(
        None, description="unique-schema TTFT p50 / free TTFT p50 (the cache-miss path)")


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
    status: Literal["complete", "error"] = "complete"
    errors: list[str] = Field(default_factory=list, description="what broke the measurement")
    timings_s: dict[str, float] = Field(default_factory=dict, description="where the time went")
    sequential_rounds: int | None = Field(
        None, description="gate ab: the most rounds its sequential test planned (its looks); "
        "compare replays the looks round by round. None: the repeats are judged together",
    )
    doctor: DoctorReport | None = Field(
        None, description="the runner doctor's findings on the serving processes")
    cells: list[CellSummary] = Field(default_factory=list)
    ratios: list[LevelRatio] = Field(default_factory=list)
    records: list[RequestRecord] = Field(default_factory=list)

    def index(self) -> CellIndex:
        """Cells and records by cell key; build it once and keep it while you look things up."""
        return CellIndex(self.cells, self.records)

    def cell(self, key: CellKey) -> CellSummary | None:
        return self.index().cell(key)

    def cells_of(self, phase: str, arm: str | None = None, concurrency: int | None = None):
        return self.index().cells_of(phase, arm, concurrency)


class CellIndex:
    """Cells and request records looked up by `CellKey`."""

    def __init__(self, cells: list[CellSummary], records: list[RequestRecord]):
        self.cells = {c.key: c for c in cells}
        self._records: dict[CellKey, list[RequestRecord]] = defaultdict(list)
        for r in records:
            self._records[r.key].append(r)

    def cell(self, key: CellKey) -> CellSummary | None:
        return self.cells.get(key)

    def records(self, key: CellKey, ok_only: bool = False) -> list[RequestRecord]:
        found = self._records.get(key, [])
        return [r for r in found if r.ok] if ok_only else list(found)

    def cells_of(self, phase: str, arm: str | None = None, concurrency: int | None = None
                 ) -> list[CellSummary]:
        return [
            c for k, c in self.cells.items()
            if k.phase == phase and (arm is None or k.arm == arm)
            and (concurrency is None or k.concurrency == concurrency)
        ]

    def levels(self, phase: str, arm: str | None = None) -> list[int]:
        return sorted({c.concurrency for c in self.cells_of(phase, arm)})


def save_results(results: Results, path: Path) -> None:
    write_atomic(path, results.model_dump_json(indent=1))


def results_path(ref: str | Path) -> Path:
    """A results.json given as the file or as the folder holding it."""
    path = Path(ref)
    return path / "results.json" if path.is_dir() else path


def load_results(path: str | Path) -> Results:
    path = results_path(path)
    return load_json_model(Results, path, "results file")
