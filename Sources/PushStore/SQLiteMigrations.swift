import GRDB

/// The schema, as versioned migrations. A migration is frozen once it has shipped: change the
/// schema by adding one, never by editing one.
enum SQLiteMigrations {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1 subscriptions, changes, outbox, service keys") { db in
            try db.execute(sql: v1)
        }
        migrator.registerMigration("v2 handles never reused, change log prune watermark") { db in
            try db.execute(sql: v2)
        }
        migrator.registerMigration("v3 ingest: checkpoints, tree journal and snapshots, notifications") { db in
            try db.execute(sql: v3)
        }
        migrator.registerMigration("v4 read rules: the claims a subscription was allowed with") { db in
            try db.execute(sql: v4)
        }
        migrator.registerMigration("v5 tallies: subscriptions by kind and notifications, kept by triggers") { db in
            try db.execute(sql: v5)
        }
        migrator.registerMigration("v6 kinds apns and webpush") { db in
            try v6(db)
        }
        migrator.registerMigration("v7 enumerations checked without IN lists") { db in
            try v7(db)
        }
        migrator.registerMigration("v8 delivery history: attempts, skips, discarded notifications") { db in
            try db.execute(sql: v8)
        }
        migrator.registerMigration("v9 coalesced records kept on their notification, moved to the history with it") { db in
            try db.execute(sql: v9)
        }
        migrator.registerMigration("v10 kind harmonyos") { db in
            try v10(db)
        }
        migrator.registerMigration("v11 each subscription's oldest notification marked: claims read those alone") { db in
            try db.execute(sql: v11)
        }
        migrator.registerMigration("v12 the history's attempts indexed by subscription within eras of 2,048 ids") { db in
            try db.execute(sql: v12)
        }
        return migrator
    }

    /// Version 1. Invariants live in the schema: STRICT tables, enumerations by CHECK, the
    /// 6-tuple UNIQUE (absent destination and context stored as '' so that UNIQUE applies),
    /// kind / destination / context consistency, and identity columns that never change.
    static let v1 = """
        CREATE TABLE subscription (
            handle      INTEGER PRIMARY KEY,
            id          TEXT    NOT NULL UNIQUE,
            app         TEXT    NOT NULL CHECK (length(CAST(app AS BLOB)) BETWEEN 1 AND 128),
            uid         TEXT    NOT NULL CHECK (uid <> ''),
            kind        TEXT    NOT NULL CHECK (kind IN ('mobile', 'huawei', 'webhook')),
            destination TEXT    NOT NULL,
            path        TEXT    NOT NULL CHECK (substr(path, 1, 1) = '/'
                                                AND length(CAST(path AS BLOB)) <= 2048),
            context     TEXT    NOT NULL,
            mode        TEXT    NOT NULL CHECK (mode IN ('value', 'noData', 'childEvent')),
            format      TEXT    NOT NULL CHECK (format IN ('v1', 'v2')),
            encryption  TEXT    CHECK (encryption IS NULL OR json_valid(encryption)),
            created_at  INTEGER NOT NULL,
            expires_at  INTEGER NOT NULL CHECK (expires_at > 0),
            UNIQUE (app, uid, kind, destination, path, context),
            CHECK ((kind = 'webhook') = (destination <> '')),
            CHECK (kind = 'webhook' OR context <> '')
        ) STRICT;

        CREATE INDEX subscription_by_owner ON subscription (app, uid);
        CREATE INDEX subscription_by_expiry ON subscription (expires_at);

        CREATE TRIGGER subscription_identity_is_immutable
        BEFORE UPDATE OF id, app, uid, kind, destination, path, context ON subscription
        BEGIN
            SELECT RAISE(ABORT, 'a subscription''s identity (its 6-tuple and id) never changes');
        END;

        -- Every committed change, in order: in-memory indexes (this process's, an operator
        -- command's, another instance's) follow it.
        CREATE TABLE subscription_change (
            sequence  INTEGER PRIMARY KEY AUTOINCREMENT,
            operation TEXT    NOT NULL CHECK (operation IN ('insert', 'update', 'delete')),
            handle    INTEGER NOT NULL,
            app       TEXT    NOT NULL,
            path      TEXT    NOT NULL,
            mode      TEXT    NOT NULL
        ) STRICT;

        CREATE TRIGGER subscription_inserted AFTER INSERT ON subscription
        BEGIN
            INSERT INTO subscription_change (operation, handle, app, path, mode)
            VALUES ('insert', NEW.handle, NEW.app, NEW.path, NEW.mode);
        END;

        CREATE TRIGGER subscription_mode_updated AFTER UPDATE OF mode ON subscription
        WHEN OLD.mode <> NEW.mode
        BEGIN
            INSERT INTO subscription_change (operation, handle, app, path, mode)
            VALUES ('update', NEW.handle, NEW.app, NEW.path, NEW.mode);
        END;

        CREATE TRIGGER subscription_deleted AFTER DELETE ON subscription
        BEGIN
            INSERT INTO subscription_change (operation, handle, app, path, mode)
            VALUES ('delete', OLD.handle, OLD.app, OLD.path, OLD.mode);
        END;

        -- Notifications waiting for delivery whose subscription row is gone: revocations.
        CREATE TABLE outbox (
            sequence     INTEGER PRIMARY KEY AUTOINCREMENT,
            kind         TEXT    NOT NULL CHECK (kind IN ('revoke')),
            reason       TEXT    NOT NULL CHECK (reason IN ('permission_denied', 'namespace_does_not_exist',
                                                 'disabled', 'expired', 'too_big', 'delivery_rejected')),
            subscription TEXT    NOT NULL CHECK (json_valid(subscription)),
            created_at   INTEGER NOT NULL
        ) STRICT;

        -- The service's own signing keys (private JWKs), oldest first.
        CREATE TABLE service_key (
            kid        TEXT    PRIMARY KEY,
            jwk        TEXT    NOT NULL CHECK (json_valid(jwk)),
            created_at INTEGER NOT NULL
        ) STRICT;
        """

    /// Version 2.
    ///
    /// - `subscription.handle` becomes `AUTOINCREMENT`: SQLite otherwise reuses the largest
    ///   deleted row id, and anything that names a subscription by handle (the index, the change
    ///   log, notifications waiting for delivery) could reach another device. SQLite cannot add
    ///   `AUTOINCREMENT` to a table, so the table is rebuilt; the sequence starts above every
    ///   handle ever used (rows and the change log).
    /// - `change_log_state.pruned_through`: how far the change log was pruned, so that a reader
    ///   behind it learns it missed changes instead of skipping them.
    static let v2 = """
        CREATE TABLE subscription_new (
            handle      INTEGER PRIMARY KEY AUTOINCREMENT,
            id          TEXT    NOT NULL UNIQUE,
            app         TEXT    NOT NULL CHECK (length(CAST(app AS BLOB)) BETWEEN 1 AND 128),
            uid         TEXT    NOT NULL CHECK (uid <> ''),
            kind        TEXT    NOT NULL CHECK (kind IN ('mobile', 'huawei', 'webhook')),
            destination TEXT    NOT NULL,
            path        TEXT    NOT NULL CHECK (substr(path, 1, 1) = '/'
                                                AND length(CAST(path AS BLOB)) <= 2048),
            context     TEXT    NOT NULL,
            mode        TEXT    NOT NULL CHECK (mode IN ('value', 'noData', 'childEvent')),
            format      TEXT    NOT NULL CHECK (format IN ('v1', 'v2')),
            encryption  TEXT    CHECK (encryption IS NULL OR json_valid(encryption)),
            created_at  INTEGER NOT NULL,
            expires_at  INTEGER NOT NULL CHECK (expires_at > 0),
            UNIQUE (app, uid, kind, destination, path, context),
            CHECK ((kind = 'webhook') = (destination <> '')),
            CHECK (kind = 'webhook' OR context <> '')
        ) STRICT;

        INSERT INTO subscription_new (handle, id, app, uid, kind, destination, path, context, mode, format, encryption,
                                      created_at, expires_at)
        SELECT handle, id, app, uid, kind, destination, path, context, mode, format, encryption, created_at, expires_at
        FROM subscription;

        DROP TABLE subscription;
        ALTER TABLE subscription_new RENAME TO subscription;

        DELETE FROM sqlite_sequence WHERE name IN ('subscription', 'subscription_new');
        INSERT INTO sqlite_sequence (name, seq)
        SELECT 'subscription', max(coalesce((SELECT max(handle) FROM subscription), 0),
                                   coalesce((SELECT max(handle) FROM subscription_change), 0));

        CREATE INDEX subscription_by_owner ON subscription (app, uid);
        CREATE INDEX subscription_by_expiry ON subscription (expires_at);

        CREATE TRIGGER subscription_identity_is_immutable
        BEFORE UPDATE OF id, app, uid, kind, destination, path, context ON subscription
        BEGIN
            SELECT RAISE(ABORT, 'a subscription''s identity (its 6-tuple and id) never changes');
        END;

        CREATE TRIGGER subscription_inserted AFTER INSERT ON subscription
        BEGIN
            INSERT INTO subscription_change (operation, handle, app, path, mode)
            VALUES ('insert', NEW.handle, NEW.app, NEW.path, NEW.mode);
        END;

        CREATE TRIGGER subscription_mode_updated AFTER UPDATE OF mode ON subscription
        WHEN OLD.mode <> NEW.mode
        BEGIN
            INSERT INTO subscription_change (operation, handle, app, path, mode)
            VALUES ('update', NEW.handle, NEW.app, NEW.path, NEW.mode);
        END;

        CREATE TRIGGER subscription_deleted AFTER DELETE ON subscription
        BEGIN
            INSERT INTO subscription_change (operation, handle, app, path, mode)
            VALUES ('delete', OLD.handle, OLD.app, OLD.path, OLD.mode);
        END;

        CREATE TABLE change_log_state (
            id             INTEGER PRIMARY KEY CHECK (id = 1),
            pruned_through INTEGER NOT NULL CHECK (pruned_through >= 0)
        ) STRICT;
        INSERT INTO change_log_state (id, pruned_through) VALUES (1, 0);
        """

    /// Version 3: ingestion.
    ///
    /// - `source_checkpoint`: where each source's reading stands (watermark, offset, file).
    /// - `tree_journal`: the accepted records that changed each application's tree since its
    ///   snapshot (one row per application per commit, NDJSON lines); `tree_snapshot` holds
    ///   snapshots in chunks, `tree_head` the complete one in use and the journal it covers.
    /// - `notification`: the outbox. Each row carries what a sender needs; `claimed_until` marks
    ///   one in flight (waiting rows only are coalesced).
    /// - Changes of `format` and `encryption` are logged too (caches of subscriptions follow).
    static let v3 = """
        CREATE TABLE source_checkpoint (
            source        TEXT    PRIMARY KEY CHECK (source <> ''),
            last_seq      INTEGER,
            position      INTEGER NOT NULL CHECK (position >= 0),
            file_identity TEXT
        ) STRICT;

        CREATE TABLE tree_journal (
            id      INTEGER PRIMARY KEY AUTOINCREMENT,
            app     TEXT    NOT NULL CHECK (length(CAST(app AS BLOB)) BETWEEN 1 AND 128),
            records BLOB    NOT NULL
        ) STRICT;
        CREATE INDEX tree_journal_by_app ON tree_journal (app, id);

        CREATE TABLE tree_snapshot (
            app        TEXT    NOT NULL,
            generation INTEGER NOT NULL CHECK (generation > 0),
            chunk      INTEGER NOT NULL CHECK (chunk >= 0),
            bytes      BLOB    NOT NULL,
            PRIMARY KEY (app, generation, chunk)
        ) STRICT;

        CREATE TABLE tree_head (
            app             TEXT    PRIMARY KEY,
            generation      INTEGER NOT NULL CHECK (generation > 0),
            chunks          INTEGER NOT NULL CHECK (chunks >= 0),
            through_journal INTEGER NOT NULL CHECK (through_journal >= 0)
        ) STRICT;

        CREATE TABLE notification (
            id                  INTEGER PRIMARY KEY AUTOINCREMENT,
            app                 TEXT    NOT NULL,
            subscription_handle INTEGER NOT NULL,
            subscription_id     TEXT    NOT NULL,
            kind                TEXT    NOT NULL CHECK (kind IN ('mobile', 'huawei', 'webhook')),
            target              TEXT,
            destination         TEXT,
            event               TEXT    NOT NULL CHECK (event IN ('value', 'noData', 'childEvent', 'revoke')),
            coalescable         INTEGER NOT NULL CHECK (coalescable = (event IN ('value', 'noData'))),
            payload             BLOB    NOT NULL,
            record_seq          INTEGER,
            created_at          INTEGER NOT NULL,
            next_attempt_at     INTEGER NOT NULL,
            first_attempt_at    INTEGER,
            attempts            INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
            claimed_until       INTEGER,
            claimed_by          TEXT,
            CHECK ((kind = 'webhook') = (destination IS NOT NULL)),
            CHECK (kind = 'webhook' OR target IS NOT NULL)
        ) STRICT;
        CREATE INDEX notification_by_subscription ON notification (subscription_handle, id);
        CREATE INDEX notification_due ON notification (next_attempt_at, id);

        DROP TRIGGER subscription_mode_updated;
        CREATE TRIGGER subscription_updated AFTER UPDATE OF mode, format, encryption ON subscription
        WHEN OLD.mode IS NOT NEW.mode OR OLD.format IS NOT NEW.format OR OLD.encryption IS NOT NEW.encryption
        BEGIN
            INSERT INTO subscription_change (operation, handle, app, path, mode)
            VALUES ('update', NEW.handle, NEW.app, NEW.path, NEW.mode);
        END;
        """
}

