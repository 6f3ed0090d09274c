#pragma once

// An invariant a fuzz target asserts: abort (a crash libFuzzer records, a
// failure the corpus test reports) when it does not hold. Kept on in release
// builds, unlike assert().
#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)
