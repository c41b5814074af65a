import PushFuzz

/// libFuzzer's entry point of the `rules` target; its body is `FuzzTarget.rules` (PushFuzz).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTarget.trapping(FuzzTarget.rules, data, size)
    return 0
}
