import PushFuzz

/// libFuzzer's entry point of the `config` target; its body is `FuzzTarget.config` (PushFuzz).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTarget.trapping(FuzzTarget.config, data, size)
    return 0
}
