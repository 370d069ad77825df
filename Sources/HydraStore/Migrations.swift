import HydraCore

/// The schema, as an ordered list of migrations. A database records the
/// versions it applied in `migrations`; opening applies the missing ones in
/// one transaction.
///
/// Never edit (nor reorder, nor remove) a migration that has shipped: a
/// database that already applied it would never see the change. Add a new
/// one at the end instead.
enum Migrations {
    static let all: [String] = [
        // 1: jobs, steps, events, shared data, response cache.
        """
        CREATE TABLE jobs (
            job_id TEXT PRIMARY KEY,
            spec TEXT NOT NULL,
            input TEXT NOT NULL,
            canonical TEXT NOT NULL,
            priority INTEGER NOT NULL DEFAULT 0,
            idempotency_key TEXT UNIQUE,
            state TEXT NOT NULL,
            created_at REAL NOT NULL,
            started_at REAL,
            finished_at REAL,
            result TEXT
        );
        CREATE INDEX jobs_by_created ON jobs (created_at DESC, job_id DESC);
        CREATE INDEX jobs_by_state ON jobs (state, created_at DESC, job_id DESC);
        CREATE TABLE steps (
            job_id TEXT NOT NULL,
            step_path TEXT NOT NULL,
            state TEXT NOT NULL,
            result TEXT,
            error TEXT,
            PRIMARY KEY (job_id, step_path)
        );
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            job_id TEXT NOT NULL,
            root_job_id TEXT NOT NULL,
            step_path TEXT NOT NULL,
            time REAL NOT NULL,
            fields TEXT NOT NULL
        );
        CREATE INDEX events_by_time ON events (time);
        CREATE TABLE shared (
            key TEXT PRIMARY KEY,
            cipher TEXT NOT NULL,
            value BLOB NOT NULL
        );
        CREATE TABLE cache (
            key TEXT PRIMARY KEY,
            api TEXT,
            value TEXT NOT NULL,
            stored_at REAL NOT NULL,
            ttl REAL NOT NULL
        );
        CREATE INDEX cache_by_api ON cache (api);
        """,
        // 2: prune finds finished jobs without scanning the table.
        """
        CREATE INDEX jobs_by_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
        """,
        // 3: fewer index entries per job, for the one writer thread. The
        // idempotency key's index holds only the jobs that have a key (a
        // column UNIQUE constraint indexed every NULL too, and only a table
        // rebuild removes it). Events lose their time index: prune deletes
        // the oldest events by seq, in order (see `WriteOperation.prune`).
        """
        CREATE TABLE jobs_v3 (
            job_id TEXT PRIMARY KEY,
            spec TEXT NOT NULL,
            input TEXT NOT NULL,
            canonical TEXT NOT NULL,
            priority INTEGER NOT NULL DEFAULT 0,
            idempotency_key TEXT,
            state TEXT NOT NULL,
            created_at REAL NOT NULL,
            started_at REAL,
            finished_at REAL,
            result TEXT
        );
        INSERT INTO jobs_v3 (job_id, spec, input, canonical, priority, idempotency_key, state, created_at,
                             started_at, finished_at, result)
            SELECT job_id, spec, input, canonical, priority, idempotency_key, state, created_at,
                   started_at, finished_at, result FROM jobs;
        DROP TABLE jobs;
        ALTER TABLE jobs_v3 RENAME TO jobs;
        CREATE UNIQUE INDEX jobs_by_idempotency_key ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
        CREATE INDEX jobs_by_created ON jobs (created_at DESC, job_id DESC);
        CREATE INDEX jobs_by_state ON jobs (state, created_at DESC, job_id DESC);
        CREATE INDEX jobs_by_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
        DROP INDEX events_by_time;
        """,
        // 4: the resource repository's index (resources.md; ``ResourceIndexStore``).
        """
        CREATE TABLE resources (
            key TEXT PRIMARY KEY,
            url TEXT NOT NULL,
            bytes INTEGER NOT NULL,
            disk_bytes INTEGER NOT NULL,
            content_type TEXT,
            sha256 TEXT NOT NULL,
            etag TEXT,
            last_modified TEXT,
            stored_at REAL NOT NULL,
            last_used_at REAL NOT NULL,
            cipher TEXT NOT NULL
        );
        CREATE INDEX resources_by_stored ON resources (stored_at DESC, key DESC);
        CREATE INDEX resources_by_use ON resources (last_used_at, key);
        """,
        // 5: the auth sessions' sealed tokens (rest.md §1; ``AuthTokenStore``).
        """
        CREATE TABLE auth_tokens (
            name TEXT PRIMARY KEY,
            sealed BLOB NOT NULL,
            updated_at REAL NOT NULL
        );
        """,
        // 6: cached responses kept past their lifetime, for revalidation and stale-if-error (rest.md §3).
        "ALTER TABLE cache ADD COLUMN keep REAL NOT NULL DEFAULT 0",
        // 7: two index entries fewer per finished job, for the one writer
        // thread: a finish no longer adds a `succeeded` entry to the state
        // index (most jobs succeed: listing them walks `jobs_by_created`) nor
        // one to `jobs_by_finished` (prune walks `jobs_by_created`: a job
        // finishes after it was created). Each entry was a page more in most
        // commits' WAL writes: the writer's CPU per durable submit fell by a fifth.
        """
        DROP INDEX jobs_by_finished;
        DROP INDEX jobs_by_state;
        CREATE INDEX jobs_unsucceeded ON jobs (state, created_at DESC, job_id DESC) WHERE state <> 'succeeded';
        """,
        // 8: the status a resource's content came with (a job serves only a copy whose status it expects).
        "ALTER TABLE resources ADD COLUMN status INTEGER NOT NULL DEFAULT 200",
        // 9: values the store makes once and keeps: the secret keying the
        // credential digest in cache keys (responses cached before it are
        // found no more under credentials; they expire as usual).
        """
        CREATE TABLE settings (name TEXT PRIMARY KEY, value BLOB NOT NULL);
        INSERT INTO settings (name, value) VALUES ('cacheKeySecret', randomblob(32));
        """,
        // 10: the identity of a resource's file when it was put in place (``ResourceRecord/fileID``).
        "ALTER TABLE resources ADD COLUMN file_id INTEGER",
        // 11: the time indexes in ascending order. New rows are the newest:
        // in a descending index each one went in at the left end, where SQLite
        // rebalances the leaf with its siblings and rewrites the path to it
        // (3 pages in each commit's WAL for `jobs_by_created` alone, its leaves
        // left half empty); at the right end a full leaf just starts a new one.
        // Newest-first listings read the same index backwards.
        """
        DROP INDEX jobs_by_created;
        CREATE INDEX jobs_by_created ON jobs (created_at, job_id);
        DROP INDEX jobs_unsucceeded;
        CREATE INDEX jobs_unsucceeded ON jobs (state, created_at, job_id) WHERE state <> 'succeeded';
        DROP INDEX resources_by_stored;
        CREATE INDEX resources_by_stored ON resources (stored_at, key);
        """,
        // 12: the named jobs a job loaded at submit (``StoredJob/namedJobs``),
        // so that a restart resumes the graph that was accepted.
        "ALTER TABLE jobs ADD COLUMN named_jobs TEXT",
        // 13: events kept as one row per write transaction (``EventBatch``):
        // a row per event was about a fifth of the writer thread's time. Each
        // stored event becomes a row of its own here (fields that are not a
        // JSON object, never written by Hydra, become `{}` rather than stop the start).
        """
        CREATE TABLE event_batches (
            last_seq INTEGER PRIMARY KEY,
            first_seq INTEGER NOT NULL,
            time REAL NOT NULL,
            events TEXT NOT NULL
        );
        INSERT INTO event_batches (last_seq, first_seq, time, events)
            SELECT seq, seq, time,
                   json_array(seq, name, job_id, root_job_id, step_path, CAST(round(time * 1000000) AS INTEGER),
                              CASE WHEN json_valid(fields) AND json_type(fields) = 'object' THEN json(fields) ELSE json_object() END) || char(10)
            FROM events ORDER BY seq;
        DROP TABLE events;
        """,
    ]

