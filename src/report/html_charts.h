// The inline SVG charts of the HTML report (report/html_page.h), and the
// small formatting helpers its sections share. Internal to src/report.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "report/html_page.h"

namespace prism::html {

// The fill of a time category, and the label the page shows for it.
std::string_view category_color(TimeCategory c);
std::string category_label(TimeCategory c);
// "12.345 ms", "850.0 us", "1.234 s".
std::string duration_text(SimTime t);
// "1.50 GiB", "12.0 MiB", "64 B".
std::string bytes_text(Bytes b);

// One row per stage over [window_begin, window_end): its spans, coloured
// by category, on a shared time axis.
std::string timeline_svg(const HtmlPage& page);
// One stacked bar per stage: each category's share of the window.
std::string breakdown_svg(const HtmlPage& page);
// A stage's allocated and reserved memory over the window, with the
// capacity line when it is on scale.
std::string memory_svg(const HtmlPage& page, const HtmlStage& stage);
// Tokens/s per GPU against peak memory: fitting points, the Pareto front
// (marked and joined), out-of-memory points in their own band.
std::string scatter_svg(const std::vector<HtmlPoint>& points, const std::vector<std::size_t>& front,
                        Bytes capacity);

}  // namespace prism::html
