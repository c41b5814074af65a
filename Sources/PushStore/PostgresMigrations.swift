import Logging
import PostgresNIO
import PushJSON

/// The PostgreSQL schema: frozen, versioned migrations (a released one never changes; a change
/// is a new version), applied at open under an advisory lock, each in one transaction with its
/// row in `schema_migration`. The invariants are in the schema, as in SQLite
/// (``SQLiteMigrations``): a bad row is refused whoever writes it.
enum PostgresMigrations {
    /// Version → its statements (one statement each: the extended protocol runs one at a time).
    static let migrations: [(version: Int32, statements: [String])] = [
        (1, version1), (2, version2), (3, version3), (4, version4), (5, version5), (6, version6), (7, version7),
    ]

    /// Version 7 (issue 34): the kind `harmonyos` (Push Kit v3).
    static let version7: [String] = [
        "ALTER TABLE subscription DROP CONSTRAINT subscription_kind_check",
        "ALTER TABLE subscription ADD CONSTRAINT subscription_kind_check CHECK (kind IN ('mobile', 'huawei', 'harmonyos', 'webhook', 'apns', 'webpush'))",
        "ALTER TABLE notification DROP CONSTRAINT notification_kind_check",
        "ALTER TABLE notification ADD CONSTRAINT notification_kind_check CHECK (kind IN ('mobile', 'huawei', 'harmonyos', 'webhook', 'apns', 'webpush'))",
    ]

    /// Version 6 (issue 32): each instance's report (its rates, sends in flight, pauses and
    /// credentials, a JSON document written with its heartbeat), read by every instance's
    /// operations overview.
    static let version6: [String] = [
        "ALTER TABLE instance ADD COLUMN report bytea CHECK (octet_length(report) <= 262144)"
    ]

    /// Version 5 (issue 32): the delivery history, as SQLite's version 8
    /// (``SQLiteMigrations/v8``).
    static let version5: [String] = [
        """
        CREATE TABLE delivery_attempt (
            id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            notification bigint NOT NULL,
            subscription text   NOT NULL,
            app          text   NOT NULL,
            seq          bigint,
            provider     text   NOT NULL,
            destination  text,
            attempt      bigint NOT NULL CHECK (attempt >= 1),
            at           bigint NOT NULL,
            status       integer,
            reason       text,
            latency_ms   bigint,
            outcome      text   NOT NULL CHECK (outcome IN ('delivered', 'retry', 'revoked', 'dropped', 'discarded', 'paused')),
            next_at      bigint
        )
        """,
        "CREATE INDEX delivery_attempt_by_subscription ON delivery_attempt (subscription, id)",
        "CREATE INDEX delivery_attempt_by_record ON delivery_attempt (app, seq) WHERE seq IS NOT NULL",
        """
        CREATE TABLE record_skip (
            id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            app          text   NOT NULL,
            seq          bigint NOT NULL,
            subscription text   NOT NULL,
            why          text   NOT NULL CHECK (why IN ('coalesced', 'denied', 'too_big', 'expired', 'revoked')),
            at           bigint NOT NULL
        )
        """,
        "CREATE INDEX record_skip_by_record ON record_skip (app, seq)",
        """
        CREATE TABLE discarded_notification (
            id                  bigint  PRIMARY KEY,
            app                 text    NOT NULL,
            subscription_handle bigint  NOT NULL,
            subscription_id     text    NOT NULL,
            kind                text    NOT NULL,
            target              text,
            destination         text,
            event               text    NOT NULL,
            coalescable         boolean NOT NULL,
            payload             bytea   NOT NULL,
            record_seq          bigint,
            created_at          bigint  NOT NULL,
            discarded_at        bigint  NOT NULL
        )
        """,
        "CREATE INDEX discarded_by_app ON discarded_notification (app, discarded_at)",
    ]

    /// Version 4 (issue 24): the kinds `apns` and `webpush`. The tallies need no new rows: a
    /// kind's row is made by its first insert.
    static let version4: [String] = [
        "ALTER TABLE subscription DROP CONSTRAINT subscription_kind_check",
        "ALTER TABLE subscription ADD CONSTRAINT subscription_kind_check CHECK (kind IN ('mobile', 'huawei', 'webhook', 'apns', 'webpush'))",
        "ALTER TABLE notification DROP CONSTRAINT notification_kind_check",
        "ALTER TABLE notification ADD CONSTRAINT notification_kind_check CHECK (kind IN ('mobile', 'huawei', 'webhook', 'apns', 'webpush'))",
    ]

