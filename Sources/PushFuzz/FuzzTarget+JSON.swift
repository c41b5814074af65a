import PushJSON

extension FuzzTarget {
    /// `json`: PushJSON's `JSONParser` on any bytes.
    ///
    /// - A refusal: a message that is non-empty and bounded, at an offset within the input.
    /// - An accepted document round-trips: parse → write → parse gives an equal value, and
    ///   writing that again gives the same bytes (numbers keep their value, so their text).
    /// - Against Foundation's `JSONSerialization` (``JSONDifferential``): the same documents
    ///   accepted, and equal values, numbers compared exactly.
    public static func json(_ data: UnsafeBufferPointer<UInt8>) throws(FuzzViolation) {
        let ours: Result<JSON, JSONParseError> = Result { () throws(JSONParseError) in try JSONParser.parse(data) }
        switch ours {
        case .failure(let error):
            try Check.message(error.description, "JSONParser's error")
            try Check.that((0...data.count).contains(error.offset), "JSONParser's error at byte \(error.offset) of \(data.count)")
        case .success(let value):
            try roundTrip(value)
        }
        try JSONDifferential.compare(data, ours: ours)
    }

    /// parse(write(value)) == value, and write is stable from then on.
    static func roundTrip(_ value: JSON) throws(FuzzViolation) {
        var writer = JSONWriter()
        writer.write(value)
        let written = writer.bytes
        let again: JSON
        do {
            again = try JSONParser.parse(written)
        } catch {
            throw FuzzViolation("the writer's output does not parse (\(error)): \(Check.excerpt(written))")
        }
        try Check.that(again == value, "parse(write(value)) differs from the value: \(Check.excerpt(written))")
        var second = JSONWriter()
        second.write(again)
        try Check.that(second.bytes == written, "write(parse(write(value))) differs from write(value): \(Check.excerpt(written)) then \(Check.excerpt(second.bytes))")
    }
}