    /// Applies the migrations `connection` has not seen yet, all in one
    /// transaction (on the write connection, before the writer thread starts).
    /// A database migrated by a newer Hydra (a version this build does not
    /// know) is refused rather than used with a schema it cannot describe.
    static func apply(to connection: SQLiteConnection) throws(StoreError) {
        // `applied_at` is a Julian day (UTC), as SQLite's julianday('now').
        try connection.execute("CREATE TABLE IF NOT EXISTS migrations (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)")
        if try version(of: connection) == all.count { return }
        try connection.run("BEGIN IMMEDIATE")
        do throws(StoreError) {
            // Read again under the write lock: another process may have migrated meanwhile.
            let applied = try version(of: connection)
            guard applied <= all.count else {
                throw StoreError("\(connection.path): the schema is at version \(applied), written by a newer Hydra; this build knows versions up to \(all.count)")
            }
            for version in (applied + 1)..<(all.count + 1) {
                try connection.execute(all[version - 1])
                try connection.run("INSERT INTO migrations (version, applied_at) VALUES (?, julianday('now'))",
                                   [.int(version)])
            }
            try connection.run("COMMIT")
        } catch {
            if !connection.isAutocommit { try? connection.run("ROLLBACK") }
            throw error
        }
    }

    /// The highest migration applied (0 for a new database).
    static func version(of connection: SQLiteConnection) throws(StoreError) -> Int {
        var applied = 0
        try connection.query("SELECT COALESCE(MAX(version), 0) FROM migrations") { row in applied = row.int(0) }
        return applied
    }
}
