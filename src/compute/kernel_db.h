// KernelDb: measured kernel times, keyed by Kernel signature
// (compute/kernel.h). CSV with a header line:
//   gpu,signature,us,source
//   H100-SXM5-80GB,gemm bf16 m=8192 n=8192 k=8192,1512.3,measure_kernels.py 2026-11-23
// Rows for other GPUs than the one asked for are ignored. Malformed lines are
// rejected with "FILE:LINE: reason"; a signature repeated for one GPU is an
// error.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "util/status.h"

namespace prism {

class KernelDb {
 public:
  // Rows of `gpu` from the CSV text; `source` names it in errors.
  static Result<KernelDb> parse(std::string_view csv, std::string_view source,
                                std::string_view gpu);
  static Result<KernelDb> load(const std::string& path, std::string_view gpu);

  std::optional<double> find_us(std::string_view signature) const;
  std::size_t size() const { return us_.size(); }
  // Adds rows of another database (its entries win), for several --kernel-db files.
  void merge(const KernelDb& other);

 private:
  std::unordered_map<std::string, double> us_;
};

}  // namespace prism
