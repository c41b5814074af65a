import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What the machine running the tests allows, for the tests that need more than a user has.
public enum TestEnvironment {
    /// Whether the tests that mount a small tmpfs to fill a disk run: as root (mounting needs
    /// CAP_SYS_ADMIN) unless `TEST_PUSHDISPATCH_NO_MOUNT=1`, or whenever CI requires them
    /// (`TEST_PUSHDISPATCH_REQUIRE_ROOT=1`: they then fail and say why if they cannot mount).
    public static var mountsFilesystems: Bool {
        let environment = ProcessInfo.processInfo.environment
        if environment["TEST_PUSHDISPATCH_REQUIRE_ROOT"] == "1" { return true }
        return getuid() == 0 && environment["TEST_PUSHDISPATCH_NO_MOUNT"] != "1"
    }

    /// Why a disk-full test is skipped.
    public static let mountsFilesystemsReason: Comment =
        "needs root (CAP_SYS_ADMIN) to mount a tmpfs and fill it; TEST_PUSHDISPATCH_REQUIRE_ROOT=1 requires it"
}
