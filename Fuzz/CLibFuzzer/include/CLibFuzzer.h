#ifndef CLIBFUZZER_H
#define CLIBFUZZER_H
#include <stddef.h>
#include <stdint.h>

/// libFuzzer's driver (compiler-rt, LLVM 11+): runs the fuzzing loop with
/// `callback` as the target. Linked only with `-sanitize=fuzzer`.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
