// PYTORCH_CUDA_ALLOC_CONF parsing, after c10/cuda/CUDAAllocatorConfig.cpp
// (lexArgs, parseArgs, parseMaxSplitSize, parseGarbageCollectionThreshold,
// parseRoundUpPower2Divisions, parseAllocatorConfig). The token grammar is
// PyTorch's: ',', ':', '[' and ']' are tokens of their own, spaces vanish,
// every option is "key:value" and options are separated by ','. Numbers are
// read strictly (PyTorch's stoi would take "512MB" as 512); everything else
// PyTorch accepts is accepted and everything it refuses is refused.
#include "mem/alloc_config.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <climits>
#include <cstddef>
#include <string>
#include <vector>

namespace prism {
namespace {

constexpr std::int64_t kMiB = 1024 * 1024;
constexpr std::int64_t kLargeBufferMiB = 20;       // kLargeBuffer / 1 MiB
constexpr std::int64_t kMaxRegisterThreads = 128;  // pinned_max_register_threads()

Status conf_error(const std::string& what) {
  return Status::invalid_argument("PYTORCH_CUDA_ALLOC_CONF: " + what);
}

std::vector<std::string> lex(std::string_view conf) {
  std::vector<std::string> tokens;
  std::string buf;
  for (char ch : conf) {
    if (ch == ',' || ch == ':' || ch == '[' || ch == ']') {
      if (!buf.empty()) tokens.push_back(std::move(buf));
      buf.clear();
      tokens.emplace_back(1, ch);
    } else if (ch != ' ') {
      buf.push_back(ch);
    }
  }
  if (!buf.empty()) tokens.push_back(std::move(buf));
  return tokens;
}

bool is_power_of_two(std::int64_t v) {
  return v > 0 && std::has_single_bit(static_cast<std::uint64_t>(v));
}

// Walks the token list; every parse_* consumes one option's tokens.
class Parser {
 public:
  explicit Parser(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {}

  Result<AllocatorConfig> parse() {
    while (i_ < tokens_.size()) {
      const std::string key = tokens_[i_++];
      PRISM_RETURN_IF_ERROR(parse_option(key));
      if (i_ < tokens_.size()) {
        if (tokens_[i_] != ",")
          return conf_error("expected ',' after option " + key + ", found '" + tokens_[i_] + "'");
        ++i_;
      }
    }
    return config_;
  }

 private:
  Status parse_option(const std::string& key) {
    if (key == "max_split_size_mb") return parse_max_split_size();
    if (key == "garbage_collection_threshold") return parse_gc_threshold();
    if (key == "roundup_power2_divisions") return parse_divisions();
    if (key == "expandable_segments") return parse_bool(key, &config_.expandable_segments);
    if (key == "backend") return parse_backend();
    // Host-side options: checked as PyTorch checks them, then ignored.
    bool ignored = false;
    if (key == "release_lock_on_cudamalloc" || key == "release_lock_on_hipmalloc" ||
        key == "pinned_use_cuda_host_register" || key == "pinned_use_hip_host_register" ||
        key == "pinned_use_background_threads")
      return parse_bool(key, &ignored);
    if (key == "pinned_num_register_threads") return parse_register_threads();
    return conf_error("unknown option '" + key + "'");
  }

  // The value token after "key:".
  Result<std::string> value_of(const std::string& key) {
    if (i_ >= tokens_.size() || tokens_[i_] != ":") return conf_error("expected ':' after " + key);
    ++i_;
    if (i_ >= tokens_.size() || is_punct(tokens_[i_])) return conf_error(key + " needs a value");
    return tokens_[i_++];
  }

  static bool is_punct(const std::string& t) { return t == "," || t == ":" || t == "]"; }

  static Result<std::int64_t> to_int(const std::string& option, const std::string& s) {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc::result_out_of_range || (ec == std::errc() && v > INT_MAX))
      return conf_error(option + ":" + s + " is out of range");
    if (ec != std::errc() || end != s.data() + s.size() || v < 0)
      return conf_error(option + ":" + s + " is not a non-negative integer");
    return v;
  }

  Status parse_max_split_size() {
    PRISM_ASSIGN_OR_RETURN(const std::string v, value_of("max_split_size_mb"));
    PRISM_ASSIGN_OR_RETURN(const std::int64_t mb, to_int("max_split_size_mb", v));
    if (mb <= kLargeBufferMiB)
      return conf_error("max_split_size_mb:" + v + " is too small (must be > 20)");
    config_.max_split_size = mb * kMiB;
    return Status::ok();
  }

  Status parse_gc_threshold() {
    PRISM_ASSIGN_OR_RETURN(const std::string v, value_of("garbage_collection_threshold"));
    double t = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), t);
    if (ec != std::errc() || end != v.data() + v.size())
      return conf_error("garbage_collection_threshold:" + v + " is not a number");
    if (!(t > 0.0 && t < 1.0))
      return conf_error("garbage_collection_threshold:" + v + " must be in (0, 1)");
    config_.garbage_collection_threshold = t;
    return Status::ok();
  }

  Status parse_divisions() {
    PRISM_ASSIGN_OR_RETURN(const std::string v, value_of("roundup_power2_divisions"));
    auto& div = config_.roundup_power2_divisions;
    if (v != "[") {  // a single value for every interval
      PRISM_ASSIGN_OR_RETURN(const std::int64_t d, to_int("roundup_power2_divisions", v));
      if (!is_power_of_two(d))
        return conf_error("roundup_power2_divisions:" + v + " is not a power of two");
      div.fill(static_cast<int>(d));
      return Status::ok();
    }
    return parse_division_list();
  }

