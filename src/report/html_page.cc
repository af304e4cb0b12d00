#include "report/html_page.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "report/html_charts.h"

namespace prism {
namespace {

using html::bytes_text;
using html::category_color;
using html::category_label;
using html::duration_text;

constexpr std::string_view kStyle = R"(<style>
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 12px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;margin:6px 0}th,td{padding:3px 10px;border-bottom:1px solid #eee;text-align:right;white-space:nowrap}
th{background:#f4f4f4;font-weight:600}td.l,th.l{text-align:left}
table.facts td{text-align:left;border:none;padding:1px 12px 1px 0}table.facts td:first-child{color:#666}
p.note{color:#8a5300;margin:4px 0}pre{background:#f7f7f7;padding:8px;overflow-x:auto;font-size:12px}p.hint{color:#666;margin:4px 0}
svg{display:block;max-width:100%;height:auto}svg text{font-size:12px;fill:#333}
svg .tick{font-size:11px;fill:#666}svg .grid{stroke:#e6e6e6;stroke-width:1}
svg .allocated{fill:none;stroke:#4e79a7;stroke-width:1.5}svg .reserved{fill:none;stroke:#f28e2b;stroke-width:1.5}
svg .device{fill:none;stroke:#888;stroke-width:1;stroke-dasharray:4 3}svg .capacity{stroke:#d62728;stroke-width:1.5;stroke-dasharray:6 4}
svg .point{fill:#9db4cf;stroke:#4e79a7;stroke-width:1}svg .front-point{fill:#f28e2b;stroke:#a0530a;stroke-width:1.5}
svg .front{fill:none;stroke:#f28e2b;stroke-width:2}svg .oom{stroke:#d62728;stroke-width:2;fill:none}svg .oom-band{fill:#fdf0f0}svg .tip{fill:transparent}
span.swatch{display:inline-block;width:10px;height:10px;margin-right:5px;vertical-align:baseline}
#prism-errors{color:#b00;font-weight:600}div.wide{overflow-x:auto}
</style>
)";

// First in <head>: any later script error is written into the page.
constexpr std::string_view kErrorScript = R"(<script>
window.prismErrors=[];
window.addEventListener('error',function(e){window.prismErrors.push(String(e.message));var l=document.getElementById('prism-errors');if(l){l.hidden=false;var i=document.createElement('li');i.textContent=String(e.message);l.appendChild(i);}});
</script>
)";

// Last in <body>: errors caught before the list existed go into it, and
// the page says it loaded.
constexpr std::string_view kLoadedScript = R"(<script>
(function(){var l=document.getElementById('prism-errors');window.prismErrors.forEach(function(m){if(!l.childNodes.length||l.lastChild.textContent!==m){var i=document.createElement('li');i.textContent=m;l.appendChild(i);}});if(l.childNodes.length)l.hidden=false;document.documentElement.setAttribute('data-prism','loaded');})();
</script>
)";

void append_facts(const HtmlPage& page, std::string* out) {
  out->append("<section id=\"summary\">\n<table class=\"facts\">\n");
  for (const HtmlFact& f : page.facts)
    fmt::format_to(std::back_inserter(*out), "<tr><td>{}</td><td>{}</td></tr>\n",
                   html_escape(f.label), html_escape(f.value));
  out->append("</table>\n");
  for (const std::string& n : page.notes)
    fmt::format_to(std::back_inserter(*out), "<p class=\"note\">{}</p>\n", html_escape(n));
  if (!page.text.empty())
    fmt::format_to(
        std::back_inserter(*out),
        "<details><summary>The summary as printed</summary>\n<pre>{}</pre>\n</details>\n",
        html_escape(page.text));
  out->append("</section>\n");
}

std::string pct(SimTime t, SimTime window) {
  return window.ns > 0 ? fmt::format("{:.1f}%", 100.0 * static_cast<double>(t.ns) /
                                                    static_cast<double>(window.ns))
                       : "-";
}

void append_timeline(const HtmlPage& page, std::string* out) {
  fmt::format_to(std::back_inserter(*out),
                 "<section id=\"timeline\">\n<h2>Timeline of the iteration</h2>\n<p "
                 "class=\"hint\">{} to {}: at every instant one category, compute first, then the "
                 "exposed communication of each group, else the bubble (waiting for peers, "
                 "pipeline fill and drain). Each pixel column is split by the time each category "
                 "takes in it; the breakdown below has the exact sums.</p>\n",
                 duration_text(page.window_begin), duration_text(page.window_end));
  out->append(html::timeline_svg(page));
  out->append("</section>\n");
}

void append_breakdown(const HtmlPage& page, std::string* out) {
  out->append("<section id=\"breakdown\">\n<h2>Breakdown</h2>\n");
  out->append(html::breakdown_svg(page));
  out->append("<div class=\"wide\"><table>\n<tr><th class=\"l\">stage</th>");
  for (int c = 0; c < kNumTimeCategories; ++c) {
    const auto cat = static_cast<TimeCategory>(c);
    fmt::format_to(std::back_inserter(*out),
                   "<th><span class=\"swatch\" style=\"background:{}\">"
                   "</span>{}</th>",
                   category_color(cat), html_escape(category_label(cat)));
  }
  out->append("</tr>\n");
  const SimTime window = page.window_end - page.window_begin;
  for (const HtmlStage& s : page.stages) {
    fmt::format_to(std::back_inserter(*out), "<tr><td class=\"l\">{}</td>", html_escape(s.name));
    for (int c = 0; c < kNumTimeCategories; ++c) {
      const SimTime t = s.breakdown[static_cast<TimeCategory>(c)];
      fmt::format_to(std::back_inserter(*out), "<td>{}<br>{}</td>", duration_text(t),
                     pct(t, window));
    }
    out->append("</tr>\n");
  }
  out->append("</table></div>\n</section>\n");
}

void append_memory(const HtmlPage& page, std::string* out) {
  out->append(
      "<section id=\"memory\">\n<h2>Memory over time</h2>\n<p class=\"hint\">Per stage, the "
      "caching allocator's allocated and reserved bytes, the device total (reserved, NCCL's "
      "buffers and the CUDA context) and the GPU's capacity.</p>\n");
  for (const HtmlStage& s : page.stages) out->append(html::memory_svg(page, s));
  out->append("</section>\n");
}

void append_collectives(const HtmlPage& page, std::string* out) {
  out->append(
      "<section id=\"collectives\">\n<h2>Collectives</h2>\n<p class=\"hint\">Each stage's "
      "communication in the iteration, by op, group and size: what NCCL's tuner picks for it "
      "and how long it took (transfer: every member present to the end; wait: arrival to every "
      "member present).</p>\n<div class=\"wide\"><table>\n<tr><th class=\"l\">stage</th><th "
      "class=\"l\">op</th><th "
      "class=\"l\">kind</th><th class=\"l\">group</th><th>ranks</th><th>nodes</th><th>size</"
      "th><th>calls</th><th class=\"l\">algorithm</th><th class=\"l\">protocol</th><th>channels</"
      "th><th>transfer/call</th><th>wait/call</th><th>transfer total</th></tr>\n");
  for (const HtmlCollective& c : page.collectives) {
    const std::int64_t n = std::max(c.calls, 1);
    fmt::format_to(std::back_inserter(*out),
                   "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td "
                   "class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td "
                   "class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</"
                   "td><td>{}</td></tr>\n",
                   html_escape(c.stage), html_escape(c.op), html_escape(c.kind),
                   html_escape(c.group), c.group_ranks, c.group_nodes, bytes_text(c.bytes), c.calls,
                   html_escape(c.algorithm), html_escape(c.protocol), c.channels,
                   duration_text(SimTime{c.transfer.ns / n}), duration_text(SimTime{c.wait.ns / n}),
                   duration_text(c.transfer));
  }
  if (page.collectives.empty())
    out->append("<tr><td class=\"l\" colspan=\"14\">no communication in the iteration</td></tr>\n");
  out->append("</table></div>\n</section>\n");
}

void append_search(const HtmlPage& page, std::string* out) {
  const std::vector<std::size_t> front = pareto_front(page.points);
  out->append(
      "<section id=\"search\">\n<h2>Tokens/s per GPU against memory</h2>\n<p "
      "class=\"hint\">Every simulated configuration; the Pareto front (no other configuration "
      "is faster with as little memory, or as fast with less) in orange, out-of-memory ones "
      "(at the memory they would need) as red crosses below the axis.</p>\n");
  out->append(html::scatter_svg(page.points, front, page.capacity));
  out->append(
      "<h2>Pareto front</h2>\n<div class=\"wide\"><table id=\"pareto\">\n<tr><th>#</th><th "
      "class=\"l\">configuration</th><th>tokens/s per GPU</th><th>peak memory</th><th "
      "class=\"l\">more</th></tr>\n");
  for (std::size_t k = 0; k < front.size(); ++k) {
    const HtmlPoint& p = page.points[front[k]];
    fmt::format_to(std::back_inserter(*out),
                   "<tr><td>{}</td><td class=\"l\">{}</td><td>{:.1f}</td><td>{}</td><td "
                   "class=\"l\">{}</td></tr>\n",
                   k + 1, html_escape(p.label), p.tokens_per_s_per_gpu, bytes_text(p.peak),
                   html_escape(p.detail));
  }
  if (front.empty())
    out->append("<tr><td class=\"l\" colspan=\"5\">no configuration fits in memory</td></tr>\n");
  out->append("</table></div>\n</section>\n");
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<std::size_t> pareto_front(const std::vector<HtmlPoint>& points) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < points.size(); ++i)
    if (!points[i].oom) order.push_back(i);
  // Least memory first, the fastest first among equals; a point is on the
  // front when it is faster than everything with no more memory, or
  // identical to the front's last point.
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const HtmlPoint &p = points[a], &q = points[b];
    if (p.peak != q.peak) return p.peak < q.peak;
    return p.tokens_per_s_per_gpu > q.tokens_per_s_per_gpu;
  });
  std::vector<std::size_t> front;
  for (std::size_t i : order) {
    const HtmlPoint& p = points[i];
    if (front.empty() || p.tokens_per_s_per_gpu > points[front.back()].tokens_per_s_per_gpu ||
        (p.tokens_per_s_per_gpu == points[front.back()].tokens_per_s_per_gpu &&
         p.peak == points[front.back()].peak))
      front.push_back(i);
  }
  return front;
}

std::string format_html_page(const HtmlPage& page) {
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta "
      "name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  fmt::format_to(std::back_inserter(out), "<title>{}</title>\n", html_escape(page.title));
  out.append(kErrorScript);
  out.append(kStyle);
  fmt::format_to(std::back_inserter(out), "</head>\n<body>\n<h1>{}</h1>\n",
                 html_escape(page.title));
  append_facts(page, &out);
  if (!page.stages.empty()) {
    append_timeline(page, &out);
    append_breakdown(page, &out);
    append_memory(page, &out);
    append_collectives(page, &out);
  }
  if (!page.points.empty()) append_search(page, &out);
  out.append("<ul id=\"prism-errors\" hidden></ul>\n");
  out.append(kLoadedScript);
  out.append("</body>\n</html>\n");
  return out;
}

}  // namespace prism
