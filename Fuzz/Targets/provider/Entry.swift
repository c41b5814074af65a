import PushFuzz

/// libFuzzer's entry point of the `provider` target; its body is `FuzzTarget.provider` (PushFuzz).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTarget.trapping(FuzzTarget.provider, data, size)
    return 0
}
