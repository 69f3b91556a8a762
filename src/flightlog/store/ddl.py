"""The schema history of both SQL backends: each one's ordered migrations, as shipped.

Data, not code: a migration that shipped has run on users' databases and a schema is known by its version
number alone, so these texts never change (``tests/store/test_migrations_pinned.py`` pins each one's
sha256); a schema change is a new migration appended to its backend's list. The two lists differ in types
(SQLite's ``INTEGER``/``BLOB``, PostgreSQL's ``BIGINT``/``BYTEA``/``BIGSERIAL``), in trigger syntax and in
history (PostgreSQL started from the sixth SQLite schema in one migration), which is why the table
definitions are written twice; everything that reads or writes those tables is written once
(:mod:`flightlog.store.sql`).
"""

from __future__ import annotations

__all__ = [
    "LIVE_RUNS_OWNER",
    "POSTGRES_EVENTS_SUSPENDED",
    "POSTGRES_MIGRATIONS",
    "POSTGRES_RUNS_HOT",
    "POSTGRES_RUNS_LIST",
    "RUNS_FOLD_2",
    "RUNS_FOLD_3",
    "RUNS_FOLD_4",
    "RUNS_FOLD_5",
    "RUNS_FOLD_6",
    "RUNS_FOLD_7",
    "SQLITE_EVENTS_SUSPENDED",
    "SQLITE_MIGRATIONS",
    "SQLITE_RUNS_LIST",
]

