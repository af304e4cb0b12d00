// KernelDb: measured kernel times, keyed by Kernel signature
// (compute/kernel.h). CSV with a header line:
//   gpu,signature,us,source
//   H100-SXM5-80GB,gemm bf16 m=8192 n=8192 k=8192,1512.3,measure_kernels.py 2026-11-23
// Columns are found by name in the header (gpu, signature and us are
// required; source and any extra columns are kept out of the way). Fields are
// not quoted (a signature never contains a comma) and are trimmed of
// surrounding blanks; blank lines and lines starting with '#' are skipped.
// A row whose source starts with "kineto " (written by `prism calibrate
// kineto`) is marked in situ: a time taken inside a profiled training step,
// at the clocks the step ran at (compute/kernel_model.h uses it as is).
// Every row is checked, whichever GPU it is for; rows for other GPUs than the
// one asked for are then ignored. Malformed lines are rejected with
// "FILE:LINE: reason": a wrong field count, an empty gpu or signature, a
// signature of no known kind, `us` not a finite number >= 0, and a signature
// repeated for one GPU.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "util/status.h"

namespace prism {

// The source column's prefix of a row taken in a training step: `prism
// calibrate kineto` writes "kineto FILES DATE" (kineto/kernel_calibration.h).
inline constexpr std::string_view kInSituSourcePrefix = "kineto ";

class KernelDb {
 public:
  // Rows of `gpu` from the CSV text; `source` names it in errors.
  static Result<KernelDb> parse(std::string_view csv, std::string_view source,
                                std::string_view gpu);
  static Result<KernelDb> load(const std::string& path, std::string_view gpu);

  struct Row {
    double us = 0;         // measured microseconds
    bool in_situ = false;  // taken in a training step (source "kineto ...")
  };
  // The measurement of the kernel with this signature, if any.
  std::optional<Row> find(std::string_view signature) const;
  // Its microseconds, if any.
  std::optional<double> find_us(std::string_view signature) const;
  std::size_t size() const { return rows_.size(); }
  // Adds rows of another database (its entries win), for several --kernel-db files.
  void merge(const KernelDb& other);

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, Row, Hash, std::equal_to<>> rows_;
};

}  // namespace prism
