/// A value's fields held once and shared by its copies: a copy is one retain instead of one
/// per string or array it holds; a change makes a new box. For values copied often and changed
/// rarely (``Subscription``, ``OutboxEntry``). Equal when the boxes are the same or the fields
/// are equal.
/// Package-wide (``OutboxEntry`` lives in PushContracts) and inlinable, as it was when both were
/// in one module: a field read is a load, not a call.
package struct SharedFields<Fields: Sendable & Equatable>: Sendable, Equatable {
    @usableFromInline
    final class Box: Sendable {
        @usableFromInline let fields: Fields
        @inlinable init(_ fields: Fields) { self.fields = fields }
    }

    @usableFromInline var box: Box

    @inlinable
    package init(_ fields: Fields) {
        box = Box(fields)
    }

    /// Read in place: `shared.fields.app` loads the one field from the box, where a `get`
    /// would copy every field out (a retain and a release per string and array) to read one.
    @inlinable
    package var fields: Fields {
        _read { yield box.fields }
        set { box = Box(newValue) }
    }

    @inlinable
    package static func == (lhs: SharedFields, rhs: SharedFields) -> Bool {
        lhs.box === rhs.box || lhs.box.fields == rhs.box.fields
    }
}
