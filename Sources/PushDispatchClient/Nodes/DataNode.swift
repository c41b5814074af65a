import PushCore

/// A location in the application's data tree, and the subscriptions made on it: the push
/// half of the Webcom SDK's `DataNode`.
///
/// Get one from ``PushDispatch/node(for:)`` or another node's ``relativeNode(for:)``.
public struct DataNode: Sendable, Hashable, CustomStringConvertible {
    /// The application's service object.
    public let service: PushDispatch
    let location: Path

    init(service: PushDispatch, location: Path) {
        self.service = service
        self.location = location
    }

    /// The canonical path: `/` for the root, else `/key/key…` with no trailing `/`.
    public var path: String { location.string }

    /// The last key of the path; `nil` at the root.
    public var key: String? { location.keys.last?.string }

    /// The parent node; `nil` at the root.
    public var parent: DataNode? {
        location.keys.isEmpty ? nil : DataNode(service: service, location: Path(uncheckedKeys: Array(location.keys.dropLast())))
    }

    /// The node at `relativePath` from this one (SPEC §2): `a/b` goes down, `..` goes up (not
    /// above the root), empty segments and `.` are ignored, and a leading `/` changes nothing
    /// (`/a` is `a`). Throws ``PushClientError/Code/invalidArgument`` naming the bad key, or
    /// the length, when the result is not a valid path.
    public func relativeNode(for relativePath: String) throws(PushClientError) -> DataNode {
        do {
            return DataNode(service: service, location: try Path(location.string + "/" + relativePath))
        } catch {
            throw .invalidArgument("path \(Bounded.quoted(relativePath)) from \(Bounded.quoted(path)): \(error)")
        }
    }

    /// The path.
    public var description: String { path }

    /// Same service object and same path.
    public static func == (lhs: DataNode, rhs: DataNode) -> Bool {
        lhs.service === rhs.service && lhs.location == rhs.location
    }

    /// Hashes the service object's identity and the path.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(service))
        hasher.combine(location)
    }
}
