import PushFuzz

/// libFuzzer's entry point of the `webpush` target; its body is `FuzzTarget.webpush` (PushFuzz).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTarget.trapping(FuzzTarget.webpush, data, size)
    return 0
}
