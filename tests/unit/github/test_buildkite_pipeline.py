"""The Buildkite pipeline (gate.github.buildkite_pipeline): generated with Buildkite's Python
SDK, the shipped buildkite/perf-gate.yml is its output and valid against Buildkite's published
pipeline schema (tests/fixtures/buildkite/), and its steps keep the trust split: the step that
runs the PR's code holds no secret, the one that holds the token runs no PR code."""

from __future__ import annotations

import json

import jsonschema
import yaml
from support.cli import gate_in_process
from support.paths import REPO_ROOT

from gate.github.buildkite_pipeline import PipelineOptions, pipeline_yaml

SHIPPED = REPO_ROOT / "buildkite" / "perf-gate.yml"
SCHEMA = json.loads((REPO_ROOT / "tests/fixtures/buildkite/pipeline-schema.json").read_text())


def test_the_shipped_pipeline_is_what_the_sdk_generates():
    assert SHIPPED.read_text() == pipeline_yaml(PipelineOptions())
    proc = gate_in_process("buildkite", "pipeline")
    assert proc.returncode == 0 and proc.stdout == SHIPPED.read_text()


def test_the_shipped_pipeline_is_valid_against_buildkites_schema():
    validator = jsonschema.Draft7Validator(SCHEMA)
    assert [e.message for e in validator.iter_errors(yaml.safe_load(SHIPPED.read_text()))] == []
    # and the schema does refuse a broken step, so the check above can fail
    broken = {"steps": [{"command": "x", "soft_fail": "sometimes", "agents": 3}]}
    assert list(validator.iter_errors(broken))


def steps():
    return {s["key"]: s for s in yaml.safe_load(SHIPPED.read_text())["steps"]}


def test_the_measuring_step_runs_the_image_as_installed_against_the_merge_base_over_it():
    gate = steps()["perf-gate"]
    script = "\n".join(gate["commands"])
    assert "install-vllm --mode preinstalled --python python3" in script
    assert "buildkite base-overlay --repo . --base \"$$base\"" in script
    assert "ab --plan a100-gemma4-26b-pr --head python3 --base python3" in script
    assert "buildkite annotate --verdict gate-ab/verdict.json" in script
    assert "--format pytorch-v3" in script and 'exit "$$code"' in script
    # undecided (3) and cannot decide here (5) are red like a failure: never a passing build
    assert "soft_fail" not in gate
    image = gate["plugins"][0]["docker#v5.12.0"]["image"]
    assert image.endswith("vllm-ci-test-repo:${BUILDKITE_COMMIT}")
    assert "secrets" not in gate and "TOKEN" not in json.dumps(gate)


def test_the_comment_step_holds_the_token_and_runs_no_pr_code():
    post = steps()["perf-gate-comment"]
    assert post["depends_on"] == "perf-gate" and post["allow_dependency_failure"] is True
    assert post["secrets"] == {"GITHUB_TOKEN": "PERF_GATE_GITHUB_TOKEN"}
    assert "plugins" not in post  # not the PR's image
    script = "\n".join(post["commands"])
    assert "--require-hashes -r /tmp/gate-src/requirements/poster.txt" in script
    assert "gate publish --post-comment-file gate-comment.json" in script
    assert "pip install --quiet --no-deps --no-build-isolation /tmp/gate-src" in script
    # the PR and the commit are the build's, read when the step runs ($$: not at upload),
    # never the numbers in the file the PR's code wrote (N1)
    (publish,) = [c for c in post["commands"] if "--post-comment-file" in c]
    assert publish.endswith('--pr "$$BUILDKITE_PULL_REQUEST" '
                            '--expect-head-sha "$$BUILDKITE_COMMIT"')


def test_the_measuring_step_installs_the_gate_from_its_hash_lock():
    """N5: as the GitHub GPU jobs: the gate's commit, every dependency from requirements/
    gpu.txt with --require-hashes, no pip configuration or cache of the image, then the gate
    alone; nothing resolved by name."""
    script = steps()["perf-gate"]["commands"]
    pip = "/tmp/gate-venv/bin/python -I -m pip install --quiet --isolated --no-cache-dir"
    install = script[:5]
    assert install == [
        "git clone --quiet https://github.com/vllm-project/vllm-structured-output-gate "
        "/tmp/gate-src",
        "git -C /tmp/gate-src checkout --quiet --detach ${GATE_REF}",
        "python3 -I -m venv /tmp/gate-venv",
        f"{pip} --require-hashes -r /tmp/gate-src/requirements/gpu.txt",
        f"{pip} --no-deps --no-build-isolation /tmp/gate-src"]
    assert not any("git+" in c or "pip install" in c for c in script[5:])