extension SQLiteMigrations {
    /// Version 4 (read rules, SPEC §12): the verified claims a subscription was created or
    /// refreshed with (compact JSON, bounded), and a changed claim logs a change, so that the
    /// index evaluates the rules again with it.
    static let v4 = """
        ALTER TABLE subscription ADD COLUMN auth TEXT
            CHECK (auth IS NULL OR (json_valid(auth) AND length(CAST(auth AS BLOB)) <= 4096));

        DROP TRIGGER subscription_updated;
        CREATE TRIGGER subscription_updated AFTER UPDATE OF mode, format, encryption, auth ON subscription
        WHEN OLD.mode IS NOT NEW.mode OR OLD.format IS NOT NEW.format OR OLD.encryption IS NOT NEW.encryption
             OR OLD.auth IS NOT NEW.auth
        BEGIN
            INSERT INTO subscription_change (operation, handle, app, path, mode)
            VALUES ('update', NEW.handle, NEW.app, NEW.path, NEW.mode);
        END;
        """
}

extension SQLiteMigrations {
    /// Version 5: counts kept as rows change, so that `/metrics` and `/status` read a few rows
    /// instead of counting whole tables on every scrape. (A subscription's kind never changes:
    /// it is part of its identity.)
    static let v5 = """
        CREATE TABLE tally (
            name  TEXT    PRIMARY KEY,
            value INTEGER NOT NULL
        ) STRICT, WITHOUT ROWID;
        INSERT INTO tally (name, value)
        SELECT 'subscription:' || kind, (SELECT count(*) FROM subscription WHERE subscription.kind = kinds.kind)
        FROM (SELECT 'mobile' AS kind UNION ALL SELECT 'huawei' UNION ALL SELECT 'webhook') AS kinds;
        INSERT INTO tally (name, value) VALUES ('notification', (SELECT count(*) FROM notification));

        CREATE TRIGGER subscription_tally_insert AFTER INSERT ON subscription
        BEGIN
            UPDATE tally SET value = value + 1 WHERE name = 'subscription:' || NEW.kind;
        END;
        CREATE TRIGGER subscription_tally_delete AFTER DELETE ON subscription
        BEGIN
            UPDATE tally SET value = value - 1 WHERE name = 'subscription:' || OLD.kind;
        END;
        CREATE TRIGGER notification_tally_insert AFTER INSERT ON notification
        BEGIN
            UPDATE tally SET value = value + 1 WHERE name = 'notification';
        END;
        CREATE TRIGGER notification_tally_delete AFTER DELETE ON notification
        BEGIN
            UPDATE tally SET value = value - 1 WHERE name = 'notification';
        END;
        """
}