  // "[256:1,512:2,>:8]": keys are interval starts in MB (powers of two, the
  // interval [key MB, 2 key MB)); the first key also covers every interval
  // below it; ">" covers the last key's interval and every one above it.
  Status parse_division_list() {
    auto& div = config_.roundup_power2_divisions;
    bool first = true;
    std::size_t last_index = 0;
    while (true) {
      if (i_ >= tokens_.size()) return conf_error("roundup_power2_divisions: missing ']'");
      if (tokens_[i_] == "]") break;
      const std::string key = tokens_[i_++];
      PRISM_ASSIGN_OR_RETURN(const std::string v, value_of("roundup_power2_divisions " + key));
      PRISM_ASSIGN_OR_RETURN(const std::int64_t d, to_int("roundup_power2_divisions " + key, v));
      if (d != 0 && !is_power_of_two(d))
        return conf_error("roundup_power2_divisions " + key + ":" + v +
                          " is not a power of two (or 0)");
      if (key == ">") {
        std::fill(div.begin() + static_cast<std::ptrdiff_t>(last_index), div.end(),
                  static_cast<int>(d));
      } else {
        PRISM_ASSIGN_OR_RETURN(const std::int64_t mb, to_int("roundup_power2_divisions", key));
        if (!is_power_of_two(mb))
          return conf_error("roundup_power2_divisions interval " + key +
                            " is not a power of two (keys are MB)");
        const std::size_t index = std::min<std::size_t>(
            std::bit_width(static_cast<std::uint64_t>(mb)) - 1, div.size() - 1);
        if (first) std::fill(div.begin(), div.begin() + static_cast<std::ptrdiff_t>(index), d);
        first = false;
        div[index] = static_cast<int>(d);
        last_index = index;
      }
      if (i_ >= tokens_.size()) return conf_error("roundup_power2_divisions: missing ']'");
      if (tokens_[i_] == ",")
        ++i_;
      else if (tokens_[i_] != "]")
        return conf_error("roundup_power2_divisions: expected ',' or ']' after " + key + ":" + v);
    }
    ++i_;  // the ']'
    return Status::ok();
  }

  Status parse_bool(const std::string& key, bool* out) {
    PRISM_ASSIGN_OR_RETURN(const std::string v, value_of(key));
    if (v != "True" && v != "False") return conf_error(key + ":" + v + " must be True or False");
    *out = v == "True";
    return Status::ok();
  }

  Status parse_backend() {
    PRISM_ASSIGN_OR_RETURN(const std::string v, value_of("backend"));
    if (v == "native") return Status::ok();
    if (v == "cudaMallocAsync")
      return conf_error("backend:cudaMallocAsync is not modelled (only backend:native is)");
    return conf_error("backend:" + v + " is unknown (options are native and cudaMallocAsync)");
  }

  Status parse_register_threads() {
    PRISM_ASSIGN_OR_RETURN(const std::string v, value_of("pinned_num_register_threads"));
    PRISM_ASSIGN_OR_RETURN(const std::int64_t n, to_int("pinned_num_register_threads", v));
    if (!is_power_of_two(n) || n > kMaxRegisterThreads)
      return conf_error("pinned_num_register_threads:" + v + " must be a power of two <= 128");
    return Status::ok();
  }

  std::vector<std::string> tokens_;
  std::size_t i_ = 0;
  AllocatorConfig config_;
};

// The list form that parse_division_list reads back to the same array: the
// first run by its last interval, middle runs interval by interval, the last
// run by its first interval and ">".
std::string divisions_to_string(const std::array<int, AllocatorConfig::kRoundupIntervals>& div) {
  const int n = AllocatorConfig::kRoundupIntervals;
  if (std::all_of(div.begin(), div.end(), [&](int d) { return d == div[0]; }))
    return std::to_string(div[0]);
  std::string s = "[";
  auto entry = [&](const std::string& key, int d) {
    if (s.size() > 1) s += ',';
    s += key;
    s += ':';
    s += std::to_string(d);
  };
  int first_end = 0;
  while (div[first_end + 1] == div[0]) ++first_end;
  int last_begin = n - 1;
  while (div[last_begin - 1] == div[n - 1]) --last_begin;
  for (int i = first_end; i <= last_begin; ++i) entry(std::to_string(1LL << i), div[i]);
  if (last_begin < n - 1) entry(">", div[n - 1]);
  s += ']';
  return s;
}

}  // namespace

std::string AllocatorConfig::to_string() const {
  std::vector<std::string> parts;
  if (max_split_size != kNoLimit)
    parts.push_back("max_split_size_mb:" + std::to_string(max_split_size / kMiB));
  if (std::any_of(roundup_power2_divisions.begin(), roundup_power2_divisions.end(),
                  [](int d) { return d != 0; }))
    parts.push_back("roundup_power2_divisions:" + divisions_to_string(roundup_power2_divisions));
  if (garbage_collection_threshold > 0) {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof(buf), garbage_collection_threshold);
    parts.push_back("garbage_collection_threshold:" + std::string(buf, r.ptr));
  }
  if (expandable_segments) parts.push_back("expandable_segments:True");
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : ",") + p;
  return s;
}

Result<AllocatorConfig> parse_alloc_conf(std::string_view conf) {
  return Parser(lex(conf)).parse();
}

}  // namespace prism
