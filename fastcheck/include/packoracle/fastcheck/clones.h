// PACKORACLE_CLONES before a function: built for AVX2 and for baseline x86-64, the machine picking one when the
// program loads (GCC's and clang's target_clones), so that one binary runs everywhere and fast where it can.
// Every such function goes through this macro: the CMake option PACKORACLE_BASELINE_ONLY (defining the macro
// of that name) builds each for baseline x86-64 alone, so that the tests run the baseline code on a machine
// with AVX2 (scripts/sanitize.sh builds the whole suite so; ctest `clones.as_configured` holds the libraries
// to it). Elsewhere than x86-64 the functions are built once, for the target.
#pragma once

#if defined(__x86_64__) && !defined(PACKORACLE_BASELINE_ONLY)
#define PACKORACLE_CLONES [[gnu::target_clones("avx2", "default")]]
#else
#define PACKORACLE_CLONES
#endif