extension SQLiteStore {
    /// The schema version applied (the number of migrations).
    public func schemaVersion() async throws -> Int {
        try await read { db in try SQLiteMigrations.migrator.appliedIdentifiers(db).count }
    }
}

extension SQLiteMigrations {
    /// Version 6 (issue 24): the kinds `apns` and `webpush`. SQLite cannot change a CHECK
    /// constraint in place, so `subscription` and `notification` are rebuilt as its
    /// documented procedure says (lang_altertable.html, "other kinds of table schema
    /// changes"): a new table with the new constraint, the rows copied, the old table dropped,
    /// the new one renamed, and its indexes and triggers created again from their stored SQL
    /// (read before the drop, so they are exactly what the earlier versions made). The
    /// AUTOINCREMENT counter is carried over, so that handles and notification ids are still
    /// never reused. One transaction, as every migration.
    static func v6(_ db: Database) throws {
        let tables: [(name: String, definition: String, columns: String)] = [
            ("subscription", v6Subscription, "handle, id, app, uid, kind, destination, path, context, mode, format, encryption, created_at, expires_at, auth"),
            ("notification", v6Notification,
             "id, app, subscription_handle, subscription_id, kind, target, destination, event, coalescable, payload, record_seq, created_at, next_attempt_at, first_attempt_at, attempts, claimed_until, claimed_by"),
        ]
        try rebuild(db, tables, suffix: "_v6")
        try db.execute(sql: "INSERT INTO tally (name, value) VALUES ('subscription:apns', 0), ('subscription:webpush', 0)")
    }

