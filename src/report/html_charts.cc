#include "report/html_charts.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <iterator>

#include <fmt/format.h>

namespace prism::html {
namespace {

// The smallest "1, 2 or 5 times a power of ten" step that cuts `range` into
// at most `parts` (integers only, so ticks repeat exactly).
std::int64_t nice_step(std::int64_t range, int parts) {
  for (std::int64_t mag = 1;; mag *= 10) {
    for (std::int64_t m : {1, 2, 5})
      if (m * mag * parts >= range || mag > INT64_MAX / 100) return m * mag;
  }
}

// A tick's label: its time in the unit of the step.
std::string time_tick(std::int64_t ns, std::int64_t step) {
  if (step >= 100'000'000) return fmt::format("{:g} s", static_cast<double>(ns) / 1e9);
  if (step >= 100'000) return fmt::format("{:g} ms", static_cast<double>(ns) / 1e6);
  if (step >= 100) return fmt::format("{:g} us", static_cast<double>(ns) / 1e3);
  return fmt::format("{} ns", ns);
}

// A time axis under a plot whose top is `top` and bottom `bottom`.
void time_axis(const HtmlPage& page, double top, double bottom, std::string* out) {
  const std::int64_t range = std::max<std::int64_t>(1, (page.window_end - page.window_begin).ns);
  const std::int64_t step = nice_step(range, 8);
  for (std::int64_t t = 0; t <= range; t += step) {
    const double x = kLeft + static_cast<double>(t) * kPlotWidth / static_cast<double>(range);
    fmt::format_to(std::back_inserter(*out),
                   "<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" "
                   "y2=\"{2:.1f}\"/><text class=\"tick\" x=\"{0:.1f}\" y=\"{3:.1f}\" "
                   "text-anchor=\"middle\">{4}</text>\n",
                   x, top, bottom, bottom + 14, time_tick(t, step));
  }
}

double x_of(const HtmlPage& page, SimTime t) {
  const double range =
      static_cast<double>(std::max<std::int64_t>(1, (page.window_end - page.window_begin).ns));
  const double at = static_cast<double>(std::clamp(t, page.window_begin, page.window_end).ns -
                                        page.window_begin.ns);
  return kLeft + at * kPlotWidth / range;
}

// Categories with time in any stage, in the breakdown's order.
std::vector<TimeCategory> present(const HtmlPage& page) {
  std::vector<TimeCategory> out;
  for (int c = 0; c < kNumTimeCategories; ++c) {
    const auto cat = static_cast<TimeCategory>(c);
    for (const HtmlStage& s : page.stages)
      if (s.breakdown[cat].ns > 0) {
        out.push_back(cat);
        break;
      }
  }
  return out;
}

void legend(const std::vector<TimeCategory>& cats, double y, std::string* out) {
  double x = kLeft;
  for (TimeCategory c : cats) {
    const std::string label = category_label(c);
    fmt::format_to(std::back_inserter(*out),
                   "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
                   "<text class=\"legend\" x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
                   x, y, category_color(c), x + 16, y + 10, html_escape(label));
    x += 32 + 7.0 * static_cast<double>(label.size());
  }
}

// One stage's row of the timeline at the resolution of the screen: each
// pixel column is split from the top by the time each category takes in it
// (in whole pixels of the row's height, largest remainders first), so that
// communication interleaved with compute finer than a pixel still shows;
// neighbouring columns split alike are one group, whose tooltip gives its
// time span and its shares.
void timeline_row(const HtmlPage& page, const HtmlStage& stage, double y, int h, std::string* out) {
  const auto columns = static_cast<std::size_t>(kPlotWidth);
  const double range =
      static_cast<double>(std::max<std::int64_t>(1, (page.window_end - page.window_begin).ns));
  const double per_column = range / static_cast<double>(columns);
  std::vector<std::array<double, kNumTimeCategories>> time(columns);
  for (const HtmlSpan& s : stage.spans) {
    const double from = static_cast<double>((s.begin - page.window_begin).ns);
    const double to = static_cast<double>((s.end - page.window_begin).ns);
    for (auto c = static_cast<std::size_t>(std::max(0.0, from / per_column));
         c < columns && static_cast<double>(c) * per_column < to; ++c) {
      const double lo = std::max(from, static_cast<double>(c) * per_column);
      const double hi = std::min(to, static_cast<double>(c + 1) * per_column);
      if (hi > lo) time[c][static_cast<int>(s.category)] += hi - lo;
    }
  }
  using Split = std::array<int, kNumTimeCategories>;
  std::vector<Split> split(columns);
  for (std::size_t c = 0; c < columns; ++c) {
    double total = 0;
    for (double t : time[c]) total += t;
    if (total <= 0) continue;
    int given = 0;
    std::array<double, kNumTimeCategories> rest{};
    for (int k = 0; k < kNumTimeCategories; ++k) {
      const double exact = time[c][k] / total * h;
      split[c][k] = static_cast<int>(exact);
      rest[k] = exact - split[c][k];
      given += split[c][k];
    }
    for (; given < h; ++given) {
      const auto k = std::max_element(rest.begin(), rest.end()) - rest.begin();
      ++split[c][k];
      rest[k] = -1;
    }
  }
  auto at = [&](std::size_t col) {
    return SimTime{static_cast<std::int64_t>(std::llround(static_cast<double>(col) * per_column))};
  };
  for (std::size_t c = 0; c < columns;) {
    std::size_t e = c + 1;
    while (e < columns && split[e] == split[c]) ++e;
    double top = y;
    std::string shares;
    for (int k = 0; k < kNumTimeCategories; ++k) {
      if (split[c][k] == 0) continue;
      const auto cat = static_cast<TimeCategory>(k);
      fmt::format_to(std::back_inserter(shares), "{}{} {:.0f}%", shares.empty() ? "" : ", ",
                     category_label(cat), 100.0 * split[c][k] / h);
      fmt::format_to(std::back_inserter(*out),
                     "<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>\n",
                     kLeft + static_cast<double>(c), top, e - c, split[c][k], category_color(cat));
      top += split[c][k];
    }
    if (e - c >= 2 && !shares.empty())
      fmt::format_to(std::back_inserter(*out),
                     "<rect class=\"tip\" x=\"{:.0f}\" y=\"{:.0f}\" width=\"{}\" height=\"{}\">"
                     "<title>{}: {} to {}: {}</title></rect>\n",
                     kLeft + static_cast<double>(c), y, e - c, h, html_escape(stage.name),
                     duration_text(at(c)), duration_text(at(e)), html_escape(shares));
    c = e;
  }
}

// Series `which` (0 allocated, 1 reserved, 2 device) of a stage's memory as
// a step line: its value when the window opens, then per half pixel the
// highest value in it and the last, then the last to the window's end.
template <typename YOf>
std::string memory_line(const HtmlPage& page, const HtmlStage& stage, int which, YOf y_of) {
  auto value = [which](const MemorySample& m) {
    return which == 0 ? m.allocated : which == 1 ? m.reserved : m.device;
  };
  Series s;
  Bytes last;
  std::size_t i = 0;
  for (; i < stage.memory.size() && stage.memory[i].at <= page.window_begin; ++i)
    last = value(stage.memory[i]);
  s.add(kLeft, y_of(last));
  while (i < stage.memory.size() && stage.memory[i].at < page.window_end) {
    const auto bucket = std::llround(x_of(page, stage.memory[i].at) * 2);
    Bytes peak;
    for (; i < stage.memory.size() && stage.memory[i].at < page.window_end &&
           std::llround(x_of(page, stage.memory[i].at) * 2) == bucket;
         ++i) {
      peak = std::max(peak, value(stage.memory[i]));
      last = value(stage.memory[i]);
    }
    const double bx = static_cast<double>(bucket) / 2;
    s.add(bx, s.last_y);
    s.add(bx, y_of(peak));
    s.add(bx, y_of(last));
  }
  s.add(kLeft + kPlotWidth, y_of(last));
  return s.points;
}

}  // namespace

std::string svg_open(double width, double height, std::string_view label) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" "
      "viewBox=\"0 0 {0:.0f} {1:.0f}\" role=\"img\" aria-label=\"{2}\">\n",
      width, height, html_escape(label));
}

