#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import PushCore
import PushContracts

/// The SQLite database's files on disk: who may read them, and which process serves them.
///
/// The database holds the service's private signing key (and every subscription's device token),
/// so it is created readable by its owner only, and a database that the group or others may
/// read is refused. SQLite gives its `-wal` and `-shm` files the database's own mode.
public enum SQLiteFiles {
    /// The database's files that exist at `path`, with their permission bits.
    static func modes(_ path: String) -> [(path: String, mode: mode_t)] {
        [path, path + "-wal", path + "-shm"].compactMap { file in
            var info = stat()
            return stat(file, &info) == 0 ? (file, info.st_mode & 0o7777) : nil
        }
    }

    /// Creates the database file readable and writable by its owner only, unless it exists;
    /// refuses existing files that the group or others may access, with the command that fixes
    /// it.
    public static func prepare(_ path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd >= 0 {
            close(fd)
        } else if errno != EEXIST {
            throw StoreError.unavailable("cannot create the SQLite database \(path): \(String(cString: strerror(errno)))")
        }
        let open = modes(path).filter { $0.mode & 0o077 != 0 }
        guard open.isEmpty else {
            let listed = open.map { "\($0.path) (mode \(String($0.mode, radix: 8)))" }.joined(separator: ", ")
            throw StoreError.unavailable(
                "the SQLite database is readable or writable by its group or others: \(listed); it holds the service's private "
                    + "signing key and the device tokens. Run: chmod 600 \(open.map(\.path).joined(separator: " "))")
        }
    }

    /// Holds an exclusive lock on the database for as long as the returned value lives: a
    /// second `run` on the same file is refused instead of taking the first one's claims and
    /// socket. The lock is the kernel's (`flock`), so it goes with the process, however it ends.
    public static func lock(_ path: String) throws -> ProcessLock {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw StoreError.unavailable("cannot open the SQLite database \(path) to lock it: \(String(cString: strerror(errno)))")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno == EWOULDBLOCK ? nil : String(cString: strerror(errno))
            close(fd)
            if let reason { throw StoreError.unavailable("cannot lock the SQLite database \(path): \(reason)") }
            throw StoreError.unavailable(
                "another pushdispatch process is running on the SQLite database \(path) (it holds the database's lock); stop it "
                    + "first, or give this one its own store.sqlite")
        }
        return ProcessLock(descriptor: fd)
    }
}

/// A lock held by this process until this value is released, or the process ends.
public final class ProcessLock: Sendable {
    let descriptor: Int32

    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    deinit {
        close(descriptor)
    }
}