    /// Rebuilds each table from `definition` (a `CREATE TABLE <name><suffix>`), as SQLite's
    /// documented procedure says: the rows copied, the old table dropped, the new one renamed,
    /// its indexes and triggers created again from their stored SQL, its AUTOINCREMENT counter
    /// carried over.
    static func rebuild(_ db: Database, _ tables: [(name: String, definition: String, columns: String)], suffix: String) throws {
        for table in tables {
            let dependents = try String.fetchAll(
                db, sql: "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND type IN ('index', 'trigger') AND sql IS NOT NULL ORDER BY rowid",
                arguments: [table.name])
            let counter = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = ?", arguments: [table.name])
            try db.execute(sql: table.definition)
            try db.execute(sql: "INSERT INTO \(table.name)\(suffix) (\(table.columns)) SELECT \(table.columns) FROM \(table.name)")
            try db.execute(sql: "DROP TABLE \(table.name)")
            try db.execute(sql: "ALTER TABLE \(table.name)\(suffix) RENAME TO \(table.name)")
            for statement in dependents { try db.execute(sql: statement) }
            if let counter {
                try db.execute(sql: "DELETE FROM sqlite_sequence WHERE name = ?", arguments: [table.name])
                try db.execute(sql: "INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", arguments: [table.name, counter])
            }
        }
    }

