//! The ledger's schema: its migrations, applied in order, and the version the file records.

use super::LedgerError;
use rusqlite::{Connection, TransactionBehavior};
use std::path::Path;

/// The schema, one entry per `user_version` step: entry `i` takes the database from version
/// `i` to `i + 1`.
pub const MIGRATIONS: &[&str] = &[
    // 1: tools, versions, calls, events, generation.
    r#"
    CREATE TABLE tools (
        name            TEXT PRIMARY KEY,
        current_version INTEGER,
        removed_at      INTEGER,            -- unix ms; NULL while the tool is live
        created_at      INTEGER NOT NULL    -- unix ms of its first version
    ) STRICT;
    CREATE TABLE versions (
        name         TEXT NOT NULL REFERENCES tools(name),
        version      INTEGER NOT NULL,
        code_hash    TEXT NOT NULL,             -- sha256 of tool.py, lowercase hex
        description  TEXT NOT NULL DEFAULT '',
        required_env TEXT NOT NULL DEFAULT '[]', -- JSON array of key NAMES
        functions    TEXT NOT NULL DEFAULT '[]', -- JSON array of FunctionSpec
        state        TEXT NOT NULL DEFAULT 'active',
        created_at   INTEGER NOT NULL,
        PRIMARY KEY (name, version)
    ) STRICT;
    CREATE TABLE calls (
        id          INTEGER PRIMARY KEY,
        tool        TEXT NOT NULL,
        version     INTEGER NOT NULL,
        function    TEXT NOT NULL,
        started_at  INTEGER NOT NULL,
        duration_ms INTEGER NOT NULL,
        outcome     TEXT NOT NULL CHECK (outcome IN ('ok', 'tool_error', 'error')),
        error       TEXT
    ) STRICT;
    CREATE INDEX calls_by_tool ON calls (tool, id);
    CREATE TABLE events (
        id     INTEGER PRIMARY KEY,
        at     INTEGER NOT NULL,
        tool   TEXT,
        kind   TEXT NOT NULL,
        detail TEXT NOT NULL DEFAULT ''
    ) STRICT;
    CREATE INDEX events_by_tool ON events (tool, id);
    CREATE TABLE generation (
        id    INTEGER PRIMARY KEY CHECK (id = 1),
        value INTEGER NOT NULL
    ) STRICT;
    INSERT INTO generation (id, value) VALUES (1, 0);
    "#,
    // 2: consent. One row per approval of a key for a tool, with what the user was shown; the
    // newest question a tool could not put to its host, so `tools approve` can answer it.
    r#"
    CREATE TABLE approvals (
        tool       TEXT NOT NULL,
        key        TEXT NOT NULL,
        code_hash  TEXT NOT NULL,           -- the code approved (sha256 of tool.py)
        allowlist  TEXT,                    -- JSON array of canonical entries; NULL = no list
        declared   TEXT NOT NULL,           -- JSON array of every key the tool declared
        sandboxed  INTEGER NOT NULL,        -- 1 when tools ran confined
        via        TEXT NOT NULL,           -- elicitation, input_required, cli
        granted_at INTEGER NOT NULL,
        PRIMARY KEY (tool, key, code_hash)
    ) STRICT;
    CREATE TABLE pending_consent (
        tool      TEXT PRIMARY KEY,
        code_hash TEXT NOT NULL,
        declared  TEXT NOT NULL,            -- JSON array of key names
        asked_at  INTEGER NOT NULL
    ) STRICT;
    "#,
    // 3: verdicts. What verification found of each function of a version.
    r#"
    CREATE TABLE verdicts (
        id         INTEGER PRIMARY KEY,
        tool       TEXT NOT NULL,
        version    INTEGER NOT NULL,
        function   TEXT NOT NULL,
        check_name TEXT NOT NULL,          -- deterministic, non_degenerate, example
        example    INTEGER,                -- which entry of EXAMPLES, from 1
        outcome    TEXT NOT NULL,          -- passed, failed, recorded, skipped
        detail     TEXT NOT NULL DEFAULT ''
    ) STRICT;
    CREATE INDEX verdicts_by_version ON verdicts (tool, version);
    -- What a version met (smoke test with its answer, examples, verdicts), owed by later
    -- versions once it is promoted to active: then copied into obligations.
    CREATE TABLE met (
        tool       TEXT NOT NULL,
        version    INTEGER NOT NULL,
        function   TEXT NOT NULL,
        check_name TEXT NOT NULL,
        arguments  TEXT NOT NULL,          -- JSON object
        answer     TEXT,                   -- JSON, redacted; its shape when exact = 0
        exact      INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX met_by_version ON met (tool, version);
    -- The baseline: only grows (a dropped obligation keeps its row, dropped_at set).
    CREATE TABLE obligations (
        id            INTEGER PRIMARY KEY,
        tool          TEXT NOT NULL,
        function      TEXT NOT NULL,
        check_name    TEXT NOT NULL,
        arguments     TEXT NOT NULL,
        answer        TEXT,
        exact         INTEGER NOT NULL,
        since_version INTEGER NOT NULL,
        added_at      INTEGER NOT NULL,
        dropped_at    INTEGER,
        UNIQUE (tool, function, check_name, arguments)
    ) STRICT;
    "#,
    // 4: packages. A version's locked packages (JSON `PackageSet`; NULL: none declared); one row
    // per approval of a tool's package set, bound to the set's digest; the package set of the
    // question a tool could not ask.
    r#"
    ALTER TABLE versions ADD COLUMN packages TEXT;
    CREATE TABLE package_approvals (
        tool       TEXT NOT NULL,
        digest     TEXT NOT NULL,           -- sha256 of the lock's canonical text
        packages   TEXT NOT NULL,           -- what the user was shown: `name version, ...`
        source     TEXT NOT NULL,           -- where from, as the user was told
        via        TEXT NOT NULL,           -- elicitation, input_required, cli
        granted_at INTEGER NOT NULL,
        PRIMARY KEY (tool, digest)
    ) STRICT;
    ALTER TABLE pending_consent ADD COLUMN packages TEXT;
    "#,
    // 5: relations. What a relation obligation changes (JSON `Relation`: function, argument,
    // transform, value), kept beside its input; part of what makes an obligation one of a kind,
    // since one example's input may carry several relations. The baseline is rebuilt (SQLite
    // cannot change a table's UNIQUE constraint), ids kept.
    r#"
    ALTER TABLE met ADD COLUMN relation TEXT;
    CREATE TABLE obligations_5 (
        id            INTEGER PRIMARY KEY,
        tool          TEXT NOT NULL,
        function      TEXT NOT NULL,
        check_name    TEXT NOT NULL,
        arguments     TEXT NOT NULL,
        relation      TEXT NOT NULL DEFAULT '',  -- JSON Relation; '' for other checks
        answer        TEXT,
        exact         INTEGER NOT NULL,
        since_version INTEGER NOT NULL,
        added_at      INTEGER NOT NULL,
        dropped_at    INTEGER,
        UNIQUE (tool, function, check_name, arguments, relation)
    ) STRICT;
    INSERT INTO obligations_5
        (id, tool, function, check_name, arguments, answer, exact, since_version, added_at,
         dropped_at)
    SELECT id, tool, function, check_name, arguments, answer, exact, since_version, added_at,
           dropped_at
    FROM obligations;
    DROP TABLE obligations;
    ALTER TABLE obligations_5 RENAME TO obligations;
    "#,
    // 6: uses. The other tools' functions a version calls (`USES`, JSON array of mounted names).
    r#"
    ALTER TABLE versions ADD COLUMN uses TEXT NOT NULL DEFAULT '[]';
    "#,
    // 7: who. Each event's actor (`cli`, `host:<client name>`, `console`, `serve`, `follow`)
    // and the surface it came through (`cli`, `stdio`, `http`, `console`, `serve`); each
    // version's creator the same way (its provenance). Rows from before are `''`: unknown.
    r#"
    ALTER TABLE events ADD COLUMN actor TEXT NOT NULL DEFAULT '';
    ALTER TABLE events ADD COLUMN surface TEXT NOT NULL DEFAULT '';
    CREATE INDEX events_by_time ON events (at);
    ALTER TABLE versions ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
    ALTER TABLE versions ADD COLUMN created_via TEXT NOT NULL DEFAULT '';
    "#,
    // 8: the user's pin. A pinned tool's current version is replaced by nothing (a rewrite, a
    // pull, a followed library) until it is unpinned: when (unix ms) and by whom (the actor's
    // word: `cli`, `console`, `host:<client name>`). NULL: not pinned.
    r#"
    ALTER TABLE tools ADD COLUMN pinned_at INTEGER;
    ALTER TABLE tools ADD COLUMN pinned_by TEXT;
    "#,
    // 9: declared reach. What a version declares it reaches besides its keys' hosts (JSON
    // `DeclaredReach`: `REQUIRED_HOSTS`, `READ_DIRS`, `WRITE_DIRS`); NULL for versions kept from
    // before, which reach any public host until narrowed. The user's grants per tool × item
    // (kind `host`, `read`, `write`), which outlive rewrites; the hosts the user allows every
    // tool that declares them (`autotool hosts allow`); and the question a host could not ask.
    r#"
    ALTER TABLE versions ADD COLUMN reach TEXT;
    CREATE TABLE reach_grants (
        tool       TEXT NOT NULL,
        kind       TEXT NOT NULL,
        entry      TEXT NOT NULL,
        via        TEXT NOT NULL,
        granted_at INTEGER NOT NULL,
        PRIMARY KEY (tool, kind, entry)
    ) STRICT;
    CREATE TABLE allowed_hosts (
        entry    TEXT PRIMARY KEY,
        via      TEXT NOT NULL,
        added_at INTEGER NOT NULL
    ) STRICT;
    ALTER TABLE pending_consent ADD COLUMN reach TEXT;
    "#,
    // 10: widened deny rules. The directories the user widened the deny rules of READ_DIRS and
    // WRITE_DIRS for (`autotool dirs widen`), canonical: a directory at or below one is not
    // refused by a rule that can be widened (policy `dirs::refusal`).
    r#"
    CREATE TABLE widened_dirs (
        path     TEXT PRIMARY KEY,
        via      TEXT NOT NULL,
        added_at INTEGER NOT NULL
    ) STRICT;
    "#,
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Create the schema or bring it up to [`SCHEMA_VERSION`], under the write lock so that
/// processes opening a new home at once agree.
pub(super) fn migrate(conn: &mut Connection, path: &Path) -> Result<(), LedgerError> {
    let read_version =
        |c: &Connection| c.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0));
    let found = read_version(conn)?;
    if found == SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found = read_version(&tx)?;
    if found > SCHEMA_VERSION {
        return Err(LedgerError::NewerSchema {
            path: path.to_path_buf(),
            found,
            known: SCHEMA_VERSION,
        });
    }
    for sql in MIGRATIONS.iter().skip(usize::try_from(found).unwrap_or(0)) {
        tx.execute_batch(sql)?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()?;
    Ok(())
}
