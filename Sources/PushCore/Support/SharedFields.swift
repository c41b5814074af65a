/// A value's fields held once and shared by its copies: a copy is one retain instead of one
/// per string or array it holds; a change makes a new box. For values copied often and changed
/// rarely (``Subscription``, ``OutboxEntry``). Equal when the boxes are the same or the fields
/// are equal.
struct SharedFields<Fields: Sendable & Equatable>: Sendable, Equatable {
    final class Box: Sendable {
        let fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private var box: Box

    init(_ fields: Fields) {
        box = Box(fields)
    }

    var fields: Fields {
        get { box.fields }
        set { box = Box(newValue) }
    }

    static func == (lhs: SharedFields, rhs: SharedFields) -> Bool {
        lhs.box === rhs.box || lhs.box.fields == rhs.box.fields
    }
}