    /// Version 7: the same constraints, enumerations written as `=` … `OR` rather than `IN
    /// (…)`. SQLite evaluates an `IN` list of three or more constants in a CHECK by building a
    /// temporary B-tree of the list at every row written: two per notification stored and
    /// one per notification coalesced (~1.3 µs each time, a twentieth of a record's cost under
    /// a backlog), three per subscription created. Rebuilt as version 6 was.
    static func v7(_ db: Database) throws {
        try rebuild(
            db,
            [
                ("subscription", v7Subscription, "handle, id, app, uid, kind, destination, path, context, mode, format, encryption, created_at, expires_at, auth"),
                ("notification", v7Notification,
                 "id, app, subscription_handle, subscription_id, kind, target, destination, event, coalescable, payload, record_seq, created_at, next_attempt_at, first_attempt_at, attempts, claimed_until, claimed_by"),
            ], suffix: "_v7")
    }

    static let v6Subscription = """
        CREATE TABLE subscription_v6 (
            handle      INTEGER PRIMARY KEY AUTOINCREMENT,
            id          TEXT    NOT NULL UNIQUE,
            app         TEXT    NOT NULL CHECK (length(CAST(app AS BLOB)) BETWEEN 1 AND 128),
            uid         TEXT    NOT NULL CHECK (uid <> ''),
            kind        TEXT    NOT NULL CHECK (kind IN ('mobile', 'huawei', 'webhook', 'apns', 'webpush')),
            destination TEXT    NOT NULL,
            path        TEXT    NOT NULL CHECK (substr(path, 1, 1) = '/'
                                                AND length(CAST(path AS BLOB)) <= 2048),
            context     TEXT    NOT NULL,
            mode        TEXT    NOT NULL CHECK (mode IN ('value', 'noData', 'childEvent')),
            format      TEXT    NOT NULL CHECK (format IN ('v1', 'v2')),
            encryption  TEXT    CHECK (encryption IS NULL OR json_valid(encryption)),
            created_at  INTEGER NOT NULL,
            expires_at  INTEGER NOT NULL CHECK (expires_at > 0),
            auth        TEXT    CHECK (auth IS NULL OR (json_valid(auth) AND length(CAST(auth AS BLOB)) <= 4096)),
            UNIQUE (app, uid, kind, destination, path, context),
            CHECK ((kind = 'webhook') = (destination <> '')),
            CHECK (kind = 'webhook' OR context <> '')
        ) STRICT
        """

    static let v6Notification = """
        CREATE TABLE notification_v6 (
            id                  INTEGER PRIMARY KEY AUTOINCREMENT,
            app                 TEXT    NOT NULL,
            subscription_handle INTEGER NOT NULL,
            subscription_id     TEXT    NOT NULL,
            kind                TEXT    NOT NULL CHECK (kind IN ('mobile', 'huawei', 'webhook', 'apns', 'webpush')),
            target              TEXT,
            destination         TEXT,
            event               TEXT    NOT NULL CHECK (event IN ('value', 'noData', 'childEvent', 'revoke')),
            coalescable         INTEGER NOT NULL CHECK (coalescable = (event IN ('value', 'noData'))),
            payload             BLOB    NOT NULL,
            record_seq          INTEGER,
            created_at          INTEGER NOT NULL,
            next_attempt_at     INTEGER NOT NULL,
            first_attempt_at    INTEGER,
            attempts            INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
            claimed_until       INTEGER,
            claimed_by          TEXT,
            CHECK ((kind = 'webhook') = (destination IS NOT NULL)),
            CHECK (kind = 'webhook' OR target IS NOT NULL)
        ) STRICT
        """

    static let v7Subscription = """
        CREATE TABLE subscription_v7 (
            handle      INTEGER PRIMARY KEY AUTOINCREMENT,
            id          TEXT    NOT NULL UNIQUE,
            app         TEXT    NOT NULL CHECK (length(CAST(app AS BLOB)) BETWEEN 1 AND 128),
            uid         TEXT    NOT NULL CHECK (uid <> ''),
            kind        TEXT    NOT NULL CHECK (kind = 'mobile' OR kind = 'huawei' OR kind = 'webhook' OR kind = 'apns' OR kind = 'webpush'),
            destination TEXT    NOT NULL,
            path        TEXT    NOT NULL CHECK (substr(path, 1, 1) = '/'
                                                AND length(CAST(path AS BLOB)) <= 2048),
            context     TEXT    NOT NULL,
            mode        TEXT    NOT NULL CHECK (mode = 'value' OR mode = 'noData' OR mode = 'childEvent'),
            format      TEXT    NOT NULL CHECK (format = 'v1' OR format = 'v2'),
            encryption  TEXT    CHECK (encryption IS NULL OR json_valid(encryption)),
            created_at  INTEGER NOT NULL,
            expires_at  INTEGER NOT NULL CHECK (expires_at > 0),
            auth        TEXT    CHECK (auth IS NULL OR (json_valid(auth) AND length(CAST(auth AS BLOB)) <= 4096)),
            UNIQUE (app, uid, kind, destination, path, context),
            CHECK ((kind = 'webhook') = (destination <> '')),
            CHECK (kind = 'webhook' OR context <> '')
        ) STRICT
        """

