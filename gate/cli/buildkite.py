"""`gate buildkite`: the gate where vLLM's CI runs. `pipeline` prints the pipeline step
(Buildkite's Python SDK, for `buildkite-agent pipeline upload`), `base-overlay` makes the
merge base's build over the PR's CI image, `annotate` posts the report as the build's
annotation (docs/buildkite.md)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from gate.core.errors import EXIT_BAD_INPUT, EXIT_PASS, GateError
from gate.core.settings import Settings
from gate.evidence.hunks import load_hunks
from gate.github.buildkite import ANNOTATION_LIMIT, annotate, style_for
from gate.judge.verdict import load_verdict
from gate.measure.results import load_results
from gate.report.render import ReportInput, render_report

RUN_URL = re.compile(r"https://[A-Za-z0-9.:-]+/[A-Za-z0-9_./-]+")


def add_parser(sub) -> None:
    b = sub.add_parser("buildkite", help="run where vLLM's CI runs: the pipeline step, the "
                       "base build, the annotation", description=__doc__.split("\n\n")[0])
    bs = b.add_subparsers(dest="buildkite_command", metavar="ACTION")

    p = bs.add_parser("pipeline", help="print the perf-gate pipeline (YAML) for "
                      "`buildkite-agent pipeline upload`")
    p.add_argument("--queue", default="gpu_1_queue", help="the GPU agents' queue")
    p.add_argument("--plan", default="a100-gemma4-26b-pr")
    p.add_argument("--gate-ref", default="${GATE_REF}",
                   help="the gate commit to install (default: $GATE_REF at upload time)")
    p.add_argument("--image", default="public.ecr.aws/q9t5s3a7/vllm-ci-test-repo:${BUILDKITE_COMMIT}",
                   help="the PR's CI image (vLLM's per-commit test image)")
    p.set_defaults(handler=handle_pipeline)

    o = bs.add_parser("base-overlay", help="the merge base's Python files over the PR's "
                      "installed build; prints the --base-env lines for gate ab")
    o.add_argument("--repo", type=Path, default=Path("."), help="the vLLM checkout (the PR)")
    o.add_argument("--head", default="HEAD", help="the commit the image was built from")
    o.add_argument("--base", required=True, help="the merge base (a commit or ref)")
    o.add_argument("--python", default=sys.executable, help="the image's interpreter")
    o.add_argument("--out", type=Path, required=True, help="the overlay folder to write")
    o.set_defaults(handler=handle_base_overlay)

    a = bs.add_parser("annotate", help="post the report as the build's annotation")
    a.add_argument("--verdict", type=Path, required=True)
    a.add_argument("--head", type=Path, help="the head build's results.json")
    a.add_argument("--base", type=Path, help="the base build's results.json")
    a.add_argument("--hunks", type=Path)
    a.add_argument("--context", default="perf-gate", help="one annotation per context")
    a.add_argument("--agent", default="buildkite-agent", help="the agent's command")
    a.set_defaults(handler=handle_annotate)

    b.set_defaults(handler=lambda args, settings: (b.print_help(), EXIT_BAD_INPUT)[1])


def handle_pipeline(args, settings: Settings) -> int:
    from gate.github.buildkite_pipeline import PipelineOptions, pipeline_yaml

    sys.stdout.write(pipeline_yaml(PipelineOptions(queue=args.queue, plan=args.plan,
                                                   gate_ref=args.gate_ref, image=args.image)))
    return EXIT_PASS


def handle_base_overlay(args, settings: Settings) -> int:
    from gate.flows.buildkite import base_over_head

    build = base_over_head(args.repo, head=args.head, base=args.base, python=args.python,
                           dest=args.out)
    print(f"gate buildkite: {build.how}", file=sys.stderr)
    for key, value in build.env.items():
        print(f"{key}={value}")
    return EXIT_PASS


def handle_annotate(args: argparse.Namespace, settings: Settings) -> int:
    verdict = load_verdict(args.verdict)
    if args.base and not args.head:
        raise GateError("--base needs --head")
    report = render_report(ReportInput(
        verdict=verdict, head=load_results(args.head) if args.head else None,
        base=load_results(args.base) if args.base else None,
        hunks=load_hunks(args.hunks) if args.hunks else None, max_chars=ANNOTATION_LIMIT))
    if settings.run_url and RUN_URL.fullmatch(settings.run_url):
        report += f"\n<sub>[build]({settings.run_url})</sub>\n"
    annotate(report, style=style_for(verdict.outcome), context=args.context, agent=args.agent)
    print(f"gate buildkite: annotated the build ({verdict.outcome.value}, {len(report):,} chars)",
          file=sys.stderr)
    return EXIT_PASS
