"""The history file (gate.history.store, gate.history.schema): one entry per commit x plan x
runner class x check, a versioned schema migrated in place, nothing replaced."""

from __future__ import annotations

import json
import sqlite3

import pytest
from support import factories as f

from gate.core.errors import GateError
from gate.history import schema
from gate.history.model import Acknowledgement
from gate.history.store import RunMeta, entries_of, open_store, opened

SHA = [f"{i:x}" * 40 for i in range(1, 6)]


def run(rpm=(230.0, 236.0), **kw):
    return f.drain_results(list(rpm), plan=f.cpu_plan(), fp=f.fingerprint(), **kw)


def meta(i=0, **kw):
    return RunMeta(commit=SHA[i], branch="main", commit_time=f"2026-01-0{i + 1}T03:00:00+00:00",
                   **kw)


def test_a_run_is_one_entry_per_check_with_its_repeats_and_geomean(tmp_path):
    with opened(tmp_path / "h.sqlite", create=True) as store:
        added = store.add_run(run(), meta())
        assert added.run_id == 1 and added.entries == len(entries_of(run()))
        s = store.series("cpu-smoke", "cpu: Test CPU; cpus 2; quota none", "drain.req_per_min")
    (point,) = s.points
    assert point.value == pytest.approx((230.0 * 236.0) ** 0.5) and point.n == 2
    assert s.direction == "higher_is_better" and s.unit == "req/min" and s.judged
    raw = sqlite3.connect(tmp_path / "h.sqlite")
    (repeats, fingerprint) = raw.execute(
        "SELECT e.repeats, r.fingerprint FROM entries e JOIN runs r ON r.id = e.run_id "
        "WHERE e.check_name = 'drain.req_per_min'").fetchone()
    assert json.loads(repeats) == pytest.approx([230.0, 236.0])
    summary = json.loads(fingerprint)
    assert summary["runner_class"] == "cpu: Test CPU; cpus 2; quota none"
    assert summary["vllm_version"] == "0.32.0" and summary["torch_threads"] == 2


def test_nights_are_ordered_by_commit_time_and_series_split_by_runner_class(tmp_path):
    with opened(tmp_path / "h.sqlite", create=True) as store:
        store.add_run(run((200.0,)), meta(2))
        store.add_run(run((100.0,)), meta(0))
        store.add_run(run((150.0,)), meta(1))
        other = f.drain_results([300.0], plan=f.cpu_plan(), fp=f.fingerprint(cores=8))
        store.add_run(other, meta(0))
        keys = store.series_keys()
        series = store.all_series(checks=["drain.req_per_min"])
    assert len({k[1] for k in keys}) == 2
    by_runner = {s.runner_class: s for s in series}
    assert [p.value for p in by_runner["cpu: Test CPU; cpus 2; quota none"].points] == \
        pytest.approx([100.0, 150.0, 200.0])
    assert [p.value for p in by_runner["cpu: Test CPU; cpus 8; quota none"].points] == \
        pytest.approx([300.0])


def test_a_commit_already_recorded_is_refused_or_skipped_and_nothing_changes(tmp_path):
    path = tmp_path / "h.sqlite"
    with opened(path, create=True) as store:
        store.add_run(run(), meta())
    before = path.read_bytes()
    with opened(path) as store:
        with pytest.raises(GateError, match="already recorded"):
            store.add_run(run((100.0,)), meta())
        assert store.add_run(run((100.0,)), meta(), if_new=True).run_id is None
    assert path.read_bytes() == before


def test_results_without_figures_are_refused(tmp_path):
    empty = f.make_results([], plan=f.cpu_plan(), fp=f.fingerprint())
    with opened(tmp_path / "h.sqlite", create=True) as store:
        with pytest.raises(GateError, match="no figures"):
            store.add_run(empty, meta())
        with pytest.raises(GateError, match="source"):
            store.add_run(run(), meta(source="weekly"))
        assert store.runs() == []


def ack(**kw) -> Acknowledgement:
    fields = {"repository": "octo/vllm", "pr": 12, "head_sha": SHA[3],
              "check": "drain.req_per_min", "reason": "pinned memory", "login": "maintainer",
              "permission": "write", "created_at": "2026-01-02T00:00:00+00:00"} | kw
    return Acknowledgement(**fields)