SQLITE_MIGRATIONS: list[tuple[str, str]] = [
    (
        "sessions, append-only events, epochs, grants, effects, artifacts, checkpoints, imports",
        """
        CREATE TABLE sessions (
            session_id TEXT PRIMARY KEY,
            task TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL,
            source TEXT NOT NULL,
            created_at_ms INTEGER NOT NULL,
            updated_at_ms INTEGER NOT NULL,
            head_seq INTEGER NOT NULL DEFAULT -1,
            head_hash TEXT NOT NULL DEFAULT 'GENESIS',
            merkle_root TEXT NOT NULL DEFAULT '',
            parent_session_id TEXT,
            metadata TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX sessions_parent ON sessions(parent_session_id);
        CREATE INDEX sessions_created ON sessions(created_at_ms);
        CREATE TABLE events (
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            event BLOB NOT NULL,
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL,
            recorded_at_ms INTEGER NOT NULL,
            PRIMARY KEY (session_id, seq)
        );
        CREATE TRIGGER events_no_update BEFORE UPDATE ON events
            BEGIN SELECT RAISE(ABORT, 'flightlog events are append-only'); END;
        CREATE TRIGGER events_no_delete BEFORE DELETE ON events
            BEGIN SELECT RAISE(ABORT, 'flightlog events are append-only'); END;
        CREATE TABLE authority_epochs (
            session_id TEXT PRIMARY KEY,
            epoch INTEGER NOT NULL,
            updated_at_ms INTEGER NOT NULL
        );
        CREATE TABLE grant_policies (
            session_id TEXT NOT NULL,
            policy_id TEXT NOT NULL,
            policy_json TEXT NOT NULL,
            recorded_at_ms INTEGER NOT NULL,
            PRIMARY KEY (session_id, policy_id)
        );
        CREATE TABLE external_effects (
            session_id TEXT NOT NULL,
            idempotency_key TEXT NOT NULL,
            intent_hash TEXT NOT NULL,
            intent_json TEXT NOT NULL,
            status TEXT NOT NULL,
            result_json TEXT,
            created_at_ms INTEGER NOT NULL,
            completed_at_ms INTEGER,
            PRIMARY KEY (session_id, idempotency_key)
        );
        CREATE INDEX external_effects_pending ON external_effects(status);
        CREATE TABLE artifacts (
            sha256 TEXT PRIMARY KEY,
            media_type TEXT NOT NULL,
            size_bytes INTEGER NOT NULL,
            content BLOB NOT NULL,
            created_at_ms INTEGER NOT NULL
        );
        CREATE TABLE checkpoints (
            checkpoint_id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL,
            size INTEGER NOT NULL,
            root TEXT NOT NULL,
            body TEXT NOT NULL,
            created_at_ms INTEGER NOT NULL
        );
        CREATE INDEX checkpoints_session ON checkpoints(session_id, size);
        CREATE TABLE imports (
            source_sha256 TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            importer TEXT NOT NULL,
            importer_version TEXT NOT NULL,
            source_name TEXT NOT NULL,
            imported_at_ms INTEGER NOT NULL
        );
        """,
    ),
    (
        "ledger id, checkpoint frontiers",
        """
        CREATE TABLE ledger_meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        INSERT INTO ledger_meta (key, value) VALUES ('ledger_id', lower(hex(randomblob(16))));
        CREATE TABLE checkpoint_frontiers (
            checkpoint_id INTEGER PRIMARY KEY,
            hashes BLOB NOT NULL
        );
        """,
    ),
    (
        "runs projection (seed 002 AgentRunSnapshot read model), live run heartbeats",
        """
        CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            parent TEXT,
            source TEXT NOT NULL,
            state TEXT NOT NULL,
            outcome TEXT,
            updated_at_ms INTEGER NOT NULL,
            last_seq INTEGER NOT NULL,
            session_status TEXT,
            snapshot TEXT NOT NULL,
            fold TEXT NOT NULL
        );
        CREATE INDEX runs_updated ON runs(updated_at_ms);
        CREATE INDEX runs_state ON runs(state, updated_at_ms);
        CREATE INDEX runs_source ON runs(source);
        CREATE INDEX runs_parent ON runs(parent);
        CREATE INDEX runs_outcome ON runs(outcome);
        CREATE INDEX runs_session_status ON runs(session_status);
        CREATE TABLE runs_meta (
            key TEXT PRIMARY KEY,
            value INTEGER NOT NULL
        );
        INSERT INTO runs_meta (key, value)
            VALUES ('fold_version', CASE WHEN EXISTS (SELECT 1 FROM events) THEN 0 ELSE 1 END);
        CREATE TRIGGER runs_follow_session_status AFTER UPDATE OF status ON sessions
            BEGIN
                UPDATE runs SET session_status = NEW.status
                WHERE run_id = NEW.session_id AND session_status IS NOT NULL;
            END;
        CREATE TABLE live_runs (
            run_id TEXT PRIMARY KEY,
            state TEXT NOT NULL,
            heartbeat_at_ms INTEGER NOT NULL,
            changed_at_ms INTEGER NOT NULL,
            tokens_used INTEGER,
            steps_taken INTEGER,
            pid INTEGER
        );
        """,
    ),
    (
        "index log of session checkpoints, witness cosignatures, salted artifacts and erasures",
        """
        CREATE TABLE index_leaves (
            idx INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL,
            checkpoint_id INTEGER NOT NULL,
            leaf BLOB NOT NULL,
            recorded_at_ms INTEGER NOT NULL
        );
        CREATE INDEX index_leaves_session ON index_leaves(session_id, idx);
        CREATE TRIGGER index_leaves_no_update BEFORE UPDATE ON index_leaves
            BEGIN SELECT RAISE(ABORT, 'flightlog index leaves are append-only'); END;
        CREATE TRIGGER index_leaves_no_delete BEFORE DELETE ON index_leaves
            BEGIN SELECT RAISE(ABORT, 'flightlog index leaves are append-only'); END;
        CREATE TABLE index_checkpoints (
            checkpoint_id INTEGER PRIMARY KEY AUTOINCREMENT,
            size INTEGER NOT NULL,
            root TEXT NOT NULL,
            body TEXT NOT NULL,
            frontier BLOB,
            created_at_ms INTEGER NOT NULL
        );
        CREATE INDEX index_checkpoints_size ON index_checkpoints(size);
        CREATE TABLE cosignatures (
            origin TEXT NOT NULL,
            size INTEGER NOT NULL,
            witness TEXT NOT NULL,
            root TEXT NOT NULL,
            note TEXT NOT NULL,
            created_at_ms INTEGER NOT NULL,
            PRIMARY KEY (origin, size, witness)
        );
        CREATE TABLE salted_artifacts (
            digest TEXT PRIMARY KEY,
            media_type TEXT NOT NULL,
            size_bytes INTEGER NOT NULL,
            content BLOB NOT NULL,
            salt BLOB NOT NULL,
            created_at_ms INTEGER NOT NULL
        );
        CREATE TABLE artifact_refs (
            digest TEXT NOT NULL,
            session_id TEXT NOT NULL,
            PRIMARY KEY (digest, session_id)
        );
        CREATE TABLE artifact_erasures (
            digest TEXT PRIMARY KEY,
            erased_at_ms INTEGER NOT NULL,
            log_session_id TEXT NOT NULL,
            log_seq INTEGER NOT NULL
        );
        """,
    ),
    (
        "runs: no index follows updated_at_ms, which every append moves (fewer WAL pages per commit)",
        """
        DROP INDEX IF EXISTS runs_state;
        CREATE INDEX runs_state ON runs(state);
        DROP INDEX IF EXISTS runs_outcome;
        DROP INDEX IF EXISTS runs_updated;
        """,
    ),
    (
        "fleet leases (holder, epoch, expiry per session), carried over from the fleet's fleet_leases",
        """
        CREATE TABLE IF NOT EXISTS fleet_leases (
            session_id TEXT PRIMARY KEY,
            holder TEXT,
            epoch INTEGER NOT NULL DEFAULT 0,
            expires_at_ms INTEGER NOT NULL DEFAULT 0,
            acquired_at_ms INTEGER NOT NULL DEFAULT 0,
            parked_seq INTEGER NOT NULL DEFAULT -2,
            queued_at_ms INTEGER NOT NULL
        );
        CREATE TABLE leases (
            session_id TEXT PRIMARY KEY,
            holder TEXT,
            epoch INTEGER NOT NULL DEFAULT 0,
            expires_at_ms INTEGER NOT NULL DEFAULT 0,
            acquired_at_ms INTEGER NOT NULL DEFAULT 0,
            parked_seq INTEGER NOT NULL DEFAULT -2,
            queued_at_ms INTEGER NOT NULL
        );
        CREATE INDEX leases_expiry ON leases(expires_at_ms);
        INSERT INTO leases (session_id, holder, epoch, expires_at_ms, acquired_at_ms, parked_seq, queued_at_ms)
            SELECT session_id, holder, epoch, expires_at_ms, acquired_at_ms, parked_seq, queued_at_ms
            FROM fleet_leases;
        DROP TABLE fleet_leases;
        """,
    ),
]
"""SQLite: list index + 1 is the schema version. Never edit one that has shipped; append."""


