import CoreMetrics
import PushCore
import Synchronization

/// swift-metrics counters and timers made once per name and label set, through a given
/// factory (the service passes its Prometheus registry's; tests and tools pass none and only
/// the in-memory counts are kept).
public final class LabelledMetrics: MetricsRecorder, Sendable {
    let factory: (any MetricsFactory)?
    let counters = Mutex<[String: CoreMetrics.Counter]>([:])
    let timers = Mutex<[String: CoreMetrics.Timer]>([:])
    let meters = Mutex<[String: CoreMetrics.Meter]>([:])

    public init(factory: (any MetricsFactory)?) {
        self.factory = factory
    }

    static func key(_ name: String, _ labels: [(String, String)]) -> String {
        labels.reduce(name) { $0 + "\u{0}" + $1.0 + "=" + $1.1 }
    }

    /// Adds `by` to the counter `name{labels}` (0 makes it appear with 0).
    public func increment(_ name: String, _ labels: [(String, String)], by: Int) {
        guard let factory, by >= 0 else { return }
        let key = Self.key(name, labels)
        let counter = counters.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = CoreMetrics.Counter(label: name, dimensions: labels, factory: factory)
            counters[key] = counter
            return counter
        }
        counter.increment(by: by)
    }

    /// Records a duration (milliseconds, clamped at 0) in the histogram `name{labels}`.
    public func record(_ name: String, _ labels: [(String, String)], milliseconds: Int64) {
        guard let factory else { return }
        let key = Self.key(name, labels)
        let timer = timers.withLock { timers in
            if let timer = timers[key] { return timer }
            let timer = CoreMetrics.Timer(label: name, dimensions: labels, factory: factory)
            timers[key] = timer
            return timer
        }
        timer.recordMilliseconds(max(0, milliseconds))
    }

    /// Moves the gauge `name{labels}` by `by`.
    public func adjust(_ name: String, _ labels: [(String, String)], by: Int) {
        guard let factory, by != 0 else { return }
        let key = Self.key(name, labels)
        let meter = meters.withLock { meters in
            if let meter = meters[key] { return meter }
            let meter = CoreMetrics.Meter(label: name, dimensions: labels, factory: factory)
            meters[key] = meter
            return meter
        }
        if by > 0 { meter.increment(by: Double(by)) } else { meter.decrement(by: Double(by.magnitude)) }
    }
}
