import PushFuzz

/// libFuzzer's entry point of the `bearer` target; its body is `FuzzTarget.bearer` (PushFuzz).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTarget.trapping(FuzzTarget.bearer, data, size)
    return 0
}
