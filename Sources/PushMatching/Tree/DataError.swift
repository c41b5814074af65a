import PushCore

/// Why written data cannot go into the tree.
public struct DataError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// A key inside the value is not a valid key, or makes a path too long.
        case invalidValue(at: String, PathError)
        /// `patch` data is not an object.
        case patchNotObject(got: String)
        /// A key of a `patch` is not a valid relative path.
        case invalidPatchKey(String, PathError)
        /// Two keys of a `patch` overlap: one is a path prefix of the other.
        case overlappingPatchKeys(String, String)
    }

    public let code: Code

    public init(_ code: Code) {
        self.code = code
    }

    public var description: String {
        switch code {
        case .invalidValue(let path, let problem):
            return "data at \(path): \(problem)"
        case .patchNotObject(let got):
            return "patch data must be an object of relative paths to values, got \(got)"
        case .invalidPatchKey(let key, let problem):
            return "patch key \(quoted(key)): \(problem)"
        case .overlappingPatchKeys(let a, let b):
            return "patch keys \(quoted(a)) and \(quoted(b)) overlap; no key may be a path prefix of another"
        }
    }
}
