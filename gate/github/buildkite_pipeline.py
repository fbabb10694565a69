"""The perf gate as a Buildkite pipeline step, generated with Buildkite's own Python SDK
(buildkite-sdk, the `buildkite` extra) for `gate buildkite pipeline | buildkite-agent pipeline
upload`; buildkite/perf-gate.yml is its output as shipped, checked against Buildkite's
published pipeline schema (tests/fixtures/buildkite/).

Two steps (docs/buildkite.md):

- `perf-gate`, on the GPU queue, in the PR's CI image (vLLM's per-commit test image): the
  gate in a virtualenv of its own, every dependency from its hash lock (requirements/gpu.txt);
  the head is the image's vLLM as installed (`install-vllm --mode preinstalled`), the base the
  merge base's Python over it (`gate buildkite base-overlay`); `gate ab`, then the
  annotation, the HUD record and the comment file as artifacts. It holds no token. It exits
  with the verdict's code: 3 (undecided) and 5 (cannot decide on this runner) are red like
  1 and 4, never soft: an A/B that did not decide is not a pass.
- `perf-gate-comment`, after it, on a queue that runs no PR code: posts the comment file
  with the bot's token (`gate publish --post-comment-file`, the same token-free hand-over as
  on GitHub), on the build's own PR (`--pr "$BUILDKITE_PULL_REQUEST"`) while its head is
  still the build's commit (`--expect-head-sha "$BUILDKITE_COMMIT"`). Only a pipeline
  uploaded from the default branch may carry it.

Runtime shell variables are written `$$name` (Buildkite interpolates `$name` at upload).
"""

from __future__ import annotations

from dataclasses import dataclass

WATCHED = ("vllm/v1/structured_output/**", "vllm/v1/worker/**", "vllm/v1/sample/**",
           "vllm/v1/spec_decode/**", "vllm/v1/core/sched/**", "vllm/utils/torch_utils.py",
           "requirements/common.txt")
GATE_REPOSITORY = "https://github.com/vllm-project/vllm-structured-output-gate"


@dataclass(frozen=True)
class PipelineOptions:
    queue: str = "gpu_1_queue"
    plan: str = "a100-gemma4-26b-pr"
    gate_ref: str = "${GATE_REF}"
    image: str = "public.ecr.aws/q9t5s3a7/vllm-ci-test-repo:${BUILDKITE_COMMIT}"
    comment_queue: str = "cpu_queue_postmerge"


def gpu_gate_install(o: PipelineOptions) -> list[str]:
    """The gate from its own repository at the pinned commit into /tmp/gate-venv, as the
    GitHub GPU jobs install it: every dependency from the hash lock requirements/gpu.txt (pip
    refuses a missing or different hash), then the gate alone; `-I` keeps the PR's checkout
    (the working folder) off sys.path, `--isolated --no-cache-dir` lets no pip configuration,
    PIP_* variable or cache of the image or the agent decide what is installed."""
    pip = "/tmp/gate-venv/bin/python -I -m pip install --quiet --isolated --no-cache-dir"
    return [
        f"git clone --quiet {GATE_REPOSITORY} /tmp/gate-src",
        f"git -C /tmp/gate-src checkout --quiet --detach {o.gate_ref}",
        "python3 -I -m venv /tmp/gate-venv",
        f"{pip} --require-hashes -r /tmp/gate-src/requirements/gpu.txt",
        f"{pip} --no-deps --no-build-isolation /tmp/gate-src",
    ]


def measure_commands(o: PipelineOptions) -> list[str]:
    gate = "/tmp/gate-venv/bin/gate"
    return [
        *gpu_gate_install(o),
        f"{gate} install-vllm --mode preinstalled --python python3",
        'base="$$(git merge-base "origin/$$BUILDKITE_PULL_REQUEST_BASE_BRANCH" HEAD)"',
        f'{gate} buildkite base-overlay --repo . --base "$$base" --python python3 '
        "--out /tmp/gate-base > /tmp/gate-base.env",
        "base_env=(); while IFS= read -r line; do base_env+=(--base-env \"$$line\"); done "
        "< /tmp/gate-base.env",
        f'code=0; {gate} ab --plan {o.plan} --head python3 --base python3 "$${{base_env[@]}}" '
        "--out gate-ab || code=$$?",
        f"{gate} buildkite annotate --verdict gate-ab/verdict.json --head gate-ab/head/results.json "
        "--base gate-ab/base/results.json",
        f"{gate} publish --verdict gate-ab/verdict.json --head gate-ab/head/results.json "
        "--base gate-ab/base/results.json --no-comment --comment-file gate-comment.json",
        f"{gate} export gate-ab/head/results.json --format pytorch-v3 --out "
        "benchmark_results.json",
        'exit "$$code"',
    ]


def comment_commands(o: PipelineOptions) -> list[str]:
    """The gate from its own repository at the pinned commit, hash-pinned (no PR code). The
    PR and the commit are the build's own (Buildkite's variables, read when the step runs),
    never the numbers in the comment file, which the measuring step (PR code) wrote."""
    return [
        "buildkite-agent artifact download gate-comment.json .",
        f"git clone --quiet {GATE_REPOSITORY} /tmp/gate-src",
        f"git -C /tmp/gate-src checkout --quiet --detach {o.gate_ref}",
        "python3 -m venv /tmp/gate-venv",
        "/tmp/gate-venv/bin/pip install --quiet --require-hashes -r "
        "/tmp/gate-src/requirements/poster.txt",
        "/tmp/gate-venv/bin/pip install --quiet --no-deps --no-build-isolation /tmp/gate-src",
        "/tmp/gate-venv/bin/gate publish --post-comment-file gate-comment.json "
        '--pr "$$BUILDKITE_PULL_REQUEST" --expect-head-sha "$$BUILDKITE_COMMIT"',
    ]


def pipeline(o: PipelineOptions):
    from buildkite_sdk import CommandStep, Pipeline

    p = Pipeline()
    p.add_step(CommandStep(
        label=":chart_with_downwards_trend: Structured-output perf gate",
        key="perf-gate",
        step_if="build.pull_request.id != null",
        if_changed=list(WATCHED),
        agents={"queue": o.queue},
        plugins=[{"docker#v5.12.0": {
            "image": o.image, "propagate-environment": True, "gpus": "all",
            "volumes": ["/root/.cache/huggingface:/root/.cache/huggingface:ro"],
            "environment": ["HF_HUB_OFFLINE=1", "BUILDKITE_PULL_REQUEST_BASE_BRANCH"]}}],
        commands=measure_commands(o),
        artifact_paths=["gate-ab/verdict.json", "gate-ab/*/results.json", "gate-comment.json",
                        "benchmark_results.json"],
        timeout_in_minutes=120,
    ))
    p.add_step(CommandStep(
        label=":speech_balloon: Perf gate comment",
        key="perf-gate-comment",
        depends_on="perf-gate",
        allow_dependency_failure=True,
        step_if="build.pull_request.id != null",
        agents={"queue": o.comment_queue},
        secrets={"GITHUB_TOKEN": "PERF_GATE_GITHUB_TOKEN"},
        commands=comment_commands(o),
        timeout_in_minutes=10,
    ))
    return p


HEADER = ("# The structured-output perf gate on Buildkite (docs/buildkite.md). Generated by\n"
          "# `gate buildkite pipeline` (buildkite-sdk); upload it with\n"
          "#   gate buildkite pipeline | buildkite-agent pipeline upload\n")


def pipeline_yaml(o: PipelineOptions) -> str:
    return HEADER + pipeline(o).to_yaml(sort_keys=False)
