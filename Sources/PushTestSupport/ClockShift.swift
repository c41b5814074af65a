import Foundation
import Synchronization

/// A process whose wall clock is off: a tiny `LD_PRELOAD` library, compiled at test time with
/// `cc -shared -fPIC`, that adds `TEST_CLOCK_SHIFT_SECONDS` to what `clock_gettime` answers for
/// `CLOCK_REALTIME` (and `CLOCK_REALTIME_COARSE`), to `gettimeofday` and to `time`. Monotonic
/// clocks are left alone, as a real machine whose clock is wrong has them. (libfaketime breaks
/// Swift executables: they lose their command-line arguments, swiftlang/swift#76080.)
public enum ClockShift {
    static let source = """
        #define _GNU_SOURCE
        #include <dlfcn.h>
        #include <stdlib.h>
        #include <sys/time.h>
        #include <time.h>

        static long shift;
        static int (*real_clock_gettime)(clockid_t, struct timespec *);
        static int (*real_gettimeofday)(struct timeval *, void *);

        __attribute__((constructor)) static void setup(void) {
            const char *text = getenv("TEST_CLOCK_SHIFT_SECONDS");
            shift = text ? strtol(text, NULL, 10) : 0;
            real_clock_gettime = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
            real_gettimeofday = (int (*)(struct timeval *, void *))dlsym(RTLD_NEXT, "gettimeofday");
        }

        int clock_gettime(clockid_t clock, struct timespec *time) {
            if (!real_clock_gettime) setup();
            int result = real_clock_gettime(clock, time);
            if (result == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) time->tv_sec += shift;
            return result;
        }

        int gettimeofday(struct timeval *restrict value, void *restrict zone) {
            if (!real_gettimeofday) setup();
            int result = real_gettimeofday(value, zone);
            if (result == 0 && value) value->tv_sec += shift;
            return result;
        }

        time_t time(time_t *out) {
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            if (out) *out = now.tv_sec;
            return now.tv_sec;
        }

        """

    static let built = Mutex<String?>(nil)

    /// The library's path, compiled on first use.
    public static func library() throws -> String {
        try built.withLock { path in
            if let path { return path }
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-clockshift-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try source.write(to: folder.appendingPathComponent("clockshift.c"), atomically: false, encoding: .utf8)
            let library = folder.appendingPathComponent("libclockshift.so").path
            let result = try PostgresTestServer.execute(
                "/usr/bin/cc", ["-shared", "-fPIC", "-O2", "-o", library, folder.appendingPathComponent("clockshift.c").path, "-ldl"])
            guard result.status == 0 else { throw TestNetworkError("cc -shared -fPIC clockshift.c failed: \(result.text)") }
            path = library
            return library
        }
    }

    /// The environment of a process whose wall clock is `seconds` off (ahead when positive).
    public static func environment(shiftedBy seconds: Int) throws -> [String: String] {
        ["LD_PRELOAD": try library(), "TEST_CLOCK_SHIFT_SECONDS": String(seconds)]
    }
}
