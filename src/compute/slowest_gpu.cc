#include "compute/slowest_gpu.h"

#include <cmath>

namespace prism {

double expected_max_standard_normal(int n) {
  if (n <= 1) return 0;
  // E = integral of x n phi(x) Phi(x)^(n-1) dx; Phi(x)^(n-1) as
  // exp((n-1) log1p(-Q(x))) with Q the upper tail, exact far in the right
  // tail where the maximum of many draws lies. Composite Simpson on
  // [-12, 12]: the integrand is below 1e-30 outside it for any int n.
  constexpr double kLo = -12, kHi = 12;
  constexpr int kSteps = 24000;  // even
  constexpr double kH = (kHi - kLo) / kSteps;
  const double inv_sqrt_2pi = 1 / std::sqrt(2 * M_PI);
  auto f = [&](double x) {
    const double q = 0.5 * std::erfc(x / std::sqrt(2.0));
    if (q >= 1) return 0.0;
    const double phi = inv_sqrt_2pi * std::exp(-0.5 * x * x);
    return x * n * phi * std::exp((n - 1) * std::log1p(-q));
  };
  double sum = f(kLo) + f(kHi);
  for (int i = 1; i < kSteps; ++i) sum += (i % 2 ? 4 : 2) * f(kLo + i * kH);
  return sum * kH / 3;
}

double slowest_gpu_slowdown(const GpuSpec& g, int num_gpus) {
  if (g.sustained_clock_cov <= 0) return 1;
  return 1 + g.sustained_clock_cov * expected_max_standard_normal(num_gpus);
}

GpuSpec slowed_by(GpuSpec g, double slowdown) {
  g.tensor_sustained_slowdown *= slowdown;
  g.tensor_fp8_sustained_slowdown *= slowdown;
  return g;
}

}  // namespace prism
