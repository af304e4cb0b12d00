// What `prism search` prints and writes: the best configurations as a table
// (text), every simulated one as CSV, the JSON report (every simulated
// configuration, OOM ones with the memory they need, and every rejected one
// with Megatron's reason) and the HTML page. docs/search.md documents them.
#pragma once

#include <string>

#include "planning/search.h"
#include "simulation/job.h"

namespace prism {

inline constexpr int kSearchReportVersion = 1;

// The search's header, the `top` best configurations that fit, and their
// peak memory per stage.
std::string format_search_text(const PreparedJob& base, const SearchOutput& out, int top);
// One row per simulated configuration, in rank order.
std::string format_search_csv(const SearchOutput& out);
std::string format_search_json(const PreparedJob& base, const SearchOutput& out);
// The HTML report (report/html_page.h): the header, every configuration on
// a tokens/s per GPU against peak memory scatter, the Pareto front, and the
// text of format_search_text (its `top` best).
std::string format_search_html(const PreparedJob& base, const SearchOutput& out, int top);

}  // namespace prism