POSTGRES_MIGRATIONS: list[tuple[str, str]] = [
    (
        "sessions, append-only events, epochs, grants, effects, artifacts, checkpoints, imports, ledger id, "
        "frontiers, runs projection, live runs, index log, cosignatures, salted artifacts",
        """
        CREATE FUNCTION flightlog_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'flightlog % are append-only', TG_ARGV[0] USING ERRCODE = 'restrict_violation';
        END $$;
        CREATE TABLE sessions (
            session_id TEXT PRIMARY KEY,
            task TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL,
            source TEXT NOT NULL,
            created_at_ms BIGINT NOT NULL,
            updated_at_ms BIGINT NOT NULL,
            head_seq BIGINT NOT NULL DEFAULT -1,
            head_hash TEXT NOT NULL DEFAULT 'GENESIS',
            merkle_root TEXT NOT NULL DEFAULT '',
            parent_session_id TEXT,
            metadata TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX sessions_parent ON sessions(parent_session_id);
        CREATE INDEX sessions_created ON sessions(created_at_ms);
        CREATE INDEX sessions_id_pattern ON sessions(session_id text_pattern_ops);
        CREATE TABLE events (
            session_id TEXT NOT NULL,
            seq BIGINT NOT NULL,
            kind TEXT NOT NULL,
            event BYTEA NOT NULL,
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL,
            recorded_at_ms BIGINT NOT NULL,
            epoch BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (session_id, seq)
        );
        CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
            FOR EACH ROW EXECUTE FUNCTION flightlog_append_only('events');
        CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
            FOR EACH STATEMENT EXECUTE FUNCTION flightlog_append_only('events');
        CREATE TABLE authority_epochs (
            session_id TEXT PRIMARY KEY,
            epoch BIGINT NOT NULL,
            updated_at_ms BIGINT NOT NULL
        );
        CREATE TABLE grant_policies (
            session_id TEXT NOT NULL,
            policy_id TEXT NOT NULL,
            policy_json TEXT NOT NULL,
            recorded_at_ms BIGINT NOT NULL,
            ord BIGSERIAL,
            PRIMARY KEY (session_id, policy_id)
        );
        CREATE TABLE external_effects (
            session_id TEXT NOT NULL,
            idempotency_key TEXT NOT NULL,
            intent_hash TEXT NOT NULL,
            intent_json TEXT NOT NULL,
            status TEXT NOT NULL,
            result_json TEXT,
            created_at_ms BIGINT NOT NULL,
            completed_at_ms BIGINT,
            ord BIGSERIAL,
            PRIMARY KEY (session_id, idempotency_key)
        );
        CREATE INDEX external_effects_pending ON external_effects(status);
        CREATE TABLE artifacts (
            sha256 TEXT PRIMARY KEY,
            media_type TEXT NOT NULL,
            size_bytes BIGINT NOT NULL,
            content BYTEA NOT NULL,
            created_at_ms BIGINT NOT NULL
        );
        CREATE TABLE checkpoints (
            checkpoint_id BIGSERIAL PRIMARY KEY,
            session_id TEXT NOT NULL,
            size BIGINT NOT NULL,
            root TEXT NOT NULL,
            body TEXT NOT NULL,
            created_at_ms BIGINT NOT NULL
        );
        CREATE INDEX checkpoints_session ON checkpoints(session_id, size);
        CREATE TABLE imports (
            source_sha256 TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            importer TEXT NOT NULL,
            importer_version TEXT NOT NULL,
            source_name TEXT NOT NULL,
            imported_at_ms BIGINT NOT NULL
        );
        CREATE TABLE ledger_meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        INSERT INTO ledger_meta (key, value) VALUES ('ledger_id', replace(gen_random_uuid()::text, '-', ''));
        CREATE TABLE checkpoint_frontiers (
            checkpoint_id BIGINT PRIMARY KEY,
            hashes BYTEA NOT NULL
        );
        CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            parent TEXT,
            source TEXT NOT NULL,
            state TEXT NOT NULL,
            outcome TEXT,
            updated_at_ms BIGINT NOT NULL,
            last_seq BIGINT NOT NULL,
            session_status TEXT,
            snapshot TEXT NOT NULL,
            fold TEXT NOT NULL
        );
        CREATE INDEX runs_updated ON runs(updated_at_ms);
        CREATE INDEX runs_state ON runs(state, updated_at_ms);
        CREATE INDEX runs_source ON runs(source);
        CREATE INDEX runs_parent ON runs(parent);
        CREATE INDEX runs_outcome ON runs(outcome);
        CREATE INDEX runs_session_status ON runs(session_status);
        CREATE TABLE runs_meta (
            key TEXT PRIMARY KEY,
            value BIGINT NOT NULL
        );
        INSERT INTO runs_meta (key, value) VALUES ('fold_version', 1);
        CREATE FUNCTION flightlog_runs_follow_status() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE runs SET session_status = NEW.status
                WHERE run_id = NEW.session_id AND session_status IS NOT NULL;
            RETURN NEW;
        END $$;
        CREATE TRIGGER runs_follow_session_status AFTER UPDATE OF status ON sessions
            FOR EACH ROW EXECUTE FUNCTION flightlog_runs_follow_status();
        CREATE TABLE live_runs (
            run_id TEXT PRIMARY KEY,
            state TEXT NOT NULL,
            heartbeat_at_ms BIGINT NOT NULL,
            changed_at_ms BIGINT NOT NULL,
            tokens_used BIGINT,
            steps_taken BIGINT,
            pid BIGINT
        );
        CREATE TABLE index_leaves (
            idx BIGINT PRIMARY KEY,
            session_id TEXT NOT NULL,
            checkpoint_id BIGINT NOT NULL,
            leaf BYTEA NOT NULL,
            recorded_at_ms BIGINT NOT NULL
        );
        CREATE INDEX index_leaves_session ON index_leaves(session_id, idx);
        CREATE TRIGGER index_leaves_append_only BEFORE UPDATE OR DELETE ON index_leaves
            FOR EACH ROW EXECUTE FUNCTION flightlog_append_only('index leaves');
        CREATE TRIGGER index_leaves_no_truncate BEFORE TRUNCATE ON index_leaves
            FOR EACH STATEMENT EXECUTE FUNCTION flightlog_append_only('index leaves');
        CREATE TABLE index_checkpoints (
            checkpoint_id BIGSERIAL PRIMARY KEY,
            size BIGINT NOT NULL,
            root TEXT NOT NULL,
            body TEXT NOT NULL,
            frontier BYTEA,
            created_at_ms BIGINT NOT NULL
        );
        CREATE INDEX index_checkpoints_size ON index_checkpoints(size);
        CREATE TABLE cosignatures (
            origin TEXT NOT NULL,
            size BIGINT NOT NULL,
            witness TEXT NOT NULL,
            root TEXT NOT NULL,
            note TEXT NOT NULL,
            created_at_ms BIGINT NOT NULL,
            PRIMARY KEY (origin, size, witness)
        );
        CREATE TABLE salted_artifacts (
            digest TEXT PRIMARY KEY,
            media_type TEXT NOT NULL,
            size_bytes BIGINT NOT NULL,
            content BYTEA NOT NULL,
            salt BYTEA NOT NULL,
            created_at_ms BIGINT NOT NULL
        );
        CREATE TABLE artifact_refs (
            digest TEXT NOT NULL,
            session_id TEXT NOT NULL,
            PRIMARY KEY (digest, session_id)
        );
        CREATE TABLE artifact_erasures (
            digest TEXT PRIMARY KEY,
            erased_at_ms BIGINT NOT NULL,
            log_session_id TEXT NOT NULL,
            log_seq BIGINT NOT NULL
        );
        """,
    ),
    (
        "fleet leases (holder, epoch, expiry per session)",
        """
        CREATE TABLE leases (
            session_id TEXT PRIMARY KEY,
            holder TEXT,
            epoch BIGINT NOT NULL DEFAULT 0,
            expires_at_ms BIGINT NOT NULL DEFAULT 0,
            acquired_at_ms BIGINT NOT NULL DEFAULT 0,
            parked_seq BIGINT NOT NULL DEFAULT -2,
            queued_at_ms BIGINT NOT NULL
        );
        CREATE INDEX leases_expiry ON leases(expires_at_ms);
        """,
    ),
]
"""PostgreSQL: list index + 1 is the schema version. Never edit one that has shipped; append."""


