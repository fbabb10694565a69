"""`gate plan init`: a plan made from what a team has (docs/upgrade.md#your-own-workload): a
model folder (or the gate's tiny model), a folder of JSON schemas or a JSONL file of recorded
requests, server flags and concurrency levels.

On a CPU the plan starts from `cpu-smoke` (its server environment, steady-state windows, two
servers up side by side, thresholds a 2-core runner can decide); on a GPU from the plan
defaults with one server at a time (`ab.servers: per_round`, which any model fits). The
workload is the team's own, its files named relative to the plan's folder. max_tokens is set
from the schemas' own bounds when every schema bounds its output (gate.plan.workload
.output_length_bounds: a character is at most one token), so that every guided output can end
inside it; a schema without bounds gets the default and a warning, because a model that does
not close the schema by then ends by length, which the gate calls an error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from gate.core.errors import GateError
from gate.core.files import write_atomic
from gate.plan.own_workload import OwnEntry, load_recorded, load_schema_dir
from gate.plan.spec import Plan, TinyModelSpec, load_plan, parse_plan
from gate.plan.workload import output_length_bounds

Hardware = Literal["cpu", "gpu"]
DEFAULT_MAX_TOKENS = 512
MAX_TOKENS_MARGIN = 16  # a tokenizer's end of turn and the like
PROMPT_ROOM = 256  # tokens of a prompt, beside the output, in the tiny model's context
CPU_LEVELS = [4, 8]
GPU_LEVELS = [1, 8, 32]


@dataclass(frozen=True)
class PlanRequest:
    """What `gate plan init` was given."""

    out: Path
    name: str | None = None
    model: str | None = None  # None: the gate's tiny model
    schema_dir: Path | None = None
    recorded_requests: Path | None = None
    hardware: Hardware | None = None  # None: cpu for the tiny model, else gpu
    levels: list[int] | None = None
    max_tokens: int | None = None
    backend: str | None = None
    max_num_seqs: int | None = None
    max_model_len: int | None = None
    server_args: list[str] = field(default_factory=list)
    server_env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Written:
    path: Path
    plan: Plan
    entries: int
    warnings: list[str]


def init_plan(req: PlanRequest) -> Written:
    """Write the plan `req` describes to `req.out` (never over a file) and load it back."""
    if req.out.exists():
        raise GateError(f"{req.out} exists; gate plan init never overwrites a plan (remove it "
                        "or write another file)")
    if (req.schema_dir is None) == (req.recorded_requests is None):
        raise GateError("give the workload: --schemas DIR (JSON schema files) or --requests "
                        "FILE.jsonl (recorded requests), one of them")
    if req.model is not None and not Path(req.model).is_dir():
        raise GateError(f"--model {req.model} is not a model folder")
    entries = load_schema_dir(req.schema_dir) if req.schema_dir is not None else \
        load_recorded(req.recorded_requests)  # type: ignore[arg-type]
    compact = hardware_of(req) == "cpu"  # cpu-smoke's server writes compact JSON
    max_tokens, warnings = choose_max_tokens(entries, req.max_tokens, compact=compact)
    longest = max([max_tokens, *(e.max_tokens for e in entries if e.max_tokens)])
    data = plan_data(req, max_tokens, longest)
    text = header(req, entries) + yaml.dump(data, Dumper=_PlainDumper, sort_keys=False,
                                            width=100)
    write_atomic(req.out, text)
    try:
        plan = load_plan(str(req.out))
    except GateError:
        req.out.unlink()
        raise
    return Written(req.out, plan, len(entries), warnings)


class _PlainDumper(yaml.SafeDumper):
    """YAML without anchors and aliases: a list written twice is written twice."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def hardware_of(req: PlanRequest) -> Hardware:
    return req.hardware or ("cpu" if req.model is None else "gpu")


