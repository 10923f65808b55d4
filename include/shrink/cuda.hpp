// Umbrella header of the CUDA layer's host API (link shrink::cuda): plain C++, no CUDA headers, so a program built
// by a host compiler alone can call every GPU operation. The device templates are in shrink/cuda/kernels/ (.cuh), for
// translation units compiled by nvcc.
#pragma once

#include "shrink/cuda/device.hpp"
#include "shrink/cuda/launch.hpp"

// Quantization and calibration.
#include "shrink/cuda/calibration.hpp"
#include "shrink/cuda/cast.hpp"
#include "shrink/cuda/quantize.hpp"

// Pruning and sparse formats.
#include "shrink/cuda/csr.hpp"
#include "shrink/cuda/nm.hpp"
#include "shrink/cuda/norms.hpp"
#include "shrink/cuda/threshold.hpp"

// Distillation losses.
#include "shrink/cuda/cross_entropy.hpp"
#include "shrink/cuda/distillation_loss.hpp"
#include "shrink/cuda/feature_losses.hpp"
#include "shrink/cuda/loss.hpp"
#include "shrink/cuda/soft_target.hpp"
#include "shrink/cuda/topk_teacher.hpp"

// Matrix products.
#include "shrink/linear/csr_cuda.hpp"
#include "shrink/linear/int8_cuda.hpp"
#include "shrink/linear/nm_cuda.hpp"
#include "shrink/linear/weight_only_cuda.hpp"