SQLITE_RUNS_LIST: tuple[str, str] = (
    "runs list: started_at_ms (the session's creation, set once per row by a trigger) and its index",
    """
    ALTER TABLE runs ADD COLUMN started_at_ms INTEGER NOT NULL DEFAULT 0;
    UPDATE runs SET started_at_ms = COALESCE(
        (SELECT created_at_ms FROM sessions WHERE session_id = runs.run_id), updated_at_ms);
    CREATE INDEX runs_started ON runs(started_at_ms, run_id);
    CREATE TRIGGER runs_started_at AFTER INSERT ON runs
        BEGIN
            UPDATE runs SET started_at_ms = COALESCE(
                (SELECT created_at_ms FROM sessions WHERE session_id = NEW.run_id), NEW.updated_at_ms)
            WHERE run_id = NEW.run_id;
        END;
    """,
)
"""SQLite, after the signal queue's migration (issue 18/19, the paged runs list): a run's start never moves,
so its index costs nothing on the appends that move ``updated_at_ms`` (the compare-and-set never sets it)."""

POSTGRES_RUNS_LIST: tuple[str, str] = (
    "runs list: started_at_ms (the session's creation, set once per row by a trigger) and its index",
    """
    ALTER TABLE runs ADD COLUMN started_at_ms BIGINT NOT NULL DEFAULT 0;
    UPDATE runs SET started_at_ms = COALESCE(
        (SELECT created_at_ms FROM sessions WHERE session_id = runs.run_id), updated_at_ms);
    CREATE INDEX runs_started ON runs(started_at_ms, run_id);
    CREATE FUNCTION flightlog_runs_started_at() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.started_at_ms := COALESCE(
            (SELECT created_at_ms FROM sessions WHERE session_id = NEW.run_id), NEW.updated_at_ms);
        RETURN NEW;
    END $$;
    CREATE TRIGGER runs_started_at BEFORE INSERT ON runs
        FOR EACH ROW EXECUTE FUNCTION flightlog_runs_started_at();
    """,
)
"""PostgreSQL, after the signal queue's migration: as :data:`SQLITE_RUNS_LIST`."""

