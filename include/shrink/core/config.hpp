// Build-wide configuration: version, host/device annotations, inlining hints.
#pragma once

// The version, in this one place: CMake reads these three lines for project(shrink VERSION ...), and `shrink
// --version` prints SHRINK_VERSION_STRING.
#define SHRINK_VERSION_MAJOR 0
#define SHRINK_VERSION_MINOR 1
#define SHRINK_VERSION_PATCH 0

#define SHRINK_STRINGIFY_VALUE_(x) #x
#define SHRINK_STRINGIFY_VALUE(x) SHRINK_STRINGIFY_VALUE_(x)
#define SHRINK_VERSION_STRING                  \
  SHRINK_STRINGIFY_VALUE(SHRINK_VERSION_MAJOR) \
  "." SHRINK_STRINGIFY_VALUE(SHRINK_VERSION_MINOR) "." SHRINK_STRINGIFY_VALUE(SHRINK_VERSION_PATCH)

// Functions callable from both host code and CUDA device code; plain inline for a host compiler.
#if defined(__CUDACC__)
#define SHRINK_HOST_DEVICE __host__ __device__
#define SHRINK_FORCE_INLINE __forceinline__
#else
#define SHRINK_HOST_DEVICE
#if defined(__GNUC__) || defined(__clang__)
#define SHRINK_FORCE_INLINE inline __attribute__((always_inline))
#else
#define SHRINK_FORCE_INLINE inline
#endif
#endif

// Restrict-qualified pointers let the compiler vectorise loops over distinct buffers.
#if defined(__GNUC__) || defined(__clang__) || defined(__CUDACC__)
#define SHRINK_RESTRICT __restrict__
#else
#define SHRINK_RESTRICT
#endif
