// Quantized tensors in safetensors files, all of it: the convention and its records (io/quant_record.hpp), encoding
// for a writer (io/quant_encode.hpp), checked reading (io/quant_read.hpp) and whole-file dequantization
// (io/dequantize_file.hpp). Needs nlohmann_json 3.10 or later.
#pragma once

#include "shrink/io/dequantize_file.hpp"
#include "shrink/io/quant_encode.hpp"
#include "shrink/io/quant_read.hpp"
#include "shrink/io/quant_record.hpp"
