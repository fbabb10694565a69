"""The history file: one SQLite database (stdlib sqlite3) that every default-branch run is
appended to, one entry per commit x plan x runner class x check.

A run is recorded whole or not at all (one transaction), only when it is fit to be measured
from: complete, valid, from the default branch; a second run of a commit already recorded
for that plan and runner class is refused (or skipped with `if_new`), so nothing stored is
replaced. Each entry keeps the per-repeat figures of its check and their geometric mean, the
value a series plots; each run keeps its fingerprint summary (the hardware, threads and
versions it ran under), so a change of runner shows beside the figures.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.core.errors import GateError
from gate.history.model import Acknowledgement, Point, Series
from gate.history.schema import migrate, transaction
from gate.judge.checks import judged, per_repeat, ratio_slots, slots
from gate.measure.results import Results
from gate.runner.fingerprint import Fingerprint

SOURCES = ("nightly", "post-merge", "manual")


@dataclass(frozen=True)
class RunMeta:
    """Where a run comes from: what results.json does not say."""

    commit: str
    branch: str
    source: str = "nightly"
    commit_time: str | None = None
    results_path: str | None = None
    pr: int | None = None
    pr_head: str | None = None


@dataclass(frozen=True)
class Added:
    run_id: int | None  # None: the commit was already recorded (if_new)
    entries: int
    linked: list[Acknowledgement]  # acknowledgements this merge carried to the history


def runner_class(fp: Fingerprint) -> str:
    """The runner class of a run (judge.noise.runner_key), imported on use: judge.noise needs
    numpy, and the poster reads this file's acknowledgements with a hash-pinned install that
    has none (requirements/poster.txt)."""
    from gate.judge.noise import runner_key as key

    return key(fp)


def fingerprint_summary(results: Results) -> dict[str, Any]:
    fp = results.fingerprint
    return {
        "hardware_key": fp.hardware_key, "runner_class": runner_class(fp),
        "cpu_model": fp.cpu_model, "host_cores": fp.host_cores,
        "affinity_cpus": fp.affinity_cpus, "quota_cpus": fp.cpu_quota.quota_cpus,
        "torch_threads": fp.torch_threads, "gpus": sorted(g.name for g in fp.gpus),
        "vllm_version": fp.vllm_version, "vllm_commit": fp.vllm_commit,
        "model_runner": fp.model_runner, "python": fp.versions.get("python"),
    }


def entries_of(results: Results) -> list[dict[str, Any]]:
    """One entry per check the results measure: its figure per repeat and their geomean."""
    thresholds = results.plan.thresholds
    found = slots(results) + ratio_slots(results, thresholds)
    kept = {s.name for s in judged(found, thresholds)}
    out = []
    for slot in found:
        values = list(per_repeat(results, slot).values())
        if not values:
            continue
        logs = [math.log(v) for v in values]
        mean = sum(logs) / len(logs)
        sd = (math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
              if len(logs) > 1 else None)
        out.append({"check_name": slot.name, "label": slot.label, "unit": slot.metric.unit,
                    "direction": slot.metric.direction, "judged": slot.name in kept,
                    "value": math.exp(mean), "n": len(values), "sd_log": sd,
                    "repeats": json.dumps(values)})
    return out


class HistoryStore:
    """An open history file. Use as a context manager, or call close()."""

    def __init__(self, conn: sqlite3.Connection, path: Path):
        self.conn = conn
        self.path = path

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    # -- writing ----------------------------------------------------------------------------
    def add_run(self, results: Results, meta: RunMeta, *, if_new: bool = False) -> Added:
        """Record `results` (already judged fit by the caller) as one run with its entries;
        link the acknowledgements of the PR it merged (meta.pr, meta.pr_head)."""
        if meta.source not in SOURCES:
            raise GateError(f"source {meta.source!r}: choose one of {', '.join(SOURCES)}")
        entries = entries_of(results)
        if not entries:
            raise GateError("the results hold no figures to record (no drain and no sweep cells)")
        runner = runner_class(results.fingerprint)
        held = self.conn.execute(
            "SELECT id FROM runs WHERE commit_sha = ? AND plan = ? AND runner_class = ?",
            (meta.commit, results.plan.name, runner)).fetchone()
        if held:
            if if_new:
                return Added(None, 0, [])
            raise GateError(
                f"commit {meta.commit} is already recorded for plan {results.plan.name!r} on "
                f"{runner!r} (run {held[0]}): one entry per commit; nothing was changed")
        with transaction(self.conn):
            cur = self.conn.execute(
                "INSERT INTO runs (commit_sha, commit_time, measured_at, recorded_at, branch, "
                "source, plan, plan_hash, runner_class, hardware_key, vllm_version, "
                "gate_version, fingerprint, results_path, pr, pr_head) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (meta.commit, meta.commit_time, results.created_at, _now(), meta.branch,
                 meta.source, results.plan.name, results.plan_hash, runner,
                 results.fingerprint.hardware_key, results.fingerprint.vllm_version,
                 results.gate_version, json.dumps(fingerprint_summary(results)),
                 meta.results_path, meta.pr, meta.pr_head))
            run_id = int(cur.lastrowid or 0)
            self.conn.executemany(
                "INSERT INTO entries (run_id, check_name, label, unit, direction, judged, value, "
                "n, sd_log, repeats) VALUES (:run_id, :check_name, :label, :unit, :direction, "
                ":judged, :value, :n, :sd_log, :repeats)",
                [{**e, "run_id": run_id} for e in entries])
            linked = (self._link(meta.pr, meta.pr_head, meta.commit)
                      if meta.pr is not None and meta.pr_head else [])
        return Added(run_id, len(entries), linked)

    def link_merge(self, pr: int, head_sha: str, commit: str, *, repository: str
                   ) -> list[Acknowledgement]:
        """PR `pr` merged at `head_sha` and became `commit` on the default branch: its
        acknowledgements of that head now mark that commit (detection, baseline update)."""
        with transaction(self.conn):
            return self._link(pr, head_sha, commit, repository=repository)

    def _link(self, pr: int, head_sha: str, commit: str, *, repository: str | None = None
              ) -> list[Acknowledgement]:
        self.conn.execute(
            "UPDATE acknowledgements SET merged_commit = ? WHERE pr = ? AND head_sha = ? "
            "AND merged_commit IS NULL AND repository = COALESCE(?, repository) COLLATE NOCASE",
            (commit, pr, head_sha, repository))
        return [a for a in self.acknowledgements(pr=pr) if a.merged_commit == commit]

    def unmerged(self, *, repository: str) -> list[tuple[int, str]]:
        """(PR, head) of every acknowledgement of `repository` not yet linked to a merge."""
        rows = self.conn.execute(
            "SELECT DISTINCT pr, head_sha FROM acknowledgements WHERE merged_commit IS NULL "
            "AND repository = ? COLLATE NOCASE ORDER BY pr, head_sha", (repository,)).fetchall()
        return [(int(pr), str(sha)) for pr, sha in rows]

    def acknowledge(self, ack: Acknowledgement) -> Acknowledgement:
        """Keep an acknowledgement; the same check of the same head twice is refused."""
        try:
            with transaction(self.conn):
                self.conn.execute(
                    "INSERT INTO acknowledgements (repository, pr, head_sha, check_name, reason, "
                    "login, permission, created_at, merged_commit) VALUES (?, ?, ?, ?, ?, ?, ?, "
                    "?, ?)", (ack.repository, ack.pr, ack.head_sha, ack.check, ack.reason,
                              ack.login, ack.permission, ack.created_at, ack.merged_commit))
        except sqlite3.IntegrityError:
            raise GateError(f"{ack.check} of PR #{ack.pr} at {ack.head_sha[:12]} is already "
                            "acknowledged (every acknowledgement is kept: see gate history "
                            "acknowledgements)") from None
        return ack

    # -- reading ----------------------------------------------------------------------------
    def acknowledgements(self, *, pr: int | None = None, head_sha: str | None = None
                         ) -> list[Acknowledgement]:
        query = ("SELECT repository, pr, head_sha, check_name, reason, login, permission, "
                 "created_at, merged_commit FROM acknowledgements WHERE 1 = 1")
        args: list[Any] = []
        if pr is not None:
            query, args = query + " AND pr = ?", [*args, pr]
        if head_sha is not None:
            query, args = query + " AND head_sha = ?", [*args, head_sha]
        rows = self.conn.execute(query + " ORDER BY id", args).fetchall()
        keys = ("repository", "pr", "head_sha", "check", "reason", "login", "permission",
                "created_at", "merged_commit")
        return [Acknowledgement(**dict(zip(keys, row, strict=True))) for row in rows]

    def runs(self) -> list[dict[str, Any]]:
        cur = self.conn.execute(
            "SELECT id, commit_sha, COALESCE(commit_time, measured_at) AS at, branch, source, "
            "plan, runner_class, hardware_key, vllm_version, pr FROM runs ORDER BY plan, "
            "runner_class, at, id")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def series_keys(self, *, judged_only: bool = True) -> list[tuple[str, str, str]]:
        """(plan, runner class, check) of every series in the file."""
        rows = self.conn.execute(
            "SELECT DISTINCT r.plan, r.runner_class, e.check_name FROM entries e JOIN runs r "
            "ON r.id = e.run_id WHERE e.judged >= ? ORDER BY 1, 2, 3", (int(judged_only),))
        return [(str(p), str(r), str(c)) for p, r, c in rows.fetchall()]

    def series(self, plan: str, runner_class: str, check: str) -> Series:
        rows = self.conn.execute(
            "SELECT r.id, r.commit_sha, COALESCE(r.commit_time, r.measured_at) AS at, e.value, "
            "e.n, e.sd_log, r.pr, e.label, e.unit, e.direction, e.judged FROM entries e JOIN "
            "runs r ON r.id = e.run_id WHERE r.plan = ? AND r.runner_class = ? AND "
            "e.check_name = ? ORDER BY at, r.id", (plan, runner_class, check)).fetchall()
        if not rows:
            raise GateError(f"no history for check {check!r} of plan {plan!r} on {runner_class!r}")
        last = rows[-1]
        points = [Point(run_id=r[0], commit=r[1], at=r[2], value=r[3], n=r[4], sd_log=r[5],
                        pr=r[6]) for r in rows]
        return Series(plan=plan, runner_class=runner_class, check=check, label=last[7],
                      unit=last[8], direction=last[9], judged=bool(last[10]), points=points)

    def recent(self, plan: str, runner_class: str, nights: int = 30) -> dict[str, list[float]]:
        """Each check's last `nights` on the default branch for this plan and runner class
        (the report's sparklines)."""
        return {s.check: s.values()[-nights:] for s in self.all_series(judged_only=False,
                                                                       plan=plan)
                if s.runner_class == runner_class}

    def all_series(self, *, judged_only: bool = True, plan: str | None = None,
                   checks: list[str] | None = None) -> list[Series]:
        return [self.series(p, r, c) for p, r, c in self.series_keys(judged_only=judged_only)
                if (plan is None or p == plan) and (not checks or c in checks)]


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def open_store(path: Path, *, create: bool = False) -> HistoryStore:
    """Open the history file at `path` (migrated to this gate's schema); `create` makes a new
    one where there is none, else a missing file is an error."""
    path = Path(path)
    if not path.exists() and not create:
        raise GateError(f"no history file at {path} (gate history add creates one)")
    if path.exists() and not path.is_file():
        raise GateError(f"{path} is not a file")
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        try:
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.DatabaseError as exc:
            raise GateError(f"{path} is not a readable history file: {exc}") from None
        migrate(conn, str(path))
    except GateError:
        conn.close()
        raise
    return HistoryStore(conn, path)


@contextmanager
def opened(path: Path, *, create: bool = False) -> Iterator[HistoryStore]:
    store = open_store(path, create=create)
    try:
        yield store
    finally:
        store.close()