std::string gib_tick(double gib, double step) {
  if (step >= 1) return fmt::format("{:.0f} GiB", gib);
  if (step >= 0.1) return fmt::format("{:.1f} GiB", gib);
  if (step >= 0.01) return fmt::format("{:.2f} GiB", gib);
  return fmt::format("{:.0f} MiB", gib * 1024);
}

double nice_double_step(double max, int parts) {
  for (double mag = 0.001;; mag *= 10)
    for (double m : {1.0, 2.0, 5.0})
      if (m * mag * parts >= max || mag > 1e12) return m * mag;
}

void Series::add(double x, double y) {
  if (x == last_x && y == last_y) return;
  fmt::format_to(std::back_inserter(points), "{}{:.1f},{:.1f}", points.empty() ? "" : " ", x, y);
  last_x = x;
  last_y = y;
}

std::string_view category_color(TimeCategory c) {
  switch (c) {
    case TimeCategory::kCompute:
      return "#4e79a7";
    case TimeCategory::kOptimizer:
      return "#76b7b2";
    case TimeCategory::kTp:
      return "#f28e2b";
    case TimeCategory::kCp:
      return "#edc948";
    case TimeCategory::kEp:
      return "#b07aa1";
    case TimeCategory::kPp:
      return "#e15759";
    case TimeCategory::kDp:
      return "#59a14f";
    case TimeCategory::kBubble:
      return "#d4d4d4";
  }
  return "#000000";
}

