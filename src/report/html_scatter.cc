// The search page's chart (report/html_charts.h): tokens/s per GPU against
// peak device memory, the Pareto front on top, out-of-memory
// configurations in a band below the axis.
#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

#include "report/html_charts.h"

namespace prism::html {
namespace {

constexpr double kTop = 30, kPlot = 380, kOomBand = 36;
constexpr double kBottom = kTop + kPlot;

// The chart's scales, from the points and the capacity.
struct Scale {
  double x_step = 1, x_max = 1, y_step = 1, y_max = 1;
  bool any_oom = false;
  bool capacity_on_scale = false;  // within 1.5 times the largest peak
  double oom_y = 0, height = 0;

  Scale(const std::vector<HtmlPoint>& points, Bytes capacity) {
    double max_gib = 0, max_tps = 0;
    for (const HtmlPoint& p : points) {
      max_gib = std::max(max_gib, p.peak.gib());
      if (!p.oom) max_tps = std::max(max_tps, p.tokens_per_s_per_gpu);
      any_oom = any_oom || p.oom;
    }
    capacity_on_scale = capacity.count > 0 && capacity.gib() <= max_gib * 1.5;
    if (capacity_on_scale) max_gib = std::max(max_gib, capacity.gib());
    x_step = nice_double_step(std::max(max_gib, 0.001), 8);
    x_max = std::ceil(max_gib / x_step - 1e-9) * x_step + x_step / 2;
    y_step = nice_double_step(std::max(max_tps, 1.0), 5);
    y_max = std::max(y_step, std::ceil(max_tps / y_step) * y_step);
    oom_y = kBottom + 22 + kOomBand / 2;
    height = kBottom + 22 + (any_oom ? kOomBand : 0) + 30;
  }
  double x(Bytes b) const { return x_of_gib(b.gib()); }
  double x_of_gib(double g) const { return kLeft + g / x_max * kPlotWidth; }
  double y(double tps) const { return kBottom - tps / y_max * kPlot; }
};

void axes(const Scale& s, Bytes capacity, std::string* out) {
  for (double g = 0; g <= s.x_max; g += s.x_step) {
    fmt::format_to(std::back_inserter(*out),
                   "<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" "
                   "y2=\"{2:.1f}\"/><text class=\"tick\" x=\"{0:.1f}\" y=\"{3:.1f}\" "
                   "text-anchor=\"middle\">{4}</text>\n",
                   s.x_of_gib(g), kTop, kBottom, kBottom + 14, gib_tick(g, s.x_step));
  }
  for (double t = 0; t <= s.y_max + s.y_step / 2; t += s.y_step) {
    fmt::format_to(std::back_inserter(*out),
                   "<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" "
                   "y2=\"{1:.1f}\"/><text class=\"tick\" x=\"{3:.1f}\" y=\"{4:.1f}\" "
                   "text-anchor=\"end\">{5:.0f}</text>\n",
                   kLeft, s.y(t), kLeft + kPlotWidth, kLeft - 6, s.y(t) + 4, t);
  }
  fmt::format_to(std::back_inserter(*out),
                 "<text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">peak "
                 "device memory per GPU</text>\n<text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\" "
                 "text-anchor=\"end\">tokens/s per GPU</text>\n",
                 kLeft + kPlotWidth / 2, s.height - 6, kLeft - 6, kTop - 12);
  if (s.capacity_on_scale) {
    fmt::format_to(std::back_inserter(*out),
                   "<line class=\"capacity\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" "
                   "y2=\"{2:.1f}\"><title>capacity {3}</title></line>\n",
                   s.x(capacity), kTop, s.any_oom ? s.oom_y + kOomBand / 2 : kBottom,
                   bytes_text(capacity));
  } else if (capacity.count > 0) {
    fmt::format_to(std::back_inserter(*out),
                   "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">GPU "
                   "capacity {} (off the scale)</text>\n",
                   kLeft + kPlotWidth, kTop - 12, bytes_text(capacity));
  }
  if (s.any_oom)
    fmt::format_to(std::back_inserter(*out),
                   "<rect class=\"oom-band\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
                   "height=\"{:.1f}\"/><text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" "
                   "text-anchor=\"end\">out of memory</text>\n",
                   kLeft, s.oom_y - kOomBand / 2, kPlotWidth, kOomBand, kLeft - 6, s.oom_y + 4);
}

// The points off the front: circles, and crosses in the band for those
// out of memory.
void others(const Scale& s, const std::vector<HtmlPoint>& points,
            const std::vector<std::size_t>& front, std::string* out) {
  std::vector<bool> on_front(points.size(), false);
  for (std::size_t i : front) on_front[i] = true;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const HtmlPoint& p = points[i];
    if (on_front[i]) continue;
    const std::string tip = html_escape(
        fmt::format("{}: {:.1f} tokens/s per GPU, {} peak{}{}{}", p.label, p.tokens_per_s_per_gpu,
                    bytes_text(p.peak), p.detail.empty() ? "" : ", ", p.detail,
                    p.oom ? " (out of memory)" : ""));
    if (p.oom) {
      fmt::format_to(std::back_inserter(*out),
                     "<path class=\"oom\" d=\"M{0:.1f},{1:.1f}l8,8m0,-8l-8,8\"><title>{2}</title>"
                     "</path>\n",
                     s.x(p.peak) - 4, s.oom_y - 4, tip);
    } else {
      fmt::format_to(std::back_inserter(*out),
                     "<circle class=\"point\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\"><title>{}"
                     "</title></circle>\n",
                     s.x(p.peak), s.y(p.tokens_per_s_per_gpu), tip);
    }
  }
}

// The front on top: a staircase from the least memory up, and its points.
void front_line(const Scale& s, const std::vector<HtmlPoint>& points,
                const std::vector<std::size_t>& front, std::string* out) {
  if (front.empty()) return;
  Series line;
  for (std::size_t k = 0; k < front.size(); ++k) {
    const HtmlPoint& p = points[front[k]];
    if (k > 0) line.add(s.x(p.peak), line.last_y);
    line.add(s.x(p.peak), s.y(p.tokens_per_s_per_gpu));
  }
  fmt::format_to(std::back_inserter(*out), "<polyline class=\"front\" points=\"{}\"/>\n",
                 line.points);
  for (std::size_t k = 0; k < front.size(); ++k) {
    const HtmlPoint& p = points[front[k]];
    fmt::format_to(std::back_inserter(*out),
                   "<circle class=\"front-point\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5.5\"><title>"
                   "Pareto front #{}: {}: {:.1f} tokens/s per GPU, {} peak{}{}</title></circle>\n",
                   s.x(p.peak), s.y(p.tokens_per_s_per_gpu), k + 1, html_escape(p.label),
                   p.tokens_per_s_per_gpu, bytes_text(p.peak), p.detail.empty() ? "" : ", ",
                   html_escape(p.detail));
  }
}

}  // namespace

std::string scatter_svg(const std::vector<HtmlPoint>& points, const std::vector<std::size_t>& front,
                        Bytes capacity) {
  const Scale s(points, capacity);
  std::string out = svg_open(kWidth, s.height, "tokens per second per GPU against peak memory");
  axes(s, capacity, &out);
  others(s, points, front, &out);
  front_line(s, points, front, &out);
  out.append("</svg>\n");
  return out;
}

}  // namespace prism::html