def test_acknowledgements_are_kept_once_and_move_to_the_history_at_merge(tmp_path):
    with opened(tmp_path / "h.sqlite", create=True) as store:
        store.acknowledge(ack())
        store.acknowledge(ack(check="sweep.c8.tpot_p50_ms"))
        store.acknowledge(ack(head_sha=SHA[4]))  # a later push, acknowledged again
        with pytest.raises(GateError, match="already acknowledged"):
            store.acknowledge(ack(reason="again"))
        added = store.add_run(run(), meta(1, source="post-merge", pr=12, pr_head=SHA[3]))
        kept = store.acknowledgements(pr=12)
    assert [a.check for a in added.linked] == ["drain.req_per_min", "sweep.c8.tpot_p50_ms"]
    assert [(a.head_sha, a.merged_commit) for a in kept] == [
        (SHA[3], SHA[1]), (SHA[3], SHA[1]), (SHA[4], None)]


def test_the_acknowledged_heads_waiting_for_their_merge_are_linked_one_by_one(tmp_path):
    with opened(tmp_path / "h.sqlite", create=True) as store:
        store.acknowledge(ack())
        store.acknowledge(ack(check="sweep.c8.tpot_p50_ms"))
        store.acknowledge(ack(pr=13, head_sha=SHA[4]))
        store.acknowledge(ack(pr=13, head_sha=SHA[4], repository="mallory/vllm"))
        assert store.unmerged(repository="Octo/vllm") == [(12, SHA[3]), (13, SHA[4])]
        assert store.link_merge(12, SHA[4], SHA[1], repository="octo/vllm") == []  # other head
        linked = store.link_merge(12, SHA[3], SHA[1], repository="octo/vllm")
        assert [a.check for a in linked] == ["drain.req_per_min", "sweep.c8.tpot_p50_ms"]
        assert store.unmerged(repository="octo/vllm") == [(13, SHA[4])]
        store.link_merge(13, SHA[4], SHA[2], repository="octo/vllm")
        assert store.unmerged(repository="octo/vllm") == []
        # another repository's acknowledgement of the same PR number stays as it was
        assert store.unmerged(repository="mallory/vllm") == [(13, SHA[4])]


def test_a_new_file_has_this_schema_version_and_reopens(tmp_path):
    path = tmp_path / "h.sqlite"
    with opened(path, create=True):
        pass
    raw = sqlite3.connect(path)
    assert raw.execute("SELECT version FROM schema_version").fetchone() == (schema.SCHEMA_VERSION,)
    raw.close()
    with opened(path) as store:
        assert store.runs() == []


def test_a_missing_file_is_an_error_unless_created(tmp_path):
    with pytest.raises(GateError, match="no history file"):
        open_store(tmp_path / "none.sqlite")
    (tmp_path / "dir").mkdir()
    with pytest.raises(GateError, match="not a file"):
        open_store(tmp_path / "dir")
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not a database at all, just some text " * 20)
    with pytest.raises(GateError, match="not a readable history file"):
        open_store(junk)


def test_a_file_from_a_newer_gate_is_refused(tmp_path):
    path = tmp_path / "h.sqlite"
    with opened(path, create=True):
        pass
    raw = sqlite3.connect(path)
    raw.execute("UPDATE schema_version SET version = 99")
    raw.commit()
    raw.close()
    with pytest.raises(GateError, match="schema v99; this gate reads up to v1"):
        open_store(path)


def test_a_database_that_is_not_a_history_is_refused(tmp_path):
    path = tmp_path / "other.sqlite"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE t (x)")
    raw.commit()
    raw.close()
    with pytest.raises(GateError, match="not a gate history file"):
        open_store(path)


def test_migrations_run_in_order_and_a_failing_one_leaves_the_file_as_it_was(tmp_path,
                                                                           monkeypatch):
    path = tmp_path / "h.sqlite"
    with opened(path, create=True) as store:
        store.add_run(run(), meta())
    good = (*schema.MIGRATIONS, (2, "a column", ("ALTER TABLE runs ADD COLUMN note TEXT",)))
    broken = (*good, (3, "broken", ("ALTER TABLE runs ADD COLUMN later TEXT",
                                    "CREATE TABLE runs (x)")))
    monkeypatch.setattr(schema, "MIGRATIONS", broken)
    with pytest.raises(GateError, match=r"could not bring .* to history schema v3: table runs "
                       r"already exists; that migration was rolled back \(the file stays at v2\)"):
        open_store(path)
    raw = sqlite3.connect(path)
    # migration 2 stands (its own transaction); all of 3 was rolled back
    assert raw.execute("SELECT version FROM schema_version").fetchone() == (2,)
    columns = [row[1] for row in raw.execute("PRAGMA table_info(runs)")]
    assert "note" in columns and "later" not in columns
    assert raw.execute("SELECT count(*) FROM runs").fetchone() == (1,)