std::string category_label(TimeCategory c) {
  switch (c) {
    case TimeCategory::kCompute:
    case TimeCategory::kOptimizer:
    case TimeCategory::kBubble:
      return std::string(to_string(c));
    default:
      return fmt::format("{} comm", to_string(c));
  }
}

std::string duration_text(SimTime t) {
  const double ns = static_cast<double>(t.ns);
  if (t.ns >= 1'000'000'000) return fmt::format("{:.3f} s", ns / 1e9);
  if (t.ns >= 1'000'000) return fmt::format("{:.3f} ms", ns / 1e6);
  if (t.ns >= 1'000) return fmt::format("{:.1f} us", ns / 1e3);
  return fmt::format("{} ns", t.ns);
}

std::string bytes_text(Bytes b) {
  const double n = static_cast<double>(b.count);
  if (b.count >= (1LL << 30)) return fmt::format("{:.2f} GiB", n / (1LL << 30));
  if (b.count >= (1LL << 20)) return fmt::format("{:.1f} MiB", n / (1LL << 20));
  if (b.count >= (1LL << 10)) return fmt::format("{:.1f} KiB", n / (1LL << 10));
  return fmt::format("{} B", b.count);
}

std::string timeline_svg(const HtmlPage& page) {
  constexpr double kTop = 34, kRow = 26;
  constexpr int kBar = 20;
  const double bottom = kTop + kRow * static_cast<double>(page.stages.size());
  std::string out = svg_open(kWidth, bottom + 26, "timeline of the iteration per stage");
  out.append("<g shape-rendering=\"crispEdges\">\n");
  legend(present(page), 8, &out);
  time_axis(page, kTop - 4, bottom, &out);
  for (std::size_t i = 0; i < page.stages.size(); ++i) {
    const HtmlStage& s = page.stages[i];
    const double y = kTop + kRow * static_cast<double>(i);
    fmt::format_to(
        std::back_inserter(out),
        "<text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
        kLeft - 8, y + kBar / 2 + 4, html_escape(s.name));
    timeline_row(page, s, y, kBar, &out);
  }
  out.append("</g>\n</svg>\n");
  return out;
}

std::string breakdown_svg(const HtmlPage& page) {
  constexpr double kTop = 34, kRow = 26, kBar = 20;
  const double bottom = kTop + kRow * static_cast<double>(page.stages.size());
  std::string out = svg_open(kWidth, bottom + 8, "breakdown of the iteration per stage");
  legend(present(page), 8, &out);
  const double window =
      static_cast<double>(std::max<std::int64_t>(1, (page.window_end - page.window_begin).ns));
  for (std::size_t i = 0; i < page.stages.size(); ++i) {
    const HtmlStage& s = page.stages[i];
    const double y = kTop + kRow * static_cast<double>(i);
    fmt::format_to(
        std::back_inserter(out),
        "<text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
        kLeft - 8, y + kBar / 2 + 4, html_escape(s.name));
    double x = kLeft;
    for (int c = 0; c < kNumTimeCategories; ++c) {
      const auto cat = static_cast<TimeCategory>(c);
      const SimTime t = s.breakdown[cat];
      if (t.ns <= 0) continue;
      const double w = static_cast<double>(t.ns) * kPlotWidth / window;
      fmt::format_to(std::back_inserter(out),
                     "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
                     "fill=\"{}\"><title>{}: {} {} ({:.1f}%)</title></rect>\n",
                     x, y, w, kBar, category_color(cat), html_escape(s.name),
                     html_escape(category_label(cat)), duration_text(t),
                     100.0 * static_cast<double>(t.ns) / window);
      x += w;
    }
  }
  out.append("</svg>\n");
  return out;
}

std::string memory_svg(const HtmlPage& page, const HtmlStage& stage) {
  constexpr double kTop = 26, kPlot = 120;
  const double bottom = kTop + kPlot;
  Bytes top;
  for (const MemorySample& m : stage.memory)
    top = std::max({top, m.allocated, m.reserved, m.device});
  const bool capacity_on_scale =
      page.capacity.count > 0 && page.capacity.count <= top.count + top.count / 2;
  if (capacity_on_scale) top = std::max(top, page.capacity);
  const double max_gib = std::max(top.gib(), 1.0 / 1024);
  const double step = nice_double_step(max_gib, 4);
  const double scale_gib = std::ceil(max_gib / step - 1e-9) * step;
  auto y_of = [&](Bytes b) { return bottom - b.gib() / scale_gib * kPlot; };

  std::string out = svg_open(kWidth, bottom + 24, "memory over time of " + stage.name);
  fmt::format_to(std::back_inserter(out), "<text class=\"label\" x=\"{:.1f}\" y=\"16\">{}</text>\n",
                 kLeft, html_escape(stage.name));
  double lx = kLeft + kPlotWidth - 640;
  for (auto [cls, name] : {std::pair{"allocated", "allocated"}, std::pair{"reserved", "reserved"},
                           std::pair{"device", "device (reserved + NCCL + context)"}}) {
    fmt::format_to(std::back_inserter(out),
                   "<line class=\"{}\" x1=\"{:.1f}\" y1=\"12\" x2=\"{:.1f}\" y2=\"12\"/>"
                   "<text class=\"legend\" x=\"{:.1f}\" y=\"16\">{}</text>\n",
                   cls, lx, lx + 16, lx + 20, name);
    lx += 40 + 7.0 * static_cast<double>(std::string_view(name).size());
  }
  for (double g = 0; g <= scale_gib + step / 2; g += step) {
    const double y = bottom - g / scale_gib * kPlot;
    fmt::format_to(std::back_inserter(out),
                   "<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" "
                   "y2=\"{1:.1f}\"/><text class=\"tick\" x=\"{3:.1f}\" y=\"{4:.1f}\" "
                   "text-anchor=\"end\">{5}</text>\n",
                   kLeft, y, kLeft + kPlotWidth, kLeft - 6, y + 4, gib_tick(g, step));
  }
  time_axis(page, kTop, bottom, &out);
  if (capacity_on_scale) {
    fmt::format_to(std::back_inserter(out),
                   "<line class=\"capacity\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" "
                   "y2=\"{1:.1f}\"><title>capacity {3}</title></line>\n",
                   kLeft, y_of(page.capacity), kLeft + kPlotWidth, bytes_text(page.capacity));
  } else if (page.capacity.count > 0) {
    fmt::format_to(std::back_inserter(out),
                   "<text class=\"tick\" x=\"{:.1f}\" y=\"16\" text-anchor=\"end\">capacity "
                   "{} (off the scale)</text>\n",
                   kLeft + kPlotWidth, bytes_text(page.capacity));
  }
  // Three series, each a step line over half-pixel buckets.
  static constexpr std::array<const char*, 3> kClass = {"allocated", "reserved", "device"};
  for (int which = 0; which < 3; ++which) {
    fmt::format_to(std::back_inserter(out), "<polyline class=\"{}\" points=\"{}\"/>\n",
                   kClass[which], memory_line(page, stage, which, y_of));
  }
  out.append("</svg>\n");
  return out;
}

}  // namespace prism::html