    static let v7Notification = """
        CREATE TABLE notification_v7 (
            id                  INTEGER PRIMARY KEY AUTOINCREMENT,
            app                 TEXT    NOT NULL,
            subscription_handle INTEGER NOT NULL,
            subscription_id     TEXT    NOT NULL,
            kind                TEXT    NOT NULL CHECK (kind = 'mobile' OR kind = 'huawei' OR kind = 'webhook' OR kind = 'apns' OR kind = 'webpush'),
            target              TEXT,
            destination         TEXT,
            event               TEXT    NOT NULL CHECK (event = 'value' OR event = 'noData' OR event = 'childEvent' OR event = 'revoke'),
            coalescable         INTEGER NOT NULL CHECK (coalescable = (event = 'value' OR event = 'noData')),
            payload             BLOB    NOT NULL,
            record_seq          INTEGER,
            created_at          INTEGER NOT NULL,
            next_attempt_at     INTEGER NOT NULL,
            first_attempt_at    INTEGER,
            attempts            INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
            claimed_until       INTEGER,
            claimed_by          TEXT,
            CHECK ((kind = 'webhook') = (destination IS NOT NULL)),
            CHECK (kind = 'webhook' OR target IS NOT NULL)
        ) STRICT
        """

    /// Version 10 (issue 34): the kind `harmonyos` (Push Kit v3). Rebuilt as version 6 was,
    /// with version 9's columns; its tally row made.
    static func v10(_ db: Database) throws {
        try rebuild(
            db,
            [
                ("subscription", v10Subscription, "handle, id, app, uid, kind, destination, path, context, mode, format, encryption, created_at, expires_at, auth"),
                ("notification", v10Notification,
                 "id, app, subscription_handle, subscription_id, kind, target, destination, event, coalescable, payload, record_seq, created_at, next_attempt_at, first_attempt_at, attempts, claimed_until, claimed_by, coalesced, coalesced_first, coalesced_last, coalesced_at"),
            ], suffix: "_v10")
        try db.execute(sql: "INSERT INTO tally (name, value) VALUES ('subscription:harmonyos', 0)")
    }

    static let v10Subscription = """
        CREATE TABLE subscription_v10 (
            handle      INTEGER PRIMARY KEY AUTOINCREMENT,
            id          TEXT    NOT NULL UNIQUE,
            app         TEXT    NOT NULL CHECK (length(CAST(app AS BLOB)) BETWEEN 1 AND 128),
            uid         TEXT    NOT NULL CHECK (uid <> ''),
            kind        TEXT    NOT NULL CHECK (kind = 'mobile' OR kind = 'huawei' OR kind = 'harmonyos' OR kind = 'webhook' OR kind = 'apns' OR kind = 'webpush'),
            destination TEXT    NOT NULL,
            path        TEXT    NOT NULL CHECK (substr(path, 1, 1) = '/'
                                                AND length(CAST(path AS BLOB)) <= 2048),
            context     TEXT    NOT NULL,
            mode        TEXT    NOT NULL CHECK (mode = 'value' OR mode = 'noData' OR mode = 'childEvent'),
            format      TEXT    NOT NULL CHECK (format = 'v1' OR format = 'v2'),
            encryption  TEXT    CHECK (encryption IS NULL OR json_valid(encryption)),
            created_at  INTEGER NOT NULL,
            expires_at  INTEGER NOT NULL CHECK (expires_at > 0),
            auth        TEXT    CHECK (auth IS NULL OR (json_valid(auth) AND length(CAST(auth AS BLOB)) <= 4096)),
            UNIQUE (app, uid, kind, destination, path, context),
            CHECK ((kind = 'webhook') = (destination <> '')),
            CHECK (kind = 'webhook' OR context <> '')
        ) STRICT
        """