    /// Version 3: counts kept as rows change, so that `/metrics` and `/status` read a few rows
    /// instead of counting whole tables on every scrape. Each statement adds its change (one
    /// row per statement, from its transition table) to a row of its own session's
    /// (`shard` = the backend's pid): sessions never wait on each other's counts, nor deadlock
    /// on them. A reader sums the rows, and folds those of sessions that ended into shard 0.
    /// (A subscription's kind never changes: it is part of its identity.)
    static let version3: [String] = [
        """
        CREATE TABLE tally (
            name  text    NOT NULL,
            shard integer NOT NULL,
            value bigint  NOT NULL,
            PRIMARY KEY (name, shard)
        )
        """,
        """
        INSERT INTO tally (name, shard, value)
        SELECT 'subscription:' || kinds.kind, 0, (SELECT count(*) FROM subscription WHERE subscription.kind = kinds.kind)
        FROM (VALUES ('mobile'), ('huawei'), ('webhook')) AS kinds (kind)
        """,
        "INSERT INTO tally (name, shard, value) SELECT 'notification', 0, count(*) FROM notification",
        """
        CREATE FUNCTION tally_notifications() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            delta bigint;
        BEGIN
            IF TG_OP = 'INSERT' THEN
                SELECT count(*) INTO delta FROM added;
            ELSE
                SELECT -count(*) INTO delta FROM removed;
            END IF;
            IF delta <> 0 THEN
                INSERT INTO tally (name, shard, value) VALUES ('notification', pg_backend_pid(), delta)
                ON CONFLICT (name, shard) DO UPDATE SET value = tally.value + excluded.value;
            END IF;
            RETURN NULL;
        END
        $$
        """,
        """
        CREATE TRIGGER notification_tally_insert AFTER INSERT ON notification
        REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION tally_notifications()
        """,
        """
        CREATE TRIGGER notification_tally_delete AFTER DELETE ON notification
        REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION tally_notifications()
        """,
        """
        CREATE FUNCTION tally_subscriptions() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                INSERT INTO tally (name, shard, value)
                SELECT 'subscription:' || kind, pg_backend_pid(), count(*) FROM added GROUP BY kind ORDER BY kind
                ON CONFLICT (name, shard) DO UPDATE SET value = tally.value + excluded.value;
            ELSE
                INSERT INTO tally (name, shard, value)
                SELECT 'subscription:' || kind, pg_backend_pid(), -count(*) FROM removed GROUP BY kind ORDER BY kind
                ON CONFLICT (name, shard) DO UPDATE SET value = tally.value + excluded.value;
            END IF;
            RETURN NULL;
        END
        $$
        """,
        """
        CREATE TRIGGER subscription_tally_insert AFTER INSERT ON subscription
        REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION tally_subscriptions()
        """,
        """
        CREATE TRIGGER subscription_tally_delete AFTER DELETE ON subscription
        REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION tally_subscriptions()
        """,
    ]

    /// Version 2 (read rules, SPEC §12): the verified claims a subscription was created or
    /// refreshed with (compact JSON text, bounded), and a changed claim logs a change, so that
    /// every index evaluates the rules again with it.
    static let version2: [String] = [
        "ALTER TABLE subscription ADD COLUMN auth text CHECK (auth IS NULL OR octet_length(auth) <= 4096)",
        "DROP TRIGGER subscription_updated ON subscription",
        """
        CREATE TRIGGER subscription_updated AFTER UPDATE OF mode, format, encryption, auth ON subscription
        FOR EACH ROW WHEN (OLD.mode IS DISTINCT FROM NEW.mode OR OLD.format IS DISTINCT FROM NEW.format
                           OR OLD.encryption IS DISTINCT FROM NEW.encryption OR OLD.auth IS DISTINCT FROM NEW.auth)
        EXECUTE FUNCTION subscription_logged()
        """,
    ]