POSTGRES_RUNS_HOT: tuple[str, str] = (
    "runs: no index follows updated_at_ms, which every append moves (HOT updates of the run row)",
    """
    DROP INDEX IF EXISTS runs_state;
    CREATE INDEX runs_state ON runs(state);
    DROP INDEX IF EXISTS runs_outcome;
    DROP INDEX IF EXISTS runs_updated;
    """,
)
"""PostgreSQL, after the runs list's migration: SQLite's migration 5 (the same indexes, the same listings,
which sort). An append's compare-and-set of its run row then changes no indexed column, so PostgreSQL
updates the row in place (a heap-only tuple) instead of inserting a new entry into each of the table's
eight indexes: 536 of 1,790 WAL bytes per append, measured with ``pg_waldump`` (issue 19). The cost: a runs
list sorted by last event sorts the matching rows instead of walking an index (bench/README.md, `runs.py`; the figures: bench/HISTORY.md)."""

RUNS_FOLD_2: tuple[str, str] = (
    "runs fold rules 2: one approval ref per gated call, closed gates labelled (rebuild the projection)",
    """
    UPDATE runs_meta SET value = CASE WHEN EXISTS (SELECT 1 FROM events) THEN 0 ELSE 2 END
        WHERE key = 'fold_version';
    """,
)
"""Both backends, last: ``flightlog.runs.FOLD_VERSION`` went from 1 to 2. A database with events marks its
projection stale (0: ``flightlog runs --rebuild`` refolds it; until then the listings fold the ledgers), an
empty one is current at 2. The store sits below ``flightlog.runs``, so the number is written here, as the
first ``runs_meta`` row wrote 1."""

