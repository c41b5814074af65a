import Foundation
import PushCore
import PushJSON

extension JSON {
    /// The value decoded into an app type, with Foundation's `JSONDecoder`:
    /// `try value.decode(Message.self)`.
    public func decode<T: Decodable>(_ type: T.Type, using decoder: JSONDecoder = JSONDecoder()) throws -> T {
        var writer = JSONWriter(capacity: 256)
        writer.write(self)
        return try decoder.decode(type, from: Data(writer.bytes))
    }
}
