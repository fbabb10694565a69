"""`gate export --format pytorch-v3 | bencher` (gate.report.export) against what each tool
publishes (tests/fixtures/exports/): the HUD's ClickHouse table, column by column and type by
type, and Bencher's BMF JSON Schema."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
from support import factories as f
from support.cli import gate_in_process
from support.paths import REPO_ROOT

from gate.report.export import bencher_bmf, measure_slug, pytorch_v3

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "exports"
# Filled in by pytorch-integration-testing's uploader for each record, not by the benchmark.
UPLOADER_COLUMNS = {"timestamp", "schema_version", "name", "repo", "head_branch", "head_sha",
                    "workflow_id", "run_attempt", "job_id", "servicelab_experiment_id",
                    "servicelab_trial_id", "_meta"}


# -- a small reader of the table's ClickHouse types --------------------------------------------
def split_top(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


def parse_type(text: str):
    text = text.strip()
    if m := re.fullmatch(r"(Array|Tuple|Map)\s*\((.*)\)", text, re.S):
        kind, inner = m.group(1), split_top(m.group(2))
        if kind == "Array":
            return ("array", parse_type(inner[0]))
        if kind == "Map":
            return ("map", parse_type(inner[0]), parse_type(inner[1]))
        fields = {}
        for part in inner:
            name, _, rest = part.partition(" ")
            fields[name.strip("`")] = parse_type(rest)
        return ("tuple", fields)
    return ("scalar", text.split()[0])


def table_columns() -> dict:
    sql = re.sub(r"--[^\n]*", "", (FIXTURES / "oss_ci_benchmark_v3.schema.sql").read_text())
    body = sql[sql.index("(") + 1: sql.rindex(") ENGINE")]
    columns = {}
    for part in split_top(body):
        name, _, rest = part.strip().partition(" ")
        columns[name.strip("`")] = parse_type(rest.split(" DEFAULT ")[0])
    return columns


def conforms(value, kind, where="") -> list[str]:
    tag = kind[0]
    if tag == "scalar":
        t = kind[1]
        ok = (isinstance(value, str) if t == "String" else
              isinstance(value, int) and not isinstance(value, bool) and value >= 0
              if t.startswith("UInt") else
              isinstance(value, int | float) and not isinstance(value, bool))
        return [] if ok else [f"{where}: {value!r} is not {t}"]
    if tag == "array":
        if not isinstance(value, list):
            return [f"{where}: not an array"]
        return [p for i, v in enumerate(value) for p in conforms(v, kind[1], f"{where}[{i}]")]
    if tag == "map":
        if not isinstance(value, dict):
            return [f"{where}: not a map"]
        return [p for k, v in value.items() for p in conforms(k, kind[1], f"{where} key")
                + conforms(v, kind[2], f"{where}[{k}]")]
    if not isinstance(value, dict):
        return [f"{where}: not a tuple"]
    fields = kind[1]
    problems = [f"{where}.{k}: no such element" for k in set(value) - set(fields)]
    problems += [f"{where}.{k}: missing" for k in set(fields) - set(value)]
    return problems + [p for k, v in value.items() if k in fields
                       for p in conforms(v, fields[k], f"{where}.{k}")]


def test_the_table_reader_reads_the_published_table():
    columns = table_columns()
    assert {"benchmark", "model", "metric", "runners", "inputs", "dependencies"} <= set(columns)
    assert columns["metric"] == ("tuple", {
        "name": ("scalar", "String"), "benchmark_values": ("array", ("scalar", "Float32")),
        "target_value": ("scalar", "Float32"),
        "extra_info": ("map", ("scalar", "String"), ("scalar", "String"))})
    assert conforms({"name": 1}, columns["benchmark"], "benchmark")  # it can refuse


def gpu_results():
    cells = []
    for r, rpm in enumerate([230.0, 236.0]):
        cells += [f.cell("drain", "guided", 64, r, rpm=rpm),
                  f.cell("sweep", "guided", 8, r, tpot_p50=21.0 + r),
                  f.cell("sweep", "free", 8, r, tpot_p50=20.0)]
    return f.make_results(cells, plan=f.gpu_plan(levels=(8,), repeats=2))


def test_hud_records_fit_the_table_column_by_column():
    columns = table_columns()
    records = pytorch_v3(gpu_results())
    assert records
    for record in records:
        assert set(record) <= set(columns) - UPLOADER_COLUMNS
        problems = [p for key, value in record.items()
                    for p in conforms(value, columns[key], key)]
        assert problems == []
    drain = next(r for r in records if r["metric"]["name"] == "drain.req_per_min")
    assert drain["metric"]["benchmark_values"] == pytest.approx([230.0, 236.0])
    assert drain["model"]["name"] == "google/gemma-4-26B-A4B-it"
    assert drain["runners"][0]["gpu_count"] == 1 and drain["runners"][0]["gpu_info"]
    assert drain["dependencies"]["vllm"]["version"] == "0.21.0"


def test_bencher_bmf_is_valid_against_its_schema_like_its_published_example():
    schema = json.loads((FIXTURES / "bencher-bmf.schema.json").read_text())
    example = json.loads((FIXTURES / "bencher-bmf.example.json").read_text())
    jsonschema.validate(example, schema)
    data = bencher_bmf(gpu_results())
    jsonschema.validate(data, schema)
    drain = data["a100-gemma4-26b/drain.req_per_min"]["req-per-min"]
    assert drain["lower_value"] == pytest.approx(230.0)
    assert drain["upper_value"] == pytest.approx(236.0)
    assert drain["value"] == pytest.approx((230.0 * 236.0) ** 0.5)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"b": {"m": {"lower_value": 1.0}}}, schema)  # no value


def test_measure_slugs():
    assert [measure_slug(u) for u in ("req/min", "tok/s", "ms", "x", "")] == [
        "req-per-min", "tok-per-s", "ms", "ratio", "value"]


@pytest.mark.parametrize("fmt", ["pytorch-v3", "bencher"])
def test_the_cli_writes_them(tmp_path, fmt):
    folder = f.results_folder(tmp_path / "run", gpu_results())
    out = tmp_path / "out.json"
    proc = gate_in_process("export", folder, "--format", fmt, "--out", out)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data == (pytorch_v3(gpu_results()) if fmt == "pytorch-v3" else
                    bencher_bmf(gpu_results()))
