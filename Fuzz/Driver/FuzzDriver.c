// The declaration of libFuzzer's driver is all this module holds (include/FuzzDriver.h); the
// driver itself comes with -sanitize=fuzzer.
#include "FuzzDriver.h"
