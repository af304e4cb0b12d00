// The inline SVG charts of the HTML report (report/html_page.h), and the
// small formatting helpers its sections share. Internal to src/report: the
// time charts are in html_charts.cc, the search's scatter in
// html_scatter.cc.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "report/html_page.h"

namespace prism::html {

// Horizontal geometry shared by the time charts: labels left of the plot.
inline constexpr double kLeft = 190, kPlotWidth = 880, kRight = 30;
inline constexpr double kWidth = kLeft + kPlotWidth + kRight;

// An <svg> element of that size with an accessible label (escaped).
std::string svg_open(double width, double height, std::string_view label);
// "2 GiB", "0.5 GiB", "0.25 GiB", "512 MiB": a tick of an axis in steps of `step` GiB.
std::string gib_tick(double gib, double step);
// The smallest "1, 2 or 5 times a power of ten" (from 0.001) that cuts
// `max` into at most `parts`.
double nice_double_step(double max, int parts);

// The points of a polyline (SVG's points attribute); a point equal to the
// last one is dropped.
struct Series {
  std::string points;
  double last_x = -1, last_y = -1;
  void add(double x, double y);
};

// The fill of a time category, and the label the page shows for it.
std::string_view category_color(TimeCategory c);
std::string category_label(TimeCategory c);
// "12.345 ms", "850.0 us", "1.234 s".
std::string duration_text(SimTime t);
// "1.50 GiB", "12.0 MiB", "64 B".
std::string bytes_text(Bytes b);

// One row per stage over [window_begin, window_end) on a shared time axis:
// each pixel column split by the time each category takes in it.
std::string timeline_svg(const HtmlPage& page);
// One stacked bar per stage: each category's share of the window.
std::string breakdown_svg(const HtmlPage& page);
// A stage's allocated, reserved and device memory over the window, with
// the capacity line when it is on scale.
std::string memory_svg(const HtmlPage& page, const HtmlStage& stage);
// Tokens/s per GPU against peak memory: fitting points, the Pareto front
// (marked and joined), out-of-memory points in their own band.
std::string scatter_svg(const std::vector<HtmlPoint>& points, const std::vector<std::size_t>& front,
                        Bytes capacity);

}  // namespace prism::html
