#include "compute/kernel_db.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "util/file.h"

namespace prism {
namespace {

constexpr std::string_view kHeaderHint = "gpu,signature,us,source";
constexpr std::array<std::string_view, 4> kKinds{"gemm", "attn_fwd", "attn_bwd", "mem"};

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    out.push_back(trim(line.substr(start, comma - start)));
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

// Column positions of the required fields, and of `source` where there is one.
struct Columns {
  std::size_t count = 0;
  std::size_t gpu = 0, signature = 0, us = 0;
  std::optional<std::size_t> source;
};

class Parser {
 public:
  Parser(std::string_view source, std::string_view gpu) : source_(source), gpu_(gpu) {}

  Result<std::vector<std::pair<std::string, KernelDb::Row>>> run(std::string_view csv);

 private:
  Status error(std::string_view reason) const {
    return Status::invalid_argument(fmt::format("{}:{}: {}", source_, line_no_, reason));
  }
  Status parse_header(const std::vector<std::string_view>& fields);
  Status parse_row(const std::vector<std::string_view>& fields);
  Result<double> parse_us(std::string_view s) const;

  std::string_view source_;
  std::string_view gpu_;
  int line_no_ = 0;
  std::optional<Columns> cols_;
  std::map<std::pair<std::string, std::string>, int, std::less<>> first_line_;
  std::vector<std::pair<std::string, KernelDb::Row>> rows_;  // of gpu_
};

Result<std::vector<std::pair<std::string, KernelDb::Row>>> Parser::run(std::string_view csv) {
  if (csv.starts_with("\xEF\xBB\xBF")) csv.remove_prefix(3);  // UTF-8 byte-order mark
  std::size_t pos = 0;
  while (pos < csv.size()) {
    const std::size_t nl = csv.find('\n', pos);
    const std::string_view raw =
        csv.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? csv.size() : nl + 1;
    ++line_no_;
    const std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#') continue;
    const std::vector<std::string_view> fields = split_fields(line);
    PRISM_RETURN_IF_ERROR(cols_ ? parse_row(fields) : parse_header(fields));
  }
  if (!cols_)
    return Status::invalid_argument(
        fmt::format("{}: no header line (expected {})", source_, kHeaderHint));
  return std::move(rows_);
}

Status Parser::parse_header(const std::vector<std::string_view>& fields) {
  Columns c;
  c.count = fields.size();
  std::array<std::optional<std::size_t>, 3> found;  // gpu, signature, us
  constexpr std::array<std::string_view, 3> kRequired{"gpu", "signature", "us"};
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (fields[i].empty()) return error("empty column name in the header");
    for (std::size_t j = 0; j < i; ++j)
      if (fields[j] == fields[i])
        return error(fmt::format("column '{}' appears twice in the header", fields[i]));
    for (std::size_t r = 0; r < kRequired.size(); ++r)
      if (fields[i] == kRequired[r]) found[r] = i;
    if (fields[i] == "source") c.source = i;
  }
  for (std::size_t r = 0; r < kRequired.size(); ++r)
    if (!found[r])
      return error(
          fmt::format("header lacks column '{}' (expected {})", kRequired[r], kHeaderHint));
  c.gpu = *found[0];
  c.signature = *found[1];
  c.us = *found[2];
  cols_ = c;
  return Status::ok();
}

Result<double> Parser::parse_us(std::string_view s) const {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size())
    return error(fmt::format("us '{}' is not a number", s));
  if (!std::isfinite(v)) return error(fmt::format("us '{}' is not a finite number", s));
  if (v < 0) return error(fmt::format("us {} is negative", s));
  return v;
}

Status Parser::parse_row(const std::vector<std::string_view>& fields) {
  const Columns& c = *cols_;
  for (std::string_view f : fields)
    if (f.starts_with('"')) return error("quoted fields are not supported");
  if (fields.size() != c.count)
    return error(fmt::format("{} fields where the header has {}", fields.size(), c.count));
  const std::string_view gpu = fields[c.gpu];
  const std::string_view sig = fields[c.signature];
  if (gpu.empty()) return error("empty gpu");
  if (sig.empty()) return error("empty signature");
  const std::string_view kind = sig.substr(0, sig.find(' '));
  if (std::find(kKinds.begin(), kKinds.end(), kind) == kKinds.end())
    return error(
        fmt::format("signature '{}': unknown kernel kind '{}' (gemm, attn_fwd, "
                    "attn_bwd, mem)",
                    sig, kind));
  PRISM_ASSIGN_OR_RETURN(const double us, parse_us(fields[c.us]));
  const auto [it, inserted] =
      first_line_.try_emplace({std::string(gpu), std::string(sig)}, line_no_);
  if (!inserted)
    return error(fmt::format("duplicate signature '{}' for gpu {} (first on line {})", sig, gpu,
                             it->second));
  if (gpu == gpu_)
    rows_.emplace_back(
        std::string(sig),
        KernelDb::Row{us, c.source && fields[*c.source].starts_with(kInSituSourcePrefix)});
  return Status::ok();
}

}  // namespace

Result<KernelDb> KernelDb::parse(std::string_view csv, std::string_view source,
                                 std::string_view gpu) {
  PRISM_ASSIGN_OR_RETURN(auto rows, Parser(source, gpu).run(csv));
  KernelDb db;
  for (auto& [sig, row] : rows) db.rows_.emplace(std::move(sig), row);
  return db;
}

Result<KernelDb> KernelDb::load(const std::string& path, std::string_view gpu) {
  PRISM_ASSIGN_OR_RETURN(const std::string text, read_file(path));
  return parse(text, path, gpu);
}

std::optional<KernelDb::Row> KernelDb::find(std::string_view signature) const {
  const auto it = rows_.find(signature);
  if (it == rows_.end()) return std::nullopt;
  return it->second;
}

std::optional<double> KernelDb::find_us(std::string_view signature) const {
  const auto row = find(signature);
  if (!row) return std::nullopt;
  return row->us;
}

void KernelDb::merge(const KernelDb& other) {
  for (const auto& [sig, row] : other.rows_) rows_.insert_or_assign(sig, row);
}

}  // namespace prism
