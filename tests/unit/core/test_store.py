"""The versioned-YAML store of baselines and calibrations: strict records, one schema version,
checked writes that never leave a broken file in place of a good one."""

from __future__ import annotations

import pytest

from gate.core.errors import GateError
from gate.core.store import (
    StrictModel,
    dump_record,
    load_record,
    load_records,
    record_files,
    slug,
    write_record,
)


class Record(StrictModel):
    schema_version: int = 3
    name: str
    value: float | None = None


def test_a_record_round_trips_and_none_fields_are_left_out(tmp_path):
    path = write_record(tmp_path / "a.yaml", Record(name="x"))
    assert "value" not in path.read_text()
    assert load_record(Record, path, "thing", 3) == Record(name="x")


def test_another_schema_version_is_refused_with_both_versions(tmp_path):
    (tmp_path / "old.yaml").write_text(dump_record(Record(name="x", schema_version=2)))
    with pytest.raises(GateError, match=r"thing .*old.yaml has schema v2; this gate reads v3"):
        load_record(Record, tmp_path / "old.yaml", "thing", 3)


def test_an_unknown_key_or_a_broken_file_names_the_file(tmp_path):
    (tmp_path / "extra.yaml").write_text("schema_version: 3\nname: x\nsurprise: 1\n")
    with pytest.raises(GateError, match="extra.yaml"):
        load_record(Record, tmp_path / "extra.yaml", "thing", 3)
    (tmp_path / "broken.yaml").write_text("name: [unclosed\n")
    with pytest.raises(GateError, match="broken.yaml"):
        load_records(Record, tmp_path, "thing", 3)  # one broken file stops the lot


def test_a_folder_lists_its_yaml_files_in_order_and_a_missing_one_is_empty(tmp_path):
    for name in ("b.yml", "a.yaml", "notes.txt"):
        (tmp_path / name).write_text("schema_version: 3\nname: n\n")
    assert [p.name for p in record_files(tmp_path)] == ["a.yaml", "b.yml"]
    assert record_files(tmp_path / "nothing") == []


def test_a_write_that_fails_leaves_the_stored_record(tmp_path, monkeypatch):
    path = write_record(tmp_path / "a.yaml", Record(name="good"))
    import gate.core.store as store

    def broken(_path, _text):
        raise OSError("disk full")

    monkeypatch.setattr(store, "write_atomic", broken)
    with pytest.raises(OSError):
        write_record(path, Record(name="new"))
    assert load_record(Record, path, "thing", 3).name == "good"


def test_slug_makes_a_file_name_of_any_key():
    assert slug("cpu: Intel(R) Xeon(R) Processor; cpus 2") == "cpu-intel-r-xeon-r-processor-cpus-2"
    assert slug("???") == "x"
