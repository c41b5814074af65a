/// A stack over raw memory for the parser's members and elements: values are moved into the
/// finished object or array, not copied (no retain/release pairs).
struct ScratchStack<Element> {
    private var base: UnsafeMutablePointer<Element>
    private(set) var count = 0
    private var capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
        base = UnsafeMutablePointer<Element>.allocate(capacity: capacity)
    }

    @inline(__always)
    mutating func push(_ element: Element) {
        if count == capacity { grow() }
        (base + count).initialize(to: element)
        count += 1
    }

    /// The top element, in place.
    var last: Element {
        @inline(__always) get { base[count - 1] }
        @inline(__always) _modify { yield &base[count - 1] }
    }

    /// Moves the top element out.
    @inline(__always)
    mutating func popLast() -> Element {
        count -= 1
        return (base + count).move()
    }

    private mutating func grow() {
        let newCapacity = capacity * 2
        let newBase = UnsafeMutablePointer<Element>.allocate(capacity: newCapacity)
        newBase.moveInitialize(from: base, count: count)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }

    /// Moves the elements from `start` on into a new array and drops them from the stack.
    mutating func popContiguous(from start: Int) -> ContiguousArray<Element> {
        let n = count - start
        guard n > 0 else { return [] }
        let source = base + start
        count = start
        return ContiguousArray(unsafeUninitializedCapacity: n) { buffer, initialized in
            buffer.baseAddress!.moveInitialize(from: source, count: n)
            initialized = n
        }
    }

    /// Moves the elements from `start` on into a new array and drops them from the stack.
    mutating func popArray(from start: Int) -> [Element] {
        let n = count - start
        guard n > 0 else { return [] }
        let source = base + start
        count = start
        return [Element](unsafeUninitializedCapacity: n) { buffer, initialized in
            buffer.baseAddress!.moveInitialize(from: source, count: n)
            initialized = n
        }
    }

    /// Destroys what is left and frees the memory.
    func release() {
        base.deinitialize(count: count)
        base.deallocate()
    }
}
