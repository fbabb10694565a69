import json

import pytest
from support.factories import summarized_results

from gate.core.errors import GateError
from gate.measure.results import load_results, save_results


def test_round_trip_is_lossless(tmp_path):
    results = summarized_results()
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
    data = json.loads(summarized_results().model_dump_json())
    data["schema_version"] = 99
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(GateError, match="schema v99"):
        load_results(tmp_path / "results.json")
