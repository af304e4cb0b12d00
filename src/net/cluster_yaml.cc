#include "net/cluster_yaml.h"

#include <array>
#include <cmath>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "net/yaml_read.h"

namespace prism {
namespace {

// One settable field: its path ("node.gpus") and how to store a scalar.
struct Field {
  std::string_view section;  // "" for top-level fields
  std::string_view key;
  std::function<Status(const YAML::Node&, ClusterSpec*)> set;
};

using yaml::problem;
using yaml::scalar;
using yaml::where;

Field int_field(std::string_view section, std::string_view key, int ClusterSpec::*member) {
  return {section, key, [member](const YAML::Node& n, ClusterSpec* c) -> Status {
            PRISM_ASSIGN_OR_RETURN(const long long v, scalar<long long>(n, "an integer"));
            if (v < 0 || v > (1LL << 30))
              return Status::invalid_argument(fmt::format("out of range (got {})", v));
            c->*member = static_cast<int>(v);
            return Status::ok();
          }};
}

Field double_field(std::string_view section, std::string_view key, double ClusterSpec::*member) {
  return {section, key, [member](const YAML::Node& n, ClusterSpec* c) -> Status {
            PRISM_ASSIGN_OR_RETURN(const double v, scalar<double>(n, "a number"));
            if (!std::isfinite(v))
              return Status::invalid_argument(fmt::format("must be finite (got {})", n.Scalar()));
            c->*member = v;
            return Status::ok();
          }};
}

Field bool_field(std::string_view section, std::string_view key, bool ClusterSpec::*member) {
  return {section, key, [member](const YAML::Node& n, ClusterSpec* c) -> Status {
            PRISM_ASSIGN_OR_RETURN(c->*member, scalar<bool>(n, "true or false"));
            return Status::ok();
          }};
}

Field string_field(std::string_view section, std::string_view key,
                   std::string ClusterSpec::*member) {
  return {section, key, [member](const YAML::Node& n, ClusterSpec* c) -> Status {
            PRISM_ASSIGN_OR_RETURN(c->*member, scalar<std::string>(n, "a string"));
            return Status::ok();
          }};
}

template <typename E, std::size_t N>
Field enum_field(std::string_view section, std::string_view key, E ClusterSpec::*member,
                 std::array<E, N> values) {
  return {section, key, [member, values](const YAML::Node& n, ClusterSpec* c) -> Status {
            PRISM_ASSIGN_OR_RETURN(const std::string s, scalar<std::string>(n, "a name"));
            std::vector<std::string_view> names;
            for (E e : values) {
              if (to_string(e) == s) {
                c->*member = e;
                return Status::ok();
              }
              names.push_back(to_string(e));
            }
            return Status::invalid_argument(
                fmt::format("unknown value \"{}\" (values: {})", s, fmt::join(names, ", ")));
          }};
}

const std::vector<Field>& fields() {
  static const std::vector<Field> kFields{
      string_field("", "name", &ClusterSpec::name),
      string_field("gpu", "model", &ClusterSpec::gpu_model),
      enum_field(
          "gpu", "arch", &ClusterSpec::arch,
          std::array{GpuArch::kVolta, GpuArch::kAmpere, GpuArch::kHopper, GpuArch::kBlackwell}),
      double_field("gpu", "clock_cov", &ClusterSpec::gpu_clock_cov),
      int_field("node", "gpus", &ClusterSpec::gpus_per_node),
      int_field("node", "nvlink_links", &ClusterSpec::nvlink_links),
      double_field("node", "nvlink_link_GBps", &ClusterSpec::nvlink_link_GBps),
      bool_field("node", "nvls", &ClusterSpec::nvls),
      double_field("node", "pcie_GBps", &ClusterSpec::pcie_GBps),
      enum_field("node", "cpu_vendor", &ClusterSpec::cpu_vendor,
                 std::array{CpuVendor::kIntel, CpuVendor::kAmd, CpuVendor::kArm}),
      int_field("network", "nics_per_node", &ClusterSpec::nics_per_node),
      double_field("network", "nic_Gbps", &ClusterSpec::nic_Gbps),
      double_field("network", "latency_us", &ClusterSpec::network_latency_us),
      bool_field("network", "rail_optimized", &ClusterSpec::rail_optimized),
      int_field("fabric", "tiers", &ClusterSpec::fabric_tiers),
      int_field("fabric", "nodes_per_leaf", &ClusterSpec::nodes_per_leaf),
      int_field("fabric", "leaves_per_pod", &ClusterSpec::leaves_per_pod),
      double_field("fabric", "oversubscription", &ClusterSpec::oversubscription),
  };
  return kFields;
}

std::string path_of(std::string_view section, std::string_view key) {
  return section.empty() ? std::string(key) : fmt::format("{}.{}", section, key);
}

std::string known_keys(std::string_view section) {
  std::vector<std::string_view> keys;
  for (const Field& f : fields())
    if (f.section == section) keys.push_back(f.key);
  if (section.empty()) {
    keys.insert(keys.begin(), "preset");
    for (std::string_view s : {"gpu", "node", "network", "fabric", "num_gpus", "num_nodes"})
      keys.push_back(s);
  }
  return fmt::format("{}", fmt::join(keys, ", "));
}

class Parser {
 public:
  explicit Parser(const ClusterYamlContext& context) : context_(context) {}