    static let v10Notification = """
        CREATE TABLE notification_v10 (
            id                  INTEGER PRIMARY KEY AUTOINCREMENT,
            app                 TEXT    NOT NULL,
            subscription_handle INTEGER NOT NULL,
            subscription_id     TEXT    NOT NULL,
            kind                TEXT    NOT NULL CHECK (kind = 'mobile' OR kind = 'huawei' OR kind = 'harmonyos' OR kind = 'webhook' OR kind = 'apns' OR kind = 'webpush'),
            target              TEXT,
            destination         TEXT,
            event               TEXT    NOT NULL CHECK (event = 'value' OR event = 'noData' OR event = 'childEvent' OR event = 'revoke'),
            coalescable         INTEGER NOT NULL CHECK (coalescable = (event = 'value' OR event = 'noData')),
            payload             BLOB    NOT NULL,
            record_seq          INTEGER,
            created_at          INTEGER NOT NULL,
            next_attempt_at     INTEGER NOT NULL,
            first_attempt_at    INTEGER,
            attempts            INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
            claimed_until       INTEGER,
            claimed_by          TEXT,
            coalesced           TEXT,
            coalesced_first     INTEGER,
            coalesced_last      INTEGER,
            coalesced_at        INTEGER,
            CHECK ((kind = 'webhook') = (destination IS NOT NULL)),
            CHECK (kind = 'webhook' OR target IS NOT NULL)
        ) STRICT
        """

    /// Version 8: the delivery history (SPEC §13.2).
    ///
    /// - `delivery_attempt`: every attempt, written with its settlement; read by subscription
    ///   (newest first) and by record. Pruned oldest first (by id) past its age or row bounds.
    /// - `record_skip`: the subscriptions a record concerned that got nothing, and why.
    /// - `discarded_notification`: notifications discarded after the retry window, kept (with
    ///   their payload, never shown) so that an operator can queue them again (`recover`).
    static let v8 = """
        CREATE TABLE delivery_attempt (
            id           INTEGER PRIMARY KEY AUTOINCREMENT,
            notification INTEGER NOT NULL,
            subscription TEXT    NOT NULL,
            app          TEXT    NOT NULL,
            seq          INTEGER,
            provider     TEXT    NOT NULL,
            destination  TEXT,
            attempt      INTEGER NOT NULL CHECK (attempt >= 1),
            at           INTEGER NOT NULL,
            status       INTEGER,
            reason       TEXT,
            latency_ms   INTEGER,
            outcome      TEXT    NOT NULL CHECK (outcome = 'delivered' OR outcome = 'retry' OR outcome = 'revoked'
                                                 OR outcome = 'dropped' OR outcome = 'discarded' OR outcome = 'paused'),
            next_at      INTEGER
        ) STRICT;
        CREATE INDEX delivery_attempt_by_subscription ON delivery_attempt (subscription, id);
        CREATE INDEX delivery_attempt_by_record ON delivery_attempt (app, seq) WHERE seq IS NOT NULL;

        CREATE TABLE record_skip (
            id           INTEGER PRIMARY KEY AUTOINCREMENT,
            app          TEXT    NOT NULL,
            seq          INTEGER NOT NULL,
            subscription TEXT    NOT NULL,
            why          TEXT    NOT NULL CHECK (why = 'coalesced' OR why = 'denied' OR why = 'too_big' OR why = 'expired'
                                                 OR why = 'revoked'),
            at           INTEGER NOT NULL
        ) STRICT;
        CREATE INDEX record_skip_by_record ON record_skip (app, seq);

        CREATE TABLE discarded_notification (
            id                  INTEGER PRIMARY KEY,
            app                 TEXT    NOT NULL,
            subscription_handle INTEGER NOT NULL,
            subscription_id     TEXT    NOT NULL,
            kind                TEXT    NOT NULL,
            target              TEXT,
            destination         TEXT,
            event               TEXT    NOT NULL,
            coalescable         INTEGER NOT NULL,
            payload             BLOB    NOT NULL,
            record_seq          INTEGER,
            created_at          INTEGER NOT NULL,
            discarded_at        INTEGER NOT NULL
        ) STRICT;
        CREATE INDEX discarded_by_app ON discarded_notification (app, discarded_at);

        -- The record a waiting notification came from before a newer one took its place: read
        -- back by the same UPDATE (RETURNING), so that noting `coalesced` costs no query.
        ALTER TABLE notification ADD COLUMN replaced_seq INTEGER;
        """

