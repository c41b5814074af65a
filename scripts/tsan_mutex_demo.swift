// Shows, on this toolchain, that ThreadSanitizer does not see Synchronization.Mutex on Linux
// (scripts/sanitizers.sh builds and runs it before the suites): four threads append to an
// array, each append under the lock. With `mutex` ThreadSanitizer reports races that cannot
// happen; with `nslock` (a pthread mutex, which it intercepts) it reports none.
//
//   swiftc -sanitize=thread scripts/tsan_mutex_demo.swift -o demo && ./demo mutex && ./demo nslock
import Foundation
import Synchronization

final class WithMutex: Sendable {
    let values = Mutex<[Int]>([])
    func append(_ value: Int) { values.withLock { $0.append(value) } }
    var count: Int { values.withLock { $0.count } }
}

final class WithNSLock: @unchecked Sendable {
    let lock = NSLock()
    var values: [Int] = []
    func append(_ value: Int) { lock.withLock { values.append(value) } }
    var count: Int { lock.withLock { values.count } }
}

let useMutex = CommandLine.arguments.dropFirst().first != "nslock"
let mutex = WithMutex()
let nslock = WithNSLock()
// Four threads at once (concurrentPerform), long enough to overlap.
DispatchQueue.concurrentPerform(iterations: 4) { thread in
    for index in 0..<100_000 {
        if useMutex { mutex.append(thread * 1_000_000 + index) } else { nslock.append(thread * 1_000_000 + index) }
    }
}
print(useMutex ? "Mutex: \(mutex.count) values" : "NSLock: \(nslock.count) values")
