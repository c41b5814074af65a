import PushFuzz

/// libFuzzer's entry point of the `jose` target; its body is `FuzzTarget.jose` (PushFuzz).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTarget.trapping(FuzzTarget.jose, data, size)
    return 0
}