RUNS_FOLD_3: tuple[str, str] = (
    "runs fold rules 3: a session that holds no run is not listed (rebuild the projection)",
    """
    UPDATE runs_meta SET value = CASE WHEN EXISTS (SELECT 1 FROM events) THEN 0 ELSE 3 END
        WHERE key = 'fold_version';
    """,
)
"""Both backends, last: ``flightlog.runs.FOLD_VERSION`` went from 2 to 3 (a session whose ledger holds no
``run_started`` is stored as ``not_a_run``, no longer listed as ``initializing``; a ``suspended`` after an
``operation_cancelled`` ends ``stopping``, as when a resume re-opens an aborted run's wait or a LangGraph
thread's new input supersedes its gates and the graph interrupts again); as :data:`RUNS_FOLD_2`."""

RUNS_FOLD_4: tuple[str, str] = (
    "runs fold rules 4: an import's seal is not its run's last event (rebuild the projection)",
    """
    UPDATE runs_meta SET value = CASE WHEN EXISTS (SELECT 1 FROM events) THEN 0 ELSE 4 END
        WHERE key = 'fold_version';
    """,
)
"""Both backends, last: ``flightlog.runs.FOLD_VERSION`` went from 3 to 4 (an import's
``Custom("session_sealed")``, written at the import time, no longer moves the run's last event time, so
an old transcript imported today is not listed as last active today; the fold's header records
``from_import``); as :data:`RUNS_FOLD_2`."""

RUNS_FOLD_5: tuple[str, str] = (
    "runs fold text 5: members at their defaults left out (rebuild the projection)",
    """
    UPDATE runs_meta SET value = CASE WHEN EXISTS (SELECT 1 FROM events) THEN 0 ELSE 5 END
        WHERE key = 'fold_version';
    """,
)
"""Both backends, last: ``flightlog.runs.FOLD_VERSION`` went from 4 to 5. The fold rules are unchanged; the
stored fold text leaves out each member at its default (``SessionFold.to_json``), which an append encodes
at ~700 instructions a member (an idle session's fold: 30 members to 6; bench/HISTORY.md, appendproj).
A row of version 4 is not resumed from (its fold is refolded from the ledger on the session's next
append); as :data:`RUNS_FOLD_2`."""

