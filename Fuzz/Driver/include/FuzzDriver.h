#ifndef FUZZ_DRIVER_H
#define FUZZ_DRIVER_H

#include <stddef.h>
#include <stdint.h>

/// libFuzzer's driver, for a program with a `main` of its own (libFuzzer's FuzzerDriver.cpp).
/// SwiftPM links an executable's entry point as `<module>_main` (`--defsym main=…`), so a fuzz
/// target cannot use libFuzzer's `main`: its entry point calls this instead.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
