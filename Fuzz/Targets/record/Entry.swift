import PushFuzz

/// libFuzzer's entry point of the `record` target; its body is `FuzzTarget.record` (PushFuzz).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTarget.trapping(FuzzTarget.record, data, size)
    return 0
}