def choose_max_tokens(entries: tuple[OwnEntry, ...], given: int | None, *,
                      compact: bool = True) -> tuple[int, list[str]]:
    """max_tokens from the schemas' longest bounded output (or `given`), and what to warn of.
    `compact`: the server forbids free whitespace; otherwise a model may indent its JSON, so
    twice the compact length is allowed."""
    if given is not None:
        return given, []
    longest, unbounded = 0, []
    for entry in entries:
        if entry.max_tokens is not None:
            continue  # a recorded request keeps its own
        try:
            _, most = output_length_bounds(entry.schema)
        except GateError:
            most = None
        if most is None:
            unbounded.append(entry.name)
        else:
            longest = max(longest, most if compact else 2 * most)
    if unbounded:
        shown = ", ".join(unbounded[:5]) + (" ..." if len(unbounded) > 5 else "")
        return max(DEFAULT_MAX_TOKENS, longest + MAX_TOKENS_MARGIN), [
            f"no bound on the output length of {shown}: max_tokens is "
            f"{max(DEFAULT_MAX_TOKENS, longest + MAX_TOKENS_MARGIN)}; an output the model does "
            "not close by then ends by length (an error): bound its strings and arrays, or "
            "give --max-tokens"]
    if not longest:
        return DEFAULT_MAX_TOKENS, []
    return (longest + MAX_TOKENS_MARGIN if compact
            else max(DEFAULT_MAX_TOKENS, longest + MAX_TOKENS_MARGIN)), []


def _relative(path: Path, folder: Path) -> str:
    """`path` as the plan names it: relative to the plan's folder when it lies near it (in it,
    or up to two folders up: a repository's plans/ beside its schemas/), else absolute."""
    target = path.resolve()
    rel = os.path.relpath(target, folder.resolve())
    return rel if Path(rel).parts[:3].count("..") <= 2 else str(target)


def plan_data(req: PlanRequest, max_tokens: int, longest: int) -> dict[str, Any]:
    """The plan's keys; `longest`: the most tokens any guided request may ask for."""
    hardware = hardware_of(req)
    levels = list(req.levels or (CPU_LEVELS if hardware == "cpu" else GPU_LEVELS))
    base = load_plan("cpu-smoke").model_dump(mode="json") if hardware == "cpu" else \
        Plan.model_validate({"name": "x", "server": {"model": "x"}}).model_dump(mode="json")
    server = base["server"]
    if req.model is None:
        server.update(model=None, tiny_model=TinyModelSpec().model_dump(mode="json"))
    else:
        server.update(model=str(Path(req.model).resolve()), tiny_model=None)
    optional = {"max_num_seqs": req.max_num_seqs, "max_model_len": req.max_model_len,
                "structured_outputs_backend": req.backend}
    if req.model is None and req.max_model_len is None:
        # the prompt and the longest output must fit the tiny model's context
        server["max_model_len"] = max(server.get("max_model_len") or 0, longest + PROMPT_ROOM)
    server.update({k: v for k, v in optional.items() if v is not None})
    server["extra_args"] = list(req.server_args)
    server["env"] = {**server.get("env", {}), **req.server_env}
    folder = req.out.parent
    workload = base["workload"]
    workload.update(max_tokens=max_tokens, json_schema=None, corpus=None,
                    schema_dir=_relative(req.schema_dir, folder) if req.schema_dir else None,
                    recorded_requests=_relative(req.recorded_requests, folder)
                    if req.recorded_requests else None)
    base["warmup"]["levels"] = levels
    base["drain"]["concurrency"] = max(levels)
    base["sweep"]["levels"] = levels
    if hardware == "gpu":
        base["ab"]["servers"] = "per_round"
    base.update(name=req.name or req.out.stem, hardware_class=hardware,
                description=f"{'the tiny model' if req.model is None else req.model}; "
                f"{'schemas of ' + str(req.schema_dir) if req.schema_dir else 'requests of ' + str(req.recorded_requests)}; "
                f"levels {', '.join(map(str, levels))}")
    # what differs from the defaults, as a person would write it (a null threshold, "not
    # judged", differs from its default and stays)
    return parse_plan(base, str(req.out)).model_dump(mode="json", exclude_defaults=True)


def header(req: PlanRequest, entries: tuple[OwnEntry, ...]) -> str:
    source = (f"{len(entries)} schema(s) of {req.schema_dir}" if req.schema_dir
              else f"{len(entries)} recorded request(s) of {req.recorded_requests}")
    return ("# Written by `gate plan init`: " + source + ".\n"
            "# Every key is documented in docs/upgrade.md and gate/plan/spec.py; edit freely.\n")
