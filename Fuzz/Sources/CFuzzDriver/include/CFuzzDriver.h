#ifndef CFUZZDRIVER_H
#define CFUZZDRIVER_H

#include <stddef.h>
#include <stdint.h>

/// libFuzzer's driver (compiler-rt, linked by -sanitize=fuzzer).
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

/// Runs libFuzzer with `callback` as the target. SwiftPM links every executable with its entry point renamed to
/// `<Module>_main`, so libFuzzer's own `main` is never used: each harness defines `<Module>_main` and calls this.
int CFuzzDriver_run(int argc, char **argv, int (*callback)(const uint8_t *data, size_t size));

#endif