  Result<ClusterSpec> parse(const YAML::Node& root) {
    if (!root.IsMap()) return error(root.Mark(), "", "the cluster spec must be a mapping");
    ClusterSpec c;
    if (const YAML::Node p = root["preset"]) {
      const Result<std::string> name = scalar<std::string>(p, "a preset name");
      if (!name.is_ok()) return error(p.Mark(), "preset", name.status().message());
      Result<ClusterSpec> preset = cluster_preset(*name);
      if (!preset.is_ok()) return error(p.Mark(), "preset", preset.status().message());
      c = *preset;
    } else {
      c.name = "custom";
    }
    const bool nvlink_given = static_cast<bool>(root["node"] && root["node"]["nvlink_link_GBps"]);
    std::int64_t num_gpus = 0, num_nodes = 0;
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      const YAML::Node& v = kv.second;
      marks_[key] = v.Mark();
      if (key == "preset") continue;
      if (key == "num_gpus" || key == "num_nodes") {
        const Result<long long> parsed = scalar<long long>(v, "an integer");
        if (!parsed.is_ok()) return error(v.Mark(), key, parsed.status().message());
        const long long n = *parsed;
        if (n <= 0) return error(v.Mark(), key, fmt::format("must be > 0 (got {})", n));
        (key == "num_gpus" ? num_gpus : num_nodes) = n;
        continue;
      }
      if (key == "gpu" || key == "node" || key == "network" || key == "fabric") {
        PRISM_RETURN_IF_ERROR(section(key, v, &c));
        continue;
      }
      PRISM_RETURN_IF_ERROR(set(root, "", key, v, &c));
    }
    if (!nvlink_given && !root["preset"]) c.nvlink_link_GBps = nccl_nvlink_link_GBps(c.arch);
    Status s = size_cluster(&c, num_gpus, num_nodes);
    if (!s.is_ok()) return locate(s);
    return c;
  }

 private:
  Status section(const std::string& name, const YAML::Node& node, ClusterSpec* c) {
    if (!node.IsMap()) return error(node.Mark(), name, "expected a mapping");
    for (const auto& kv : node) {
      const std::string key = kv.first.as<std::string>();
      marks_[path_of(name, key)] = kv.second.Mark();
      PRISM_RETURN_IF_ERROR(set(kv.first, name, key, kv.second, c));
    }
    return Status::ok();
  }

  Status set(const YAML::Node& key_node, std::string_view section, const std::string& key,
             const YAML::Node& v, ClusterSpec* c) {
    for (const Field& f : fields()) {
      if (f.section != section || f.key != key) continue;
      Status s = f.set(v, c);
      if (!s.is_ok()) return error(v.Mark(), path_of(section, key), s.message());
      return Status::ok();
    }
    return error(
        key_node.Mark(), path_of(section, key),
        fmt::format("unknown field (fields{}: {})",
                    section.empty() ? "" : fmt::format(" of {}", section), known_keys(section)));
  }

