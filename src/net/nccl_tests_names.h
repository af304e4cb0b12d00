// nccl-tests' vocabulary for `prism collective`: its element type names
// (-d float, half, bfloat16, ...), its reduction operations (-o sum, prod,
// max, min, avg), and what its tables print for them, so that a command
// line and a table of nccl-tests carry over as they are.
#pragma once

#include <string>
#include <string_view>

#include "util/status.h"
#include "util/vocab.h"

namespace prism {

// -d: nccl-tests' names (float, half, bfloat16, double, int8, uint8, int32,
// int64, f8e4m3, f8e5m2; also int, char) and PrismLLM's (fp32, bf16, ...).
// The error lists both.
Result<DType> parse_test_dtype(std::string_view flag, std::string_view name);
// The name nccl-tests prints in its `type` column.
std::string_view test_dtype_name(DType d);

enum class TestRedop : std::uint8_t { kSum, kProd, kMax, kMin, kAvg };
// -o: sum, prod, max, min, avg (nccl-tests' "all" is not a table of its own here).
Result<TestRedop> parse_test_redop(std::string_view flag, std::string_view name);
std::string_view to_string(TestRedop r);

}  // namespace prism
