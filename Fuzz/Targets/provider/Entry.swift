import FuzzDriver
import PushFuzz

/// libFuzzer's entry point of the `provider` target; its body is `FuzzTarget.provider` (PushFuzz).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzTarget.trapping(FuzzTarget.provider, data, size)
    return 0
}

/// The program's entry point, as SwiftPM links it (`main` is this module's `_main`): libFuzzer's
/// driver, with the function above.
@_cdecl("fuzz_provider_main")
public func entry(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzz(data, size) }
}
