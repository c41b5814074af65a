/// Data payload formats.
public enum PayloadFormat: String, Sendable, CaseIterable {
    case v1
    case v2
}
