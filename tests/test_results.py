import json

import pytest

from gate.errors import GateError
from gate.fingerprint import Fingerprint
from gate.metrics import level_ratios, summarize_cell
from gate.plan import load_plan
from gate.results import CellKey, RequestRecord, Results, ServerInfo, load_results, save_results


def sample_results() -> Results:
    plan = load_plan("cpu-smoke")
    records = [
        RequestRecord(index=i, phase="sweep", arm=arm, concurrency=8, send_s=0.0, ttft_s=0.1,
                      itl_s=[0.01] * 9, e2el_s=0.2, output_tokens=10, finish_reason="stop",
                      http_status=200, text="{}", json_valid=True if arm == "guided" else None)
        for i, arm in enumerate(["guided", "free"])
    ]
    cells = [summarize_cell([r], CellKey("sweep", r.arm, 8, 0), 1.0) for r in records]
    return Results(created_at="2026-11-29T00:00:00+00:00", plan=plan,
                   plan_hash=plan.measurement_hash(), fingerprint=Fingerprint(cpu_model="x"),
                   server=ServerInfo(base_url="http://127.0.0.1:1", started_by_gate=True,
                                     model="tiny"),
                   cells=cells, ratios=level_ratios(cells), records=records)


def test_round_trip_is_lossless(tmp_path):
    results = sample_results()
    save_results(results, tmp_path / "results.json")
    back = load_results(tmp_path)  # a folder holding results.json works too
    assert back == results
    assert back.cells[0].requests_per_min == pytest.approx(60.0)


def test_not_a_results_file(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"hello": 1}))
    with pytest.raises(GateError, match="invalid results file"):
        load_results(path)
    with pytest.raises(GateError, match="does not exist"):
        load_results(tmp_path / "missing.json")


def test_future_schema_version_is_refused(tmp_path):
    data = json.loads(sample_results().model_dump_json())
    data["schema_version"] = 99
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(GateError, match="schema v99"):
        load_results(tmp_path / "results.json")