    static let version1: [String] = [
        """
        CREATE TABLE subscription (
            handle      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id          text   NOT NULL,
            app         text   NOT NULL CHECK (octet_length(app) BETWEEN 1 AND 128),
            uid         text   NOT NULL CHECK (uid <> ''),
            kind        text   NOT NULL CHECK (kind IN ('mobile', 'huawei', 'webhook')),
            destination text   NOT NULL,
            path        text   NOT NULL CHECK (left(path, 1) = '/' AND octet_length(path) <= 2048),
            context     text   NOT NULL,
            mode        text   NOT NULL CHECK (mode IN ('value', 'noData', 'childEvent')),
            format      text   NOT NULL CHECK (format IN ('v1', 'v2')),
            encryption  text,  -- the JSON text as given (jsonb would reorder its keys)
            created_at  bigint NOT NULL,
            expires_at  bigint NOT NULL CHECK (expires_at > 0),
            CONSTRAINT subscription_id_key UNIQUE (id),
            CONSTRAINT subscription_tuple_key UNIQUE (app, uid, kind, destination, path, context),
            CONSTRAINT subscription_webhook_destination CHECK ((kind = 'webhook') = (destination <> '')),
            CONSTRAINT subscription_device_context CHECK (kind = 'webhook' OR context <> '')
        )
        """,
        "CREATE INDEX subscription_by_owner ON subscription (app, uid)",
        "CREATE INDEX subscription_by_expiry ON subscription (expires_at)",
        // The change log every index follows; numbers are drawn under the writers' lock (see
        // PostgresStore), so they commit in order.
        """
        CREATE TABLE subscription_change (
            sequence  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            operation text   NOT NULL CHECK (operation IN ('insert', 'update', 'delete')),
            handle    bigint NOT NULL,
            app       text   NOT NULL,
            path      text   NOT NULL,
            mode      text   NOT NULL
        )
        """,
        """
        CREATE TABLE change_log_state (
            id             integer PRIMARY KEY CHECK (id = 1),
            pruned_through bigint  NOT NULL CHECK (pruned_through >= 0),
            last_sequence  bigint  NOT NULL CHECK (last_sequence >= pruned_through)
        )
        """,
        "INSERT INTO change_log_state (id, pruned_through, last_sequence) VALUES (1, 0, 0)",
        """
        CREATE FUNCTION subscription_logged() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            number bigint;
        BEGIN
            -- Whoever writes (the service, an operator in psql), the change is numbered under the
            -- writers' lock, so that numbers commit in order.
            PERFORM pg_advisory_xact_lock(8103509996638270818);
            IF TG_OP = 'DELETE' THEN
                INSERT INTO subscription_change (operation, handle, app, path, mode)
                VALUES ('delete', OLD.handle, OLD.app, OLD.path, OLD.mode) RETURNING sequence INTO number;
            ELSIF TG_OP = 'INSERT' THEN
                INSERT INTO subscription_change (operation, handle, app, path, mode)
                VALUES ('insert', NEW.handle, NEW.app, NEW.path, NEW.mode) RETURNING sequence INTO number;
            ELSE
                INSERT INTO subscription_change (operation, handle, app, path, mode)
                VALUES ('update', NEW.handle, NEW.app, NEW.path, NEW.mode) RETURNING sequence INTO number;
            END IF;
            UPDATE change_log_state SET last_sequence = number WHERE id = 1;
            PERFORM pg_notify('pushdispatch_subscription_change', number::text);
            RETURN NULL;
        END
        $$
        """,
        """
        CREATE TRIGGER subscription_inserted AFTER INSERT ON subscription
        FOR EACH ROW EXECUTE FUNCTION subscription_logged()
        """,
        """
        CREATE TRIGGER subscription_deleted AFTER DELETE ON subscription
        FOR EACH ROW EXECUTE FUNCTION subscription_logged()
        """,
        """
        CREATE TRIGGER subscription_updated AFTER UPDATE OF mode, format, encryption ON subscription
        FOR EACH ROW WHEN (OLD.mode IS DISTINCT FROM NEW.mode OR OLD.format IS DISTINCT FROM NEW.format
                           OR OLD.encryption IS DISTINCT FROM NEW.encryption)
        EXECUTE FUNCTION subscription_logged()
        """,
        """
        CREATE FUNCTION subscription_identity_is_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'a subscription''s identity (its 6-tuple and id) never changes' USING ERRCODE = 'check_violation';
        END
        $$
        """,
        """
        CREATE TRIGGER subscription_identity_is_immutable
        BEFORE UPDATE OF id, app, uid, kind, destination, path, context ON subscription
        FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id OR OLD.app IS DISTINCT FROM NEW.app OR OLD.uid IS DISTINCT FROM NEW.uid
                           OR OLD.kind IS DISTINCT FROM NEW.kind OR OLD.destination IS DISTINCT FROM NEW.destination
                           OR OLD.path IS DISTINCT FROM NEW.path OR OLD.context IS DISTINCT FROM NEW.context)
        EXECUTE FUNCTION subscription_identity_is_immutable()
        """,
        // The service's own signing keys (private JWKs), oldest first.
        """
        CREATE TABLE service_key (
            kid        text   PRIMARY KEY,
            jwk        text   NOT NULL,
            created_at bigint NOT NULL
        )
        """,
        // Ingestion: where each source stands, the trees (journal since the snapshot, snapshot
        // chunks, the snapshot in use), the outbox. As SQLite's version 3.
        """
        CREATE TABLE source_checkpoint (
            source        text   PRIMARY KEY CHECK (source <> ''),
            last_seq      bigint,
            position      bigint NOT NULL CHECK (position >= 0),
            file_identity text
        )
        """,
        """
        CREATE TABLE tree_journal (
            id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            app     text   NOT NULL CHECK (octet_length(app) BETWEEN 1 AND 128),
            records bytea  NOT NULL
        )
        """,
        "CREATE INDEX tree_journal_by_app ON tree_journal (app, id)",
        """
        CREATE TABLE tree_snapshot (
            app        text   NOT NULL,
            generation bigint NOT NULL CHECK (generation > 0),
            chunk      bigint NOT NULL CHECK (chunk >= 0),
            bytes      bytea  NOT NULL,
            PRIMARY KEY (app, generation, chunk)
        )
        """,
        "CREATE SEQUENCE tree_generation",
        """
        CREATE TABLE tree_head (
            app             text   PRIMARY KEY,
            generation      bigint NOT NULL CHECK (generation > 0),
            chunks          bigint NOT NULL CHECK (chunks >= 0),
            through_journal bigint NOT NULL CHECK (through_journal >= 0)
        )
        """,
        """
        CREATE TABLE notification (
            id                  bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            app                 text    NOT NULL,
            subscription_handle bigint  NOT NULL,
            subscription_id     text    NOT NULL,
            kind                text    NOT NULL CHECK (kind IN ('mobile', 'huawei', 'webhook')),
            target              text,
            destination         text,
            event               text    NOT NULL CHECK (event IN ('value', 'noData', 'childEvent', 'revoke')),
            coalescable         boolean NOT NULL CHECK (coalescable = (event IN ('value', 'noData'))),
            payload             bytea   NOT NULL,
            record_seq          bigint,
            created_at          bigint  NOT NULL,
            next_attempt_at     bigint  NOT NULL,
            first_attempt_at    bigint,
            attempts            bigint  NOT NULL DEFAULT 0 CHECK (attempts >= 0),
            claimed_until       bigint,
            claimed_by          text,
            CHECK ((kind = 'webhook') = (destination IS NOT NULL)),
            CHECK (kind = 'webhook' OR target IS NOT NULL)
        )
        """,
        "CREATE INDEX notification_by_subscription ON notification (subscription_handle, id)",
        "CREATE INDEX notification_due ON notification (next_attempt_at, id)",
        // Several instances: records acknowledged by any instance wait here for the owner of
        // their application; the owners' leases; the instances and their heartbeats.
        """
        CREATE TABLE inbox (
            id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            app         text   NOT NULL CHECK (octet_length(app) BETWEEN 1 AND 128),
            source      text   NOT NULL CHECK (source <> ''),
            position    bigint NOT NULL,
            line        bytea  NOT NULL,
            received_at bigint NOT NULL
        )
        """,
        "CREATE INDEX inbox_by_app ON inbox (app, id)",
        """
        CREATE TABLE app_lease (
            app        text   PRIMARY KEY,
            owner      text   NOT NULL,
            token      bigint NOT NULL CHECK (token > 0),
            expires_at bigint NOT NULL
        )
        """,
        """
        CREATE TABLE instance (
            name         text   PRIMARY KEY,
            address      text   NOT NULL,
            started_at   bigint NOT NULL,
            heartbeat_at bigint NOT NULL,
            -- Stopping: it gives its applications up and is not counted in the shares, while
            -- its heartbeat keeps its delivery claims until its last sends are answered.
            retiring     boolean NOT NULL DEFAULT false
        )
        """,
    ]