RUNS_FOLD_6: tuple[str, str] = (
    "runs fold rules 6: a Codex import's token counts count toward its open run (rebuild the projection)",
    """
    UPDATE runs_meta SET value = CASE WHEN EXISTS (SELECT 1 FROM events) THEN 0 ELSE 6 END
        WHERE key = 'fold_version';
    """,
)
"""Both backends, last: ``flightlog.runs.FOLD_VERSION`` went from 5 to 6 (the open run's ``tokens_used``
counts a Codex CLI import's ``Custom("codex.event_msg.token_count")`` running total, so a rollout imported
without ``--seal`` lists the tokens it counted, not ``-``); as :data:`RUNS_FOLD_2`."""

RUNS_FOLD_7: tuple[str, str] = (
    "runs fold rules 7: a failed run keeps its rollback's reason (rebuild the projection)",
    """
    UPDATE runs_meta SET value = CASE WHEN EXISTS (SELECT 1 FROM events) THEN 0 ELSE 7 END
        WHERE key = 'fold_version';
    """,
)
"""Both backends, last: ``flightlog.runs.FOLD_VERSION`` went from 6 to 7 (the fold keeps the reason of the
open run's latest ``rollbacked``, ``SessionFold.failure``, and a run that then ends ``failed`` says it in its
terminal ``detail``: ``failed: provider_failure: <the provider's error>``, where it said ``failed``); as
:data:`RUNS_FOLD_2`."""

SQLITE_EVENTS_SUSPENDED: tuple[str, str] = (
    "events_suspended: a partial index of the events whose stored bytes hold the wait mark",
    """
    CREATE INDEX IF NOT EXISTS events_suspended ON events(session_id, seq)
        WHERE instr(CAST(event AS BLOB), X'226b696e64223a2273757370656e64656422') > 0;
    """,
)
"""SQLite, after :data:`RUNS_FOLD_7`: the ``events`` rows whose stored bytes (a TEXT row's as its UTF-8
bytes) hold ``flightlog.encoding.SUSPENDED_MARK`` (``"kind":"suspended"``, the hex literal here), kept by
SQLite itself on every insert, update and delete (no write path has code for it). The approvals queue's
pass (:meth:`flightlog.store.sql.SqlStore.marked_ends`) reads it instead of searching every stored event:
its statement repeats this ``WHERE`` word for word (:attr:`flightlog.store.sql.SqlStore.MARK_CONTAINS`),
which is how SQLite's planner proves a partial index usable (https://sqlite.org/partialindex.html, 3.2).
Building it reads every event once (bench/README.md, "One cold approvals-queue call")."""

POSTGRES_EVENTS_SUSPENDED: tuple[str, str] = (
    "events_suspended: a partial index of the events whose stored bytes hold the wait mark",
    """
    CREATE INDEX IF NOT EXISTS events_suspended ON events(session_id, seq)
        WHERE position('\\x226b696e64223a2273757370656e64656422'::bytea in event) > 0;
    """,
)
"""PostgreSQL, after :data:`RUNS_FOLD_7`: as :data:`SQLITE_EVENTS_SUSPENDED` (``position`` on ``bytea`` is
immutable, as an index predicate must be; the planner proves the index usable from the query's identical
clause: https://www.postgresql.org/docs/current/indexes-partial.html)."""

LIVE_RUNS_OWNER: tuple[str, str] = (
    "live_runs: the publisher's host (pid space) and owner token",
    """
    ALTER TABLE live_runs ADD COLUMN host TEXT;
    ALTER TABLE live_runs ADD COLUMN owner TEXT;
    """,
)
"""Both backends, last: a live record names where its ``pid`` means something (``host``,
:func:`flightlog.live.host_id`), so liveness is judged by a pid check on that host only and by the
heartbeat elsewhere, and which :class:`flightlog.live.LiveRegistry` wrote it (``owner``, a random token per
registry), so a registry clears its own record only (a fenced holder ending no longer deletes its
successor's). Rows written before it keep NULL in both: read as records of an unknown host (heartbeat only)
that no registry owns."""
