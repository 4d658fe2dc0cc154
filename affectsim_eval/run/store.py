"""Results store of a benchmark run: one SQLite file (e.g. ``RUN_DIR/results.sqlite``), one row per episode.

Every :meth:`ResultsStore.put` is committed in its own transaction before it returns, so a run killed
at any moment (SIGKILL included) keeps every episode it reported and can be resumed with
:meth:`ResultsStore.pending`. The run's metadata (config, code version, seeds, checkpoint checksums,
split, episode ids) is stored once, when the store is created; reopening under another ``config``
is refused, since resuming under another configuration would mix results.

Records are stored as JSON written by :mod:`json` with ``allow_nan=True``: NaN and +/-Infinity are
written as the bare literals ``NaN`` / ``Infinity`` (not strict JSON, SQLite's ``json_*`` functions
reject them) and read back as floats. As with any JSON, tuples come back as lists and dict keys as
strings. Keys are sorted, so equal records have equal text.

Schema (version :data:`SCHEMA_VERSION`)::

    schema(app TEXT, version INTEGER)                  -- one row: ('affectsim-results', 1)
    run(id INTEGER PRIMARY KEY CHECK (id = 1), meta TEXT, created_at TEXT)
    episodes(episode_id TEXT PRIMARY KEY, status TEXT CHECK (status IN ('ok', 'failed')),
             reason TEXT, record TEXT, wall_s REAL, worker TEXT, finished_at TEXT)

Concurrency: one writer process and any number of readers (WAL). Several writer processes work,
serialised by SQLite's lock with a busy timeout, but a worker pool should funnel its records through
one writer, or write one shard per worker and :meth:`ResultsStore.merge` them.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

from affectsim_core.errors import MAX_SHOWN, InvalidInput
from affectsim_core.readers import parse_json

SCHEMA_VERSION = 1
APP = "affectsim-results"
TABLES = frozenset({"schema", "run", "episodes"})
EXPECTED = f"a results store written by affectsim (schema {SCHEMA_VERSION})"
STATUSES = ("ok", "failed")
_COLUMNS = "episode_id, status, reason, record, wall_s, worker, finished_at"

_SCHEMA_SQL = (
    "CREATE TABLE schema (app TEXT NOT NULL, version INTEGER NOT NULL)",
    "CREATE TABLE run (id INTEGER PRIMARY KEY CHECK (id = 1), meta TEXT NOT NULL, created_at TEXT NOT NULL)",
    """CREATE TABLE episodes (
        episode_id TEXT PRIMARY KEY,
        status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
        reason TEXT NOT NULL,
        record TEXT NOT NULL,
        wall_s REAL,
        worker TEXT NOT NULL,
        finished_at TEXT NOT NULL
    )""",
)


def _dumps(obj: Any, field: str) -> str:
    """Canonical JSON text of ``obj`` (sorted keys, NaN allowed); InvalidInput if it is not JSON-able."""
    try:
        return json.dumps(obj, sort_keys=True, allow_nan=True, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise InvalidInput(field, obj, f"JSON-serialisable data (dicts with str keys, lists, str, numbers, None): {e}") from None


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


_ABSENT = object()


def _config_diff(stored: Any, given: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """``(dotted key, stored value, given value)`` wherever two JSON configs differ; absent keys are ``_ABSENT``."""
    if isinstance(stored, dict) and isinstance(given, dict):
        out: list[tuple[str, Any, Any]] = []
        for key in sorted(set(stored) | set(given), key=str):
            a, b = stored.get(key, _ABSENT), given.get(key, _ABSENT)
            if a is _ABSENT or b is _ABSENT:
                out.append((f"{prefix}{key}", a, b))
            else:
                out += _config_diff(a, b, f"{prefix}{key}.")
        return out
    same = _dumps(stored, "config") == _dumps(given, "config")  # equal as stored: NaN == NaN, but 1 != 1.0
    return [] if same else [(prefix.rstrip("."), stored, given)]


def _check_same_config(stored: dict, given: dict, where: str, whose: str, why: str) -> None:
    """InvalidInput naming every key where ``given`` differs from ``stored`` (compared as stored, i.e. after JSON)."""
    diff = _config_diff(stored, json.loads(_dumps(given, "config")))
    if diff:
        show = lambda v: "<absent>" if v is _ABSENT else v
        raise InvalidInput(f"config key(s) {', '.join(k for k, _, _ in diff)}", {k: show(b) for k, _, b in diff},
                           f"the configuration {whose} ({ {k: show(a) for k, a, _ in diff} }); {why}", where)


def _not_a_store(path: Path, found: str) -> InvalidInput:
    return InvalidInput("results store", str(path), f"{EXPECTED}, found {found}; delete it or choose another --out")


class ResultsStore:
    """Episode results of one run in one SQLite file; open it with :meth:`ResultsStore.open`."""

    def __init__(self, db: sqlite3.Connection, path: Path, meta: dict) -> None:
        self._db = db
        self.path = path
        self._meta_text = _dumps(meta, "meta")

    # -------------------------------------------------------------------------- opening
    @classmethod
    def open(cls, path: str | Path, meta: dict | None = None, *, busy_timeout_s: float = 30.0) -> ResultsStore:
        """Open the store at ``path``, creating it (and its directory) with ``meta`` if absent or empty.

        ``meta`` is the run's metadata; ``meta["config"]`` (a dict) holds everything that defines the
        results (config, split, seed, recognizers, policy). Without ``meta`` the store must already
        exist (readers, reports). With ``meta`` an existing store must have been started with an equal
        ``config``; its stored meta is kept as written at creation. An empty file (0 bytes, or a SQLite
        database without tables, as a writer killed while creating the store leaves) holds no results
        and is initialised like an absent one. Raises InvalidInput naming the path for anything else.
        """
        path = Path(path)
        if meta is not None:
            if not isinstance(meta, dict) or not isinstance(meta.get("config", {}), dict):
                raise InvalidInput("meta", meta, 'a dict whose "config" (if present) is a dict')
            _dumps(meta, "meta")
        elif not path.exists():
            raise InvalidInput("results store", str(path), f"{EXPECTED}; the file does not exist (pass meta to create one)")
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            db = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None)
        except sqlite3.Error as e:
            raise _not_a_store(path, f"a file sqlite cannot open ({e})") from None
        try:
            store = cls._setup(db, path, meta)
            if meta is not None:
                _check_same_config(store.meta().get("config", {}), meta.get("config", {}), str(path),
                                   "this store was started with",
                                   "resuming under another configuration would mix results: choose another --out")
        except BaseException:
            db.close()
            raise
        return store

    @classmethod
    def _setup(cls, db: sqlite3.Connection, path: Path, meta: dict | None) -> ResultsStore:
        """Check what is at ``path`` without writing to it, then initialise it if it is empty."""
        tables = _tables(db, path)
        if tables and tables != TABLES:
            raise _not_a_store(path, f"a SQLite database with tables {sorted(tables)}")
        if not tables and meta is None:
            raise _not_a_store(path, "an empty file (pass meta to create the store)")
        # WAL + synchronous=FULL: a commit is on disk (WAL fsynced) before put() returns, so it survives
        # SIGKILL and power loss. NORMAL would already survive SIGKILL (the OS keeps the written WAL
        # pages), but not power loss; at one commit per episode the extra fsync costs nothing.
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        if not tables:
            with _transaction(db):
                if not _tables(db, path):  # another process may have created it meanwhile
                    for statement in _SCHEMA_SQL:
                        db.execute(statement)
                    db.execute("INSERT INTO schema VALUES (?, ?)", (APP, SCHEMA_VERSION))
                    db.execute("INSERT INTO run VALUES (1, ?, ?)", (_dumps(meta, "meta"), _utc_now()))
        try:
            schema = db.execute("SELECT app, version FROM schema").fetchall()
            run = db.execute("SELECT meta FROM run WHERE id = 1").fetchone()
            stored = parse_json(run[0], "run metadata", str(path)) if run else None
        except (sqlite3.DatabaseError, ValueError) as e:  # InvalidInput is a ValueError
            raise _not_a_store(path, f"a damaged store ({e})") from None
        if schema != [(APP, SCHEMA_VERSION)]:
            raise _not_a_store(path, f"schema rows {schema}")
        if run is None:
            raise _not_a_store(path, "no run metadata")
        if not isinstance(stored, dict) or not isinstance(stored.get("config", {}), dict):
            shown = run[0] if len(run[0]) <= MAX_SHOWN else f"{run[0][:MAX_SHOWN]}..."
            raise _not_a_store(path, f'run metadata {shown!r}, not a JSON object whose "config" (if present) is one')
        return cls(db, path, stored)

    def close(self) -> None:
        """Close the connection (idempotent); everything put is already committed."""
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------------------- writing
    def put(self, record: dict, *, replace: bool = False) -> None:
        """Store one episode's record, committed before this returns.

        ``record`` is a JSON-able dict with ``episode_id`` (non-empty str), ``status`` (``'ok'`` or
        ``'failed'``), ``reason`` (the failure reason: non-empty iff failed; default ``''``) and
        optionally ``wall_s`` (seconds, finite, >= 0) and ``worker`` (str). The whole dict is stored.
        An ``episode_id`` already in the store is refused unless ``replace=True``. Waits up to the busy
        timeout for another writer's lock.
        """
        episode_id, status, reason, wall_s, worker = _validated(record)
        row = (episode_id, status, reason, _dumps(record, f"record of {episode_id}"), wall_s, worker, _utc_now())
        verb = "INSERT OR REPLACE" if replace else "INSERT"
        try:
            with _transaction(self._db):
                self._db.execute(f"{verb} INTO episodes ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", row)
        except sqlite3.IntegrityError:
            raise InvalidInput("episode_id", episode_id, f"an episode not yet in {self.path} (pass replace=True to overwrite)") from None

    def merge(self, other_path: str | Path) -> int:
        """Import every episode of another store (e.g. a worker's shard); returns how many were new.

        The other store must have been started with the same ``config``. An episode in both with the
        same record is skipped; with a different record InvalidInput names it and nothing is imported.
        """
        with ResultsStore.open(other_path) as other:
            _check_same_config(self.meta().get("config", {}), other.meta().get("config", {}), str(other.path),
                               f"of {self.path}", "merging would mix results")
            rows = other._db.execute(f"SELECT {_COLUMNS} FROM episodes ORDER BY episode_id").fetchall()
        new = []
        with _transaction(self._db):
            for row in rows:
                have = self._db.execute("SELECT record FROM episodes WHERE episode_id = ?", (row[0],)).fetchone()
                if have is None:
                    new.append(row)
                elif have[0] != row[3]:
                    raise InvalidInput("episode_id", row[0], f"the same record in {self.path} and {other_path}; "
                                       "they differ, so one of them must be removed by hand")
            self._db.executemany(f"INSERT INTO episodes ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", new)
        return len(new)

    # -------------------------------------------------------------------------- reading
    def meta(self) -> dict:
        """The run metadata the store was created with (a fresh copy)."""
        return json.loads(self._meta_text)

    def count(self) -> int:
        """Number of finished episodes (ok and failed)."""
        return self._db.execute("SELECT COUNT(*) FROM episodes").fetchone()[0]

    def done(self) -> set[str]:
        """Ids of the finished episodes, ok and failed alike."""
        return {r[0] for r in self._db.execute("SELECT episode_id FROM episodes")}

    def pending(self, episode_ids: Iterable[str], retry_failed: bool = False) -> list[str]:
        """The ids of ``episode_ids`` still to run, in the given order; failed ones only if ``retry_failed``."""
        ids = list(episode_ids)
        if len(set(ids)) != len(ids):
            dupes = sorted({i for i in ids if ids.count(i) > 1})
            raise InvalidInput("episode_ids", dupes, "each episode id once")
        where = "WHERE status = 'ok'" if retry_failed else ""
        finished = {r[0] for r in self._db.execute(f"SELECT episode_id FROM episodes {where}")}
        return [i for i in ids if i not in finished]

    def records(self, status: str | None = "ok") -> list[dict]:
        """The stored records with ``status`` (``'ok'``, ``'failed'``, or None for all), sorted by episode id."""
        if status not in (*STATUSES, None):
            raise InvalidInput("status", status, "'ok', 'failed' or None (all)")
        sql, args = "SELECT episode_id, record FROM episodes", ()
        if status is not None:
            sql, args = sql + " WHERE status = ?", (status,)
        return [self._record(i, r) for i, r in self._db.execute(sql + " ORDER BY episode_id", args)]

    def _record(self, episode_id: str, text: str) -> dict:
        """A stored record, parsed; a damaged one (truncated, not JSON, not an object) is refused naming the
        store and the episode."""
        where = f"{self.path}: episode {episode_id}"
        record = parse_json(text, "record", where)
        if not isinstance(record, dict):
            raise InvalidInput("record", type(record).__name__, "a JSON object", where=where)
        return record

    def failures(self) -> list[tuple[str, str]]:
        """``(episode_id, reason)`` of the failed episodes, sorted by episode id."""
        return self._db.execute(
            "SELECT episode_id, reason FROM episodes WHERE status = 'failed' ORDER BY episode_id").fetchall()


def _validated(record: Any) -> tuple[str, str, str, float | None, str]:
    """The row columns of ``record``, checked."""
    if not isinstance(record, dict):
        raise InvalidInput("record", record, "a dict")
    episode_id = record.get("episode_id")
    if not isinstance(episode_id, str) or not episode_id:
        raise InvalidInput("record['episode_id']", episode_id, "a non-empty str")
    status, reason = record.get("status"), record.get("reason", "")
    if status not in STATUSES:
        raise InvalidInput(f"record['status'] of {episode_id}", status, "'ok' or 'failed'")
    if not isinstance(reason, str) or bool(reason) != (status == "failed"):
        raise InvalidInput(f"record['reason'] of {episode_id}", reason, "a non-empty str if failed, '' if ok")
    wall_s, worker = record.get("wall_s"), record.get("worker", "")
    if wall_s is not None and (isinstance(wall_s, bool) or not isinstance(wall_s, (int, float))
                               or not math.isfinite(wall_s) or wall_s < 0):
        raise InvalidInput(f"record['wall_s'] of {episode_id}", wall_s, "None or finite seconds >= 0")
    if not isinstance(worker, str):
        raise InvalidInput(f"record['worker'] of {episode_id}", worker, "a str")
    return episode_id, status, reason, None if wall_s is None else float(wall_s), worker


def _tables(db: sqlite3.Connection, path: Path) -> set[str]:
    """Names of the user tables at ``path``; InvalidInput if it is not a SQLite database."""
    try:
        rows = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    except sqlite3.DatabaseError as e:
        if "locked" in str(e):
            raise
        raise _not_a_store(path, f"a file sqlite cannot read ({e})") from None
    return {r[0] for r in rows if not r[0].startswith("sqlite_")}


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    """A write transaction: takes the write lock at once (waiting up to the busy timeout), commits or rolls back."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
