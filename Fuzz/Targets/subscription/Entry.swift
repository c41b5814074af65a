import PushFuzz

/// libFuzzer's entry point of the `subscription` target; its body is `FuzzTarget.subscription` (PushFuzz).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTarget.trapping(FuzzTarget.subscription, data, size)
    return 0
}