    /// Version 9: the records a notification took the place of (`coalesced`, SPEC §13.2) are
    /// kept on it — their `seq`s as decimal text, comma-separated, appended by the replacing
    /// UPDATE — rather than as a `record_skip` row each: a stream that coalesces heavily noted
    /// about one row per record. When the notification goes (delivered, dropped, discarded,
    /// revoked: any DELETE), a trigger moves its list to `record_coalesced`, one row; a list
    /// grown past its bound is moved by another while the notification waits. A record's
    /// fate finds its `seq` in the lists, waiting or moved (`first_seq` bounds the search).
    static let v9 = """
        ALTER TABLE notification ADD COLUMN coalesced TEXT;
        ALTER TABLE notification ADD COLUMN coalesced_first INTEGER;
        ALTER TABLE notification ADD COLUMN coalesced_last INTEGER;
        ALTER TABLE notification ADD COLUMN coalesced_at INTEGER;

        CREATE TABLE record_coalesced (
            id           INTEGER PRIMARY KEY AUTOINCREMENT,
            app          TEXT    NOT NULL,
            subscription TEXT    NOT NULL,
            first_seq    INTEGER NOT NULL,
            last_seq     INTEGER NOT NULL,
            seqs         TEXT    NOT NULL,
            at           INTEGER NOT NULL,
            CHECK (first_seq <= last_seq)
        ) STRICT;
        CREATE INDEX record_coalesced_by_record ON record_coalesced (app, first_seq);

        -- A list past its bound (256 bytes, about 40 seqs, or a span of 2^20 seqs) moves now:
        -- a row is rewritten at each replacement, and a record's lookup searches the moved
        -- lists from its seq − 2^20.
        CREATE TRIGGER notification_coalesced_full AFTER UPDATE OF coalesced ON notification
        WHEN length(NEW.coalesced) >= 256 OR NEW.coalesced_last - NEW.coalesced_first >= 1048576
        BEGIN
            INSERT INTO record_coalesced (app, subscription, first_seq, last_seq, seqs, at)
            VALUES (NEW.app, NEW.subscription_id, NEW.coalesced_first, NEW.coalesced_last, NEW.coalesced, NEW.coalesced_at);
            UPDATE notification SET coalesced = NULL, coalesced_first = NULL, coalesced_last = NULL, coalesced_at = NULL WHERE id = NEW.id;
        END;

        CREATE TRIGGER notification_coalesced_kept BEFORE DELETE ON notification
        WHEN OLD.coalesced IS NOT NULL
        BEGIN
            INSERT INTO record_coalesced (app, subscription, first_seq, last_seq, seqs, at)
            VALUES (OLD.app, OLD.subscription_id, OLD.coalesced_first, OLD.coalesced_last, OLD.coalesced, OLD.coalesced_at);
        END;
        """

    /// Version 11: the oldest notification of each subscription — the only one a claim may take
    /// (order per subscription, SPEC §8) — is marked (`head`), by triggers, whoever writes.
    /// Claims and the next due time read an index of the unclaimed heads alone. Before, they
    /// walked every due notification in order and skipped each that had an older one: with a
    /// backlog of B notifications, every claim cost O(B), and a burst of records made
    /// delivery quadratic (issue 35: 60,000 records to 1,000 subscriptions took 434 µs of CPU
    /// per record). Notification ids only grow (AUTOINCREMENT), so a new row is a head exactly
    /// when its subscription has no other; when a head goes, the next oldest takes its place.
    static let v11 = """
        ALTER TABLE notification ADD COLUMN head INTEGER NOT NULL DEFAULT 0;
        UPDATE notification SET head = 1 WHERE id IN (SELECT min(id) FROM notification GROUP BY subscription_handle);
        DROP INDEX notification_due;
        -- Claims: the unclaimed heads in due order; the heads whose claim lapsed, by its end.
        CREATE INDEX notification_ready ON notification (next_attempt_at, id) WHERE head = 1 AND claimed_until IS NULL;
        CREATE INDEX notification_held ON notification (claimed_until) WHERE head = 1 AND claimed_until IS NOT NULL;

        CREATE TRIGGER notification_head_inserted AFTER INSERT ON notification
        WHEN NOT EXISTS (SELECT 1 FROM notification e WHERE e.subscription_handle = NEW.subscription_handle AND e.id < NEW.id)
        BEGIN
            UPDATE notification SET head = 1 WHERE id = NEW.id;
        END;

        CREATE TRIGGER notification_head_deleted AFTER DELETE ON notification WHEN OLD.head = 1
        BEGIN
            UPDATE notification SET head = 1
            WHERE id = (SELECT min(id) FROM notification WHERE subscription_handle = OLD.subscription_handle);
        END;
        """

    /// Version 12: the delivery history's index by subscription is ordered by era first — an
    /// attempt's id divided by 2,048 (`id >> 11`) — then by subscription and id. An attempt's
    /// entry went at the end of its subscription's run, so a settlement of ~150 attempts to as
    /// many subscriptions dirtied ~150 leaf pages of the index, each written whole to the WAL
    /// and again at the checkpoint: 72 % of the pages the writer wrote while delivering (issue
    /// 35). Within the newest era the entries of every subscription sit together, about thirty
    /// leaf pages whatever the number of subscriptions, so a settlement dirties at most those.
    /// A read by subscription seeks each era, newest first (`SQLiteStore.attemptEraShift`;
    /// the queries must spell the expression exactly as the index does, `id >> 11`).
    static let v12 = """
        DROP INDEX delivery_attempt_by_subscription;
        CREATE INDEX delivery_attempt_by_era ON delivery_attempt (id >> 11, subscription, id);
        """
}
