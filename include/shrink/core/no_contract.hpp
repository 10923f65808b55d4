// SHRINK_NO_CONTRACT: functions whose every float operation must round on its own (no fused multiply-add).
//
// Code that reproduces another library's arithmetic bit for bit (PyTorch's observers, the numpy references
// of the tests) must not let the compiler fuse a * b + c into one FMA, which GCC does by default under
// -march flags with FMA (-ffp-contract=fast). Put SHRINK_NO_CONTRACT before such a function and
// SHRINK_NO_CONTRACT_BODY first in its body. Clang honours the pragma unless built with -ffp-contract=fast.
#pragma once

#if defined(__clang__)
#define SHRINK_NO_CONTRACT
#define SHRINK_NO_CONTRACT_BODY _Pragma("clang fp contract(off)")
#elif defined(__GNUC__)
#define SHRINK_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#define SHRINK_NO_CONTRACT_BODY
#else
#define SHRINK_NO_CONTRACT
#define SHRINK_NO_CONTRACT_BODY
#endif