    /// Applies what is missing, one instance at a time.
    static func migrate(_ client: PostgresClient, logger: Logger) async throws {
        try await client.withConnection { leased in
            let connection = PostgresSession(connection: leased, logger: logger)
            _ = try await connection.query("SELECT pg_advisory_lock(\(PostgresStore.migrationLock))", logger: logger).collect()
            do {
                try await connection.query(
                    "CREATE TABLE IF NOT EXISTS schema_migration (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
                    logger: logger)
                var current: Int32 = 0
                for try await version in try await connection.query("SELECT coalesce(max(version), 0) FROM schema_migration", logger: logger)
                    .decode(Int32.self)
                { current = version }
                for migration in migrations where migration.version > current {
                    try await connection.withTransaction(logger: logger) { transaction in
                        for statement in migration.statements {
                            try await transaction.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                        }
                        try await transaction.query("INSERT INTO schema_migration (version) VALUES (\(migration.version))", logger: logger)
                    }
                    logger.info("PostgreSQL schema migrated", metadata: ["version": "\(migration.version)"])
                }
            } catch {
                _ = try? await connection.query("SELECT pg_advisory_unlock(\(PostgresStore.migrationLock))", logger: logger).collect()
                throw error
            }
            _ = try await connection.query("SELECT pg_advisory_unlock(\(PostgresStore.migrationLock))", logger: logger).collect()
        }
    }
}

extension PostgresStore {
    /// The schema version applied (the highest migration).
    public func schemaVersion() async throws -> Int {
        var version: Int32 = 0
        try await run { session in
            for try await value in try await session.query("SELECT coalesce(max(version), 0) FROM schema_migration").decode(Int32.self) {
                version = value
            }
        }
        return Int(version)
    }
}
