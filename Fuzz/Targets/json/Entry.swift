import PushFuzz

/// libFuzzer's entry point of the `json` target; its body is `FuzzTarget.json` (PushFuzz).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTarget.trapping(FuzzTarget.json, data, size)
    return 0
}