  // Validation errors start with the field's path; point at its line.
  Status locate(const Status& s) const {
    const std::string& m = s.message();
    const std::size_t colon = m.find(':');
    if (colon == std::string::npos || m.substr(0, colon).find(' ') != std::string::npos)
      return Status::invalid_argument(fmt::format("{}: {}", place("", YAML::Mark::null_mark()), m));
    const std::string path = m.substr(0, colon);
    auto it = marks_.find(path);
    const YAML::Mark mark = it != marks_.end() ? it->second : YAML::Mark::null_mark();
    return Status::invalid_argument(
        fmt::format("{}: {}{}", place(path, mark), context_.field_prefix, m));
  }

  std::string place(std::string_view field, const YAML::Mark& m) const {
    if (context_.where) return context_.where(field, m);
    return where(context_.source, m);
  }

  Status error(const YAML::Mark& m, std::string_view field, std::string_view what) const {
    if (field.empty())
      return Status::invalid_argument(fmt::format("{}: {}", place(field, m), what));
    return Status::invalid_argument(
        fmt::format("{}: {}{}: {}", place(field, m), context_.field_prefix, field, what));
  }

  const ClusterYamlContext& context_;
  std::map<std::string, YAML::Mark> marks_;
};

}  // namespace

Result<ClusterSpec> parse_cluster_yaml_node(const YAML::Node& root,
                                            const ClusterYamlContext& context) {
  try {
    return Parser(context).parse(root);
  } catch (const YAML::Exception& e) {  // e.g. a key that is not a scalar
    const std::string place =
        context.where ? context.where("", e.mark) : where(context.source, e.mark);
    return Status::invalid_argument(fmt::format("{}: {}", place, problem(e)));
  }
}

Result<ClusterSpec> parse_cluster_yaml(std::string_view text, std::string_view source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Status::invalid_argument(
        fmt::format("{}: malformed YAML: {}", where(source, e.mark), problem(e)));
  }
  return parse_cluster_yaml_node(root, ClusterYamlContext{std::string(source), "", {}});
}

Result<ClusterSpec> load_cluster_yaml(const std::string& path) {
  PRISM_ASSIGN_OR_RETURN(const YAML::Node root, yaml::load_yaml_file(path));
  return parse_cluster_yaml_node(root, ClusterYamlContext{path, "", {}});
}

Result<ClusterSpec> resolve_cluster(const std::string& preset_or_path) {
  Result<ClusterSpec> preset = cluster_preset(preset_or_path);
  if (preset.is_ok()) return preset;
  if (preset_or_path.find('/') == std::string::npos && !preset_or_path.ends_with(".yaml") &&
      !preset_or_path.ends_with(".yml"))
    return Status::invalid_argument(
        fmt::format("cluster \"{}\" is neither a preset ({}) nor a .yaml file", preset_or_path,
                    fmt::join(cluster_preset_names(), ", ")));
  return load_cluster_yaml(preset_or_path);
}

namespace {

// A YAML double-quoted scalar (JSON's escapes are YAML's too).
std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace

std::string format_cluster_yaml(const ClusterSpec& c) {
  std::string out = fmt::format("name: {}\n", quoted(c.name));
  out += fmt::format(
      "gpu: {{model: {}, arch: {}{}}}\n", quoted(c.gpu_model), to_string(c.arch),
      std::isnan(c.gpu_clock_cov) ? "" : fmt::format(", clock_cov: {}", c.gpu_clock_cov));
  out += fmt::format(
      "node: {{gpus: {}, nvlink_links: {}, nvlink_link_GBps: {}, nvls: {}, pcie_GBps: {}, "
      "cpu_vendor: {}}}\n",
      c.gpus_per_node, c.nvlink_links, c.nvlink_link_GBps, c.nvls, c.pcie_GBps,
      to_string(c.cpu_vendor));
  out += fmt::format(
      "network: {{nics_per_node: {}, nic_Gbps: {}, latency_us: {}, rail_optimized: {}}}\n",
      c.nics_per_node, c.nic_Gbps, c.network_latency_us, c.rail_optimized);
  out += fmt::format(
      "fabric: {{tiers: {}, nodes_per_leaf: {}, leaves_per_pod: {}, oversubscription: {}}}\n",
      c.fabric_tiers, c.nodes_per_leaf, c.leaves_per_pod, c.oversubscription);
  out += fmt::format("num_nodes: {}\n", c.num_nodes);
  return out;
}

}  // namespace prism
