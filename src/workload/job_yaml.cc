#include "workload/job_yaml.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "net/cluster_yaml.h"
#include "net/yaml_read.h"
#include "util/file.h"
#include "util/text_error.h"
#include "workload/job_fields.h"

namespace prism {
namespace {

using Field = JobField;
using yaml::where;

constexpr std::array<std::string_view, 6> kSections{"name",        "model",   "training",
                                                    "parallelism", "cluster", "software"};
constexpr std::array<std::string_view, 4> kModelRequired{"num_layers", "hidden_size",
                                                         "num_attention_heads", "vocab_size"};

// Megatron's command line spells a field with dashes (--grad-reduce-in-fp32);
// a job may too: every key of model, training and parallelism is read with
// its dashes as underscores, Megatron's recompute_granularity as recompute and
// NeMo's fp8_params (FP8 primary weights) as fp8_param_gather.
std::string canonical_key(std::string_view key) {
  std::string k(key);
  std::replace(k.begin(), k.end(), '-', '_');
  if (k == "recompute_granularity") return "recompute";
  if (k == "fp8_params") return "fp8_param_gather";
  return k;
}

std::string known_keys(std::string_view section) {
  std::vector<std::string_view> keys;
  if (section == "model") keys.push_back("preset");
  for (const Field& f : job_fields())
    if (f.section == section) keys.push_back(f.key);
  return fmt::format("{}", fmt::join(keys, ", "));
}

// Field paths ("model.hidden_size") named in a validate_job() message.
std::vector<std::string> paths_in(std::string_view msg) {
  std::vector<std::string> paths;
  std::string token;
  bool first = true;
  auto flush = [&] {
    // A bare section counts only as the message's leading path ("model: ...").
    const std::size_t dot = token.find('.');
    if (dot != std::string::npos || first) {
      const std::string_view section = std::string_view(token).substr(0, dot);
      for (std::string_view s : kSections)
        if (s == section && dot != 0) paths.push_back(token);
    }
    if (!token.empty()) first = false;
    token.clear();
  };
  for (char ch : msg) {
    if (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.')
      token += ch;
    else
      flush();
  }
  flush();
  return paths;
}

class JobParser {
 public:
  JobParser(std::string_view source, const std::vector<std::string>& overrides)
      : source_(source), override_args_(overrides) {}

  Result<JobSpec> parse(YAML::Node root) {
    if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
    if (!root.IsMap()) return error(root.Mark(), "", "the job spec must be a mapping");
    PRISM_RETURN_IF_ERROR(apply_overrides(root));
    JobSpec job;
    job.name = std::filesystem::path(source_).stem().string();
    YAML::Node cluster;
    bool have_model = false, have_cluster = false;
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      const YAML::Node& v = kv.second;
      locs_[key] = place(key, v.Mark());
      if (key == "name") {
        PRISM_RETURN_IF_ERROR(set_value(key, v, &job.name));
        // Reports are JSON (UTF-8) and the name is printed: refused here,
        // not after the simulation.
        if (const auto bad = first_bad_text_byte(job.name)) {
          return error(v.Mark(), key,
                       fmt::format("byte {} (0x{:02x}) is not UTF-8 text or is a control "
                                   "character",
                                   *bad + 1, static_cast<unsigned char>(job.name[*bad])));
        }
      } else if (key == "model") {
        PRISM_RETURN_IF_ERROR(parse_model(v, &job.model));
        have_model = true;
      } else if (key == "training" || key == "parallelism" || key == "software") {
        PRISM_RETURN_IF_ERROR(parse_section(key, v, &job));
      } else if (key == "cluster") {
        cluster = v;  // read last: it is the only section that reads files
        have_cluster = true;
      } else {
        return error(kv.first.Mark(), key,
                     fmt::format("unknown section (sections: {})", fmt::join(kSections, ", ")));
      }
    }
    job.has_model = have_model;
    const YAML::Node& croot = root;
    if (!have_model && croot["training"])
      return error(croot["training"].Mark(), "training",
                   "a job without a model section describes a program, whose training settings "
                   "are its own: remove this section, or give a model");
    if (!have_cluster)
      return error(YAML::Mark::null_mark(), "cluster",
                   "missing section: a preset with a size, e.g. {preset: dgx-h100, num_gpus: 64}");
    PRISM_RETURN_IF_ERROR(parse_cluster(cluster, &job));
    apply_job_defaults(&job);
    const Status s = validate_job(job);
    if (!s.is_ok()) return locate(s);
    return job;
  }

 private:
  struct Override {
    std::vector<std::string> parts;
    YAML::Node value;
    std::string named;  // "--set cluster.key=value"
  };

  // --set section.key=value: the value is parsed as YAML and put into the
  // document; `cluster.*` on a cluster given by name waits for parse_cluster.
  Status apply_overrides(YAML::Node root) {
    for (const std::string& arg : override_args_) {
      const std::string named = "--set " + arg;
      const std::size_t eq = arg.find('=');
      std::vector<std::string> parts;
      if (eq != std::string::npos) {
        std::string_view path = std::string_view(arg).substr(0, eq);
        for (std::size_t dot; (dot = path.find('.')) != std::string_view::npos;) {
          parts.emplace_back(path.substr(0, dot));
          path.remove_prefix(dot + 1);
        }
        parts.emplace_back(path);
      }
      for (const std::string& p : parts)
        if (p.empty()) parts.clear();
      if (parts.size() == 2 && parts[0] != "cluster") parts[1] = canonical_key(parts[1]);
      if (parts.empty())
        return Status::invalid_argument(fmt::format("{}: expected section.key=value", named));
      YAML::Node value;
      try {
        value = YAML::Load(arg.substr(eq + 1));
      } catch (const YAML::Exception& e) {
        return Status::invalid_argument(
            fmt::format("{}: malformed value: {}", named, yaml::problem(e)));
      }
      overrides_[fmt::format("{}", fmt::join(parts, "."))] = named;
      const YAML::Node& croot = root;
      if (parts.size() > 1 && parts[0] == "cluster" && croot["cluster"] &&
          croot["cluster"].IsScalar()) {
        cluster_overrides_.push_back({{parts.begin() + 1, parts.end()}, value, named});
        continue;
      }
      PRISM_RETURN_IF_ERROR(set_path(root, parts, 0, value, named));
    }
    return Status::ok();
  }

  static Status set_path(YAML::Node node, const std::vector<std::string>& parts, std::size_t i,
                         const YAML::Node& value, const std::string& named) {
    if (i + 1 == parts.size()) {
      node[parts[i]] = value;
      return Status::ok();
    }
    if (!node[parts[i]]) node[parts[i]] = YAML::Node(YAML::NodeType::Map);
    YAML::Node child = node[parts[i]];
    if (!child.IsMap())
      return Status::invalid_argument(
          fmt::format("{}: {} is not a mapping", named,
                      fmt::join(parts.begin(), parts.begin() + static_cast<long>(i) + 1, ".")));
    return set_path(child, parts, i + 1, value, named);
  }

  Status parse_model(const YAML::Node& node, ModelSpec* m) {
    if (!node.IsMap()) return error(node.Mark(), "model", "expected a mapping");
    if (const YAML::Node p = node["preset"]) {
      locs_["model.preset"] = place("model.preset", p.Mark());
      std::string name;
      PRISM_RETURN_IF_ERROR(set_value("model.preset", p, &name));
      Result<ModelSpec> preset = model_preset(name);
      if (!preset.is_ok()) return error(p.Mark(), "model.preset", preset.status().message());
      *m = *preset;
    } else {
      for (std::string_view key : kModelRequired)
        if (!node[std::string(key)])
          return error(node.Mark(), "model",
                       fmt::format("missing {}: give a preset ({}) or num_layers, hidden_size, "
                                   "num_attention_heads and vocab_size",
                                   key, fmt::join(model_preset_names(), ", ")));
    }
    JobSpec scratch;
    scratch.model = *m;
    PRISM_RETURN_IF_ERROR(parse_section("model", node, &scratch));
    *m = scratch.model;
    return Status::ok();
  }

  Status parse_section(const std::string& section, const YAML::Node& node, JobSpec* job) {
    if (!node.IsMap()) return error(node.Mark(), section, "expected a mapping");
    std::map<std::string, std::string> spelled;  // canonical key -> as written
    for (const auto& kv : node) {
      const std::string written = kv.first.as<std::string>();
      const std::string key = canonical_key(written);
      if (section == "model" && key == "preset") continue;
      const std::string path = fmt::format("{}.{}", section, key);
      if (const auto [it, fresh] = spelled.try_emplace(key, written); !fresh)
        return error(kv.first.Mark(), path,
                     fmt::format("given twice (as {} and {})", it->second, written));
      const Field* f = find_field(section, key);
      if (f == nullptr)
        return error(kv.first.Mark(), path,
                     fmt::format("unknown field (fields of {}: {})", section, known_keys(section)));
      locs_[path] = place(path, kv.second.Mark());
      if (path == "parallelism.tp_comm_overlap_cfg" && kv.second.IsScalar()) {
        PRISM_RETURN_IF_ERROR(load_tp_comm_overlap_cfg(kv.second, job));
        continue;
      }
      const Status s = f->set(kv.second, job);
      if (!s.is_ok()) return error(kv.second.Mark(), path, s.message());
    }
    return Status::ok();
  }

  static const Field* find_field(std::string_view section, std::string_view key) {
    for (const Field& f : job_fields())
      if (f.section == section && f.key == key) return &f;
    return nullptr;
  }

  // A string-valued setting (the name, a preset, a file).
  Status set_value(const std::string& path, const YAML::Node& v, std::string* out) {
    Result<std::string> s = yaml::scalar<std::string>(v, "a string");
    if (!s.is_ok()) return error(v.Mark(), path, s.status().message());
    *out = std::move(s).value();
    return Status::ok();
  }

  // `tp_comm_overlap_cfg: FILE`: Megatron's --tp-comm-overlap-cfg, a YAML
  // file of Transformer Engine's ub_cfgs (relative to this file).
  Status load_tp_comm_overlap_cfg(const YAML::Node& node, JobSpec* job) {
    const std::string field = "parallelism.tp_comm_overlap_cfg";
    std::string name;
    PRISM_RETURN_IF_ERROR(set_value(field, node, &name));
    std::filesystem::path path(name);
    if (path.is_relative()) path = std::filesystem::path(source_).parent_path() / path;
    const Result<YAML::Node> doc = yaml::load_yaml_file(path.string());
    if (!doc.is_ok()) return error(node.Mark(), field, doc.status().message());
    const Result<TpCommOverlapCfg> cfg = parse_tp_comm_overlap_cfg(*doc);
    if (!cfg.is_ok())
      return error(node.Mark(), field,
                   fmt::format("{}: {}", path.string(), cfg.status().message()));
    job->parallelism.tp_comm_overlap_cfg = *cfg;
    return Status::ok();
  }

  // `cluster: NAME`: a preset becomes {preset: NAME}; a path is loaded (and
  // names itself in errors). Deferred `--set cluster.*` overrides apply here.
  Status load_cluster_doc(const std::string& name, const std::string& at, YAML::Node* doc,
                          std::string* doc_source) const {
    if (cluster_preset(name).is_ok()) {
      *doc = YAML::Node(YAML::NodeType::Map);
      (*doc)["preset"] = name;
    } else if (name.find('/') != std::string::npos || name.ends_with(".yaml") ||
               name.ends_with(".yml")) {
      std::filesystem::path path(name);
      if (path.is_relative()) path = std::filesystem::path(source_).parent_path() / path;
      *doc_source = path.string();
      PRISM_ASSIGN_OR_RETURN(*doc,
                             yaml::load_yaml_file(*doc_source, fmt::format("{}: cluster: ", at)));
    } else {
      return Status::invalid_argument(
          fmt::format("{}: cluster: \"{}\" is neither a cluster preset ({}) nor a .yaml file", at,
                      name, fmt::join(cluster_preset_names(), ", ")));
    }
    if (doc->IsMap())
      for (const Override& o : cluster_overrides_)
        PRISM_RETURN_IF_ERROR(set_path(*doc, o.parts, 0, o.value, o.named));
    return Status::ok();
  }

  // The cluster: a preset name, a cluster YAML path (relative to this file)
  // or an inline cluster spec; any of them must end up with a size.
  Status parse_cluster(const YAML::Node& node, JobSpec* job) {
    const std::string at = place("cluster", node.Mark());
    YAML::Node doc;
    std::string doc_source = source_;
    if (node.IsScalar()) {
      PRISM_RETURN_IF_ERROR(load_cluster_doc(node.Scalar(), at, &doc, &doc_source));
    } else if (node.IsMap()) {
      doc = node;
    } else {
      return Status::invalid_argument(
          fmt::format("{}: cluster: expected a preset name, a cluster YAML path or a mapping", at));
    }
    const YAML::Node& cdoc = doc;
    if (doc.IsMap() && !cdoc["num_gpus"] && !cdoc["num_nodes"])
      return Status::invalid_argument(fmt::format(
          "{}: cluster: give num_gpus or num_nodes (e.g. {{preset: dgx-h100, num_gpus: 64}}, "
          "or --set cluster.num_gpus=64)",
          at));
    if (doc.IsMap())
      for (std::string_view key : {"num_gpus", "num_nodes"})
        if (const YAML::Node n = cdoc[std::string(key)])
          locs_[fmt::format("cluster.{}", key)] = cluster_place(key, n.Mark(), doc_source, at);
    ClusterYamlContext context{doc_source, "cluster.", nullptr};
    context.where = [&](std::string_view field, const YAML::Mark& m) {
      return cluster_place(field, m, doc_source, at);
    };
    PRISM_ASSIGN_OR_RETURN(job->cluster, parse_cluster_yaml_node(doc, context));
    job->num_gpus = job->cluster.num_gpus();
    return Status::ok();
  }

  std::string cluster_place(std::string_view field, const YAML::Mark& m,
                            const std::string& doc_source, const std::string& fallback) const {
    const std::string path = field.empty() ? "cluster" : fmt::format("cluster.{}", field);
    return place(path, m, doc_source, fallback);
  }

  // Where the value at `path` came from: the override that set it, else its
  // line in `source`, else an override that created it, else `fallback`.
  std::string place(const std::string& path, const YAML::Mark& m, const std::string& source,
                    const std::string& fallback) const {
    if (auto it = overrides_.find(path); it != overrides_.end()) return it->second;
    if (m.line >= 0) return where(source, m);
    for (const auto& [p, named] : overrides_)
      if (p.starts_with(path + ".")) return named;
    return fallback;
  }
  std::string place(const std::string& path, const YAML::Mark& m) const {
    return place(path, m, source_, source_);
  }

  Status error(const YAML::Mark& m, const std::string& path, std::string_view what) const {
    if (path.empty())
      return Status::invalid_argument(fmt::format("{}: {}", where(source_, m), what));
    return Status::invalid_argument(fmt::format("{}: {}: {}", place(path, m), path, what));
  }

  // A validate_job() error: point at an override that set one of the fields
  // it names, else at the first of them written in a file, else at its section.
  Status locate(const Status& s) const {
    const std::vector<std::string> paths = paths_in(s.message());
    auto with = [&](const std::string& at) {
      return Status::invalid_argument(fmt::format("{}: {}", at, s.message()));
    };
    for (const std::string& p : paths)
      if (auto it = overrides_.find(p); it != overrides_.end()) return with(it->second);
    for (const std::string& p : paths)
      if (auto it = locs_.find(p); it != locs_.end()) return with(it->second);
    for (const std::string& p : paths) {
      const std::string section = p.substr(0, p.find('.'));
      if (section == "model")
        if (auto it = locs_.find("model.preset"); it != locs_.end()) return with(it->second);
      if (auto it = locs_.find(section); it != locs_.end()) return with(it->second);
    }
    return with(source_);
  }

  std::string source_;
  const std::vector<std::string>& override_args_;
  std::map<std::string, std::string> overrides_;  // path -> "--set path=value"
  std::vector<Override> cluster_overrides_;
  std::map<std::string, std::string> locs_;  // path -> where its value was written
};

}  // namespace

Result<JobSpec> parse_job_yaml(std::string_view text, std::string_view source,
                               const std::vector<std::string>& overrides) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Status::invalid_argument(
        fmt::format("{}: malformed YAML: {}", where(source, e.mark), yaml::problem(e)));
  }
  try {
    return JobParser(source, overrides).parse(root);
  } catch (const YAML::Exception& e) {  // e.g. a key that is not a scalar
    return Status::invalid_argument(fmt::format("{}: {}", where(source, e.mark), yaml::problem(e)));
  }
}

Result<JobSpec> load_job_yaml(const std::string& path, const std::vector<std::string>& overrides) {
  PRISM_ASSIGN_OR_RETURN(const std::string text, read_file(path));
  return parse_job_yaml(text, path, overrides);
}

}  // namespace prism
