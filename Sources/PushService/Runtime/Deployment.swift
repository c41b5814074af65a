import Foundation
import Logging
import PushContracts
import PushCore
import PushEngine
import PushStore
import ServiceLifecycle

/// How this process takes part, chosen once from the configuration (`store`,
/// `instance.mode`), and what differs between the ways: the store, how records are processed,
/// under which name claims and checkpoints are filed. Everything else the root builds the same
/// for every deployment.
///
/// | `store` | `instance.mode` | deployment |
/// |---|---|---|
/// | `sqlite` | `single` (the only one) | ``SingleDeployment`` |
/// | `postgres` | `single` | ``SingleDeployment`` (holds the database alone) |
/// | `postgres` | `shared` (default) | ``SharedDeployment`` (one of several) |
protocol Deployment: Sendable {
    /// The store, with every protocol the service runs on.
    var store: any RuntimeStore { get }
    /// This process's name in delivery claims and in `/status`.
    var instance: String { get }
    /// Whether the delivery worker releases every claim at start (it alone sends) or only its
    /// own (others send beside it).
    var releasesEveryClaimAtStart: Bool { get }
    /// Until when the delivery worker's claims are surely its own: for ever alone; while its
    /// heartbeats reach the store among several (``ClaimTenure``).
    var claimTenure: ClaimTenure { get }
    /// How many instances share each sender's rate budget: one alone; among several, the live
    /// ones the lease keeper counts (``InstanceShare``).
    var instanceShare: InstanceShare { get }
    /// The name a source's checkpoint is filed under.
    func checkpointKey(_ source: String) -> String
    /// Where the REST API's rule checks find the trees: those this process holds, and, with
    /// several instances, the others' read from the store.
    func treeView(clock: any ServiceClock) -> TreeView
    /// The services that process records, given what every deployment shares.
    func processing(_ parts: ServiceParts) async throws -> Processing
}

/// Opens the configured store and chooses the deployment (see ``Deployment``).
enum Deployments {
    static func open(_ configuration: ServiceConfiguration, logger: Logger) async throws -> any Deployment {
        switch (configuration.store, configuration.instanceMode) {
        case (.sqlite(let path), _):
            // Locked before it is migrated or read: a second `run` on the file stops here.
            try SQLiteFiles.prepare(path)
            let lock = try SQLiteFiles.lock(path)
            return SingleDeployment(sqlite: try SQLiteStore(path: path), lock: lock)
        case (.postgres(let url), .single):
            let store = try await PostgresStore.open(url: url, logger: logger)
            do {
                guard try await store.holdDeploymentLock(shared: false) else {
                    throw ConfigurationError(
                        "instance.mode", .inUse, "single, but other pushdispatch instances use \(store.location) (shared ones, or another single one); "
                            + "stop them, or give every instance instance.mode: shared")
                }
                let waiting = try await store.inboxDepth()
                guard waiting == 0 else {
                    throw ConfigurationError(
                        "instance.mode", .inUse, "single, but \(waiting) records accepted by shared instances wait in the inbox of \(store.location); "
                            + "run with instance.mode: shared until they are processed")
                }
                try await store.adoptInstanceSocketCheckpoints()
            } catch {
                store.close()
                throw error
            }
            return SingleDeployment(postgres: store, instance: configuration.instanceName, machine: configuration.machineName)
        case (.postgres(let url), .shared):
            let store = try await PostgresStore.open(url: url, logger: logger)
            do {
                guard try await store.holdDeploymentLock(shared: true) else {
                    throw ConfigurationError(
                        "instance.mode", .inUse, "shared, but a single instance (instance.mode: single) uses \(store.location) alone; stop it first")
                }
                try await store.adoptInstanceSocketCheckpoints()
            } catch {
                store.close()
                throw error
            }
            return SharedDeployment(
                store: store, instance: configuration.instanceName, machine: configuration.machineName, configuredAddress: configuration.http.advertised)
        }
    }

    /// Opens the configured store for an operator's command (no deployment lock: commands work
    /// beside running instances), migrating its schema.
    static func openStore(_ configuration: ServiceConfiguration, logger: Logger) async throws -> any RuntimeStore {
        switch configuration.store {
        case .sqlite(let path): try SQLiteStore(path: path)
        case .postgres(let url): try await PostgresStore.open(url: url, logger: logger)
        }
    }
}

extension ServiceConfiguration.HTTP {
    /// Where others reach this instance: the host listened on, or the host name when it listens
    /// on every interface.
    func advertised(port: Int) -> String {
        (["0.0.0.0", "::", ""].contains(host) ? ProcessInfo.processInfo.hostName : host) + ":\(port)"
    }

    var advertised: String { advertised(port: port) }
}
