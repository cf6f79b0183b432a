/* The libFuzzer entry point every fuzz_*.c target defines. */
#ifndef SVCENV_TEST_FUZZ_H
#define SVCENV_TEST_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
