#ifndef CFUZZDRIVER_H
#define CFUZZDRIVER_H

#include <stddef.h>
#include <stdint.h>

/// libFuzzer's driver (compiler-rt, linked by -sanitize=fuzzer). SwiftPM links every executable with its entry
/// point renamed to `<Module>_main`, so libFuzzer's own `main` is never used: each harness defines
/// `<Module>_main` and hands its callback to this driver.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
