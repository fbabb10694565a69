"""The history file's schema and its migrations, in one place.

The file records its version in `schema_version` (one row). Opening a file runs every
migration after the version it holds, in one transaction each, so an old history is brought
forward in place and a half-migrated file never stays behind; a file written by a newer gate
(a version this gate does not know) is refused, never read. To change the schema: append one
migration here (its statements, run in order), and say what it does in its comment.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator

from gate.core.errors import GateError

# Each migration takes the file from the version before it to its own number.
MIGRATIONS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (1, "runs, their per-check entries, acknowledgements", (
        """CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            commit_sha TEXT NOT NULL,
            commit_time TEXT,          -- the commit's date: orders the series when known
            measured_at TEXT NOT NULL, -- results.created_at
            recorded_at TEXT NOT NULL,
            branch TEXT NOT NULL,
            source TEXT NOT NULL,      -- nightly, post-merge, manual
            plan TEXT NOT NULL,
            plan_hash TEXT NOT NULL,
            runner_class TEXT NOT NULL,
            hardware_key TEXT NOT NULL,
            vllm_version TEXT,
            gate_version TEXT NOT NULL,
            fingerprint TEXT NOT NULL, -- JSON: the fingerprint summary
            results_path TEXT,
            pr INTEGER,                -- post-merge: the PR that became this commit
            pr_head TEXT,
            UNIQUE (commit_sha, plan, runner_class)
        )""",
        """CREATE TABLE entries (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            check_name TEXT NOT NULL,
            label TEXT NOT NULL,
            unit TEXT NOT NULL,
            direction TEXT NOT NULL,
            judged INTEGER NOT NULL,   -- the plan sets a threshold for it
            value REAL NOT NULL,       -- geometric mean of the repeats
            n INTEGER NOT NULL,
            sd_log REAL,               -- spread of the repeats' logs (null for one repeat)
            repeats TEXT NOT NULL,     -- JSON list of the per-repeat values
            PRIMARY KEY (run_id, check_name)
        )""",
        """CREATE TABLE acknowledgements (
            id INTEGER PRIMARY KEY,
            repository TEXT NOT NULL,
            pr INTEGER NOT NULL,
            head_sha TEXT NOT NULL,
            check_name TEXT NOT NULL,
            reason TEXT NOT NULL,
            login TEXT NOT NULL,
            permission TEXT NOT NULL,
            created_at TEXT NOT NULL,
            merged_commit TEXT,        -- set when the PR's post-merge run is recorded
            UNIQUE (repository, pr, head_sha, check_name)
        )""",
        "CREATE INDEX runs_series ON runs (plan, runner_class)",
    )),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]


def file_version(conn: sqlite3.Connection) -> int:
    """The version the file holds: 0 for an empty file (no tables yet)."""
    has = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name = "
                       "'schema_version'").fetchone()
    if not has:
        tables = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()
        if tables[0]:
            raise GateError("the file has tables but no schema_version: not a gate history file")
        return 0
    row = conn.execute("SELECT version FROM schema_version").fetchone()
    if row is None:
        raise GateError("the history file's schema_version table is empty")
    return int(row[0])


def migrate(conn: sqlite3.Connection, where: str) -> int:
    """Bring the file up to the last migration's version; the version it held before."""
    held = file_version(conn)
    latest = MIGRATIONS[-1][0]
    if held > latest:
        raise GateError(f"{where} has history schema v{held}; this gate reads up to "
                        f"v{latest}: use a newer gate")
    now = held
    for version, _what, statements in MIGRATIONS:
        if version <= held:
            continue
        try:
            with transaction(conn):  # one transaction per migration: all of it, or none
                if version == 1:
                    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
                    conn.execute("INSERT INTO schema_version VALUES (0)")
                for statement in statements:
                    conn.execute(statement)
                conn.execute("UPDATE schema_version SET version = ?", (version,))
        except sqlite3.DatabaseError as exc:
            raise GateError(f"could not bring {where} to history schema v{version}: {exc}; "
                            f"that migration was rolled back (the file stays at v{now})") from None
        now = version
    return held


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """BEGIN ... COMMIT, or ROLLBACK on any error. The connection is in autocommit mode
    (isolation_level None) so that DDL is inside the transaction too, which Python's implicit
    transactions do not do."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
