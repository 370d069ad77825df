// Declarations only: libFuzzer itself comes from the toolchain (-sanitize=fuzzer).
