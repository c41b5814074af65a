#if canImport(Glibc)
import Glibc
#endif
import NIOPosix
import PushCore
import Synchronization

/// Tells the queue file's reader when its file may have new bytes, so that an idle service does
/// not wake 20 times a second to look (issue 35: an idle service spent ~1 % of a core and ~100
/// wake-ups a second, most of them this poll). Linux's inotify watches the file (written,
/// closed, moved, deleted, its attributes changed) and its folder (a file created or moved in:
/// a rotation, or the file appearing); a thread waits on it, and also signals every `fallback`
/// whatever happens (a safety net: a file system whose writes inotify does not see, such as one
/// written from another host). Elsewhere, or when the kernel refuses the watches, there is none
/// and the reader polls as before.
final class FileChangeWatch: Sendable {
    struct Waiting {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    let state = Mutex(Waiting())
    let stopped = Atomic<Bool>(false)
    let pool: NIOThreadPool
    /// The inotify instance (tests count its watches). Closed by the thread when it ends, after
    /// ``stop()``: not to be used then.
    let descriptor: Int32

    /// `nil` when the system has no inotify or refuses it (the caller polls).
    init?(path: String, fallback: Duration) {
        #if os(Linux)
        let descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else { return nil }
        let folder = Self.folder(of: path)
        // The folder's watch must hold: without it a file that appears later is never seen.
        guard inotify_add_watch(descriptor, folder, UInt32(IN_CREATE | IN_MOVED_TO)) >= 0 else {
            close(descriptor)
            return nil
        }
        let fileEvents = UInt32(IN_MODIFY | IN_CLOSE_WRITE | IN_ATTRIB | IN_MOVE_SELF | IN_DELETE_SELF)
        // The file may not be there yet: watched once it appears. One that is there and cannot
        // be watched (a watch limit reached, no permission) is polled.
        let first = inotify_add_watch(descriptor, path, fileEvents)
        guard first >= 0 || errno == ENOENT else {
            close(descriptor)
            return nil
        }
        self.descriptor = descriptor
        pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        let fallbackMilliseconds = max(1, fallback.wholeMilliseconds)
        // Waits of at most a second, so that a stop ends the thread within one.
        let wait = Int32(clamping: min(1_000, fallbackMilliseconds))
        pool.submit { [self] _ in
            var buffer = [UInt8](repeating: 0, count: 4_096)
            var quiet: Int64 = 0
            // The file cannot be watched (a watch limit reached, no permission): a signal every
            // `pollMilliseconds`, as the poll the watch replaces.
            var polling = false
            // The watch of the file the path names (-1: none yet).
            var fileWatch = first
            while !stopped.load(ordering: .relaxed) {
                let pace = polling ? min(wait, Self.pollMilliseconds) : wait
                var polled = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                let ready = poll(&polled, 1, pace)
                if ready < 0 && errno != EINTR || polled.revents & Int16(POLLERR | POLLNVAL) != 0 {
                    // Never expected; never a busy loop either: the fallback's pace.
                    usleep(UInt32(pace) * 1_000)
                }
                if ready == 0 && !polling {
                    quiet += Int64(pace)
                    if quiet < fallbackMilliseconds { continue }
                }
                quiet = 0
                // Drained (the events themselves do not matter: any of them means "read").
                while buffer.withUnsafeMutableBytes({ read(descriptor, $0.baseAddress, $0.count) }) > 0 {}
                // A new file at the path (rotated, or appeared) is watched from now on, and a new
                // folder at the folder's path; the same ones' watches are kept as they are.
                _ = inotify_add_watch(descriptor, folder, UInt32(IN_CREATE | IN_MOVED_TO))
                let watched = inotify_add_watch(descriptor, path, fileEvents)
                polling = watched < 0 && errno != ENOENT
                // The file the path named before (rotated away) is watched no more: kept rotated
                // files would each hold a watch (a limited resource) until deleted. Its reader
                // finishes it by looking at it on a timer (`QueueFileSource`'s rotation poll).
                if watched >= 0 && watched != fileWatch {
                    if fileWatch >= 0 { _ = inotify_rm_watch(descriptor, fileWatch) }
                    fileWatch = watched
                }
                signal()
            }
            close(descriptor)
        }
        #else
        return nil
        #endif
    }

    /// Ends the watch (its thread ends within a second). Its owner must call it: the thread
    /// holds the watch until then.
    func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        pool.shutdownGracefully { _ in }
        signal()
    }

    /// Returns once the file may have changed since the last return (at once when it already
    /// has), or the task is cancelled.
    func next() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.pending || stopped.load(ordering: .relaxed) {
                        state.pending = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            signal()
        }
    }

    func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// How often a file that cannot be watched is looked at (milliseconds).
    static let pollMilliseconds: Int32 = 50

    /// The folder `path` is in (`.` for a bare name).
    static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
