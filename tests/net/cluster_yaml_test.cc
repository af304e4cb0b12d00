#include "net/cluster_yaml.h"

#include <cmath>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

namespace prism {
namespace {

TEST(ClusterYaml, PresetWithOverridesAndSize) {
  Result<ClusterSpec> c = parse_cluster_yaml(
      "preset: dgx-h100\nname: pod\nnetwork:\n  nic_Gbps: 200\nfabric: {oversubscription: 2}\n"
      "num_gpus: 1024\n",
      "c.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->name, "pod");
  EXPECT_DOUBLE_EQ(c->nic_Gbps, 200);
  EXPECT_DOUBLE_EQ(c->oversubscription, 2);
  EXPECT_EQ(c->num_nodes, 128);
  EXPECT_TRUE(c->nvls);  // from the preset
}

// What a built graph records of its job's cluster reads back as the same spec.
TEST(ClusterYaml, FormattedSpecsReadBackTheSame) {
  std::vector<ClusterSpec> specs;
  for (std::string_view preset : cluster_preset_names()) specs.push_back(*cluster_preset(preset));
  ClusterSpec odd = *cluster_preset("dgx-h100");
  odd.name = "pod \"7\": a\\b\tc";
  odd.nic_Gbps = 123.456789;
  odd.nics_per_node = 2;
  odd.oversubscription = 1.5;
  odd.network_latency_us = 0.25;
  odd.cpu_vendor = CpuVendor::kArm;
  odd.rail_optimized = false;
  odd.gpu_clock_cov = 0.0125;
  ASSERT_TRUE(size_cluster(&odd, 0, 96).is_ok());
  specs.push_back(odd);
  for (const ClusterSpec& c : specs) {
    const std::string text = format_cluster_yaml(c);
    Result<ClusterSpec> back = parse_cluster_yaml(text, "<graph>");
    ASSERT_TRUE(back.is_ok()) << back.status().message() << "\n" << text;
    EXPECT_EQ(format_cluster_yaml(*back), text);
    EXPECT_EQ(back->name, c.name);
    EXPECT_EQ(back->nic_Gbps, c.nic_Gbps);
    EXPECT_EQ(back->num_nodes, c.num_nodes);
    EXPECT_EQ(back->cpu_vendor, c.cpu_vendor);
    // The clock spread is written only where the cluster gives its own.
    EXPECT_EQ(text.find("clock_cov") != std::string::npos, !std::isnan(c.gpu_clock_cov)) << text;
    if (!std::isnan(c.gpu_clock_cov)) EXPECT_EQ(back->gpu_clock_cov, c.gpu_clock_cov);
  }
}

TEST(ClusterYaml, GpuClockSpreadIsTheClustersOwnOrThePresets) {
  Result<ClusterSpec> own =
      parse_cluster_yaml("preset: dgx-h100\ngpu: {clock_cov: 0.01}\nnum_gpus: 64\n", "c.yaml");
  ASSERT_TRUE(own.is_ok()) << own.status().message();
  EXPECT_DOUBLE_EQ(own->gpu_clock_cov, 0.01);
  EXPECT_EQ(own->gpu_model, "H100-SXM5-80GB");  // the rest of gpu from the preset
  Result<ClusterSpec> none = parse_cluster_yaml("preset: dgx-h100\nnum_gpus: 64\n", "c.yaml");
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(std::isnan(none->gpu_clock_cov));
  EXPECT_TRUE(parse_cluster_yaml("preset: dgx-h100\ngpu: {clock_cov: 0}\n", "c.yaml").is_ok());
}

TEST(ClusterYaml, CustomWithoutPresetTakesNvlinkFromArch) {
  Result<ClusterSpec> c = parse_cluster_yaml(
      "gpu: {arch: ampere}\nnode: {gpus: 4, nvlink_links: 12, pcie_GBps: 24}\n"
      "network: {nics_per_node: 4, nic_Gbps: 100}\nnum_nodes: 2\n",
      "c.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->name, "custom");
  EXPECT_DOUBLE_EQ(c->nvlink_link_GBps, 20.0);
  EXPECT_EQ(c->num_gpus(), 8);
}

struct BadCase {
  const char* text;
  const char* message;
};

class ClusterYamlErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(ClusterYamlErrors, NameTheFieldAndLine) {
  Result<ClusterSpec> c = parse_cluster_yaml(GetParam().text, "c.yaml");
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().message(), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    All, ClusterYamlErrors,
    ::testing::Values(
        BadCase{"preset: dgx-h100\nnode: {gpus: 8, nvlinks: 3}\n",
                "c.yaml:2:17: node.nvlinks: unknown field (fields of node: gpus, nvlink_links, "
                "nvlink_link_GBps, nvls, pcie_GBps, cpu_vendor)"},
        BadCase{"preset: dgx-h100\nnetwork:\n  nic_Gbps: fast\n",
                "c.yaml:3:13: network.nic_Gbps: expected a number (got \"fast\")"},
        BadCase{"preset: dgx-h100\nnetwork:\n  nic_Gbps: -5\n",
                "c.yaml:3:13: network.nic_Gbps: must be > 0 and at most 100000 (got -5)"},
        BadCase{"preset: dgx-q\n",
                "c.yaml:1:9: preset: unknown cluster preset \"dgx-q\" (presets: dgx-a100, "
                "dgx-h100, hgx-h200, dgx-b200)"},
        BadCase{"preset: dgx-h100\ngpu: {arch: pascal}\n",
                "c.yaml:2:13: gpu.arch: unknown value \"pascal\" (values: volta, ampere, hopper, "
                "blackwell)"},
        BadCase{"preset: dgx-h100\ngpu: {clock_cov: 0.2}\n",
                "c.yaml:2:18: gpu.clock_cov: must be in [0, 0.1] (got 0.2)"},
        BadCase{"preset: dgx-h100\ngpu: {clock_cov: -0.01}\n",
                "c.yaml:2:18: gpu.clock_cov: must be in [0, 0.1] (got -0.01)"},
        BadCase{"preset: dgx-h100\ngpu: {clock_cov: .nan}\n",
                "c.yaml:2:18: gpu.clock_cov: must be finite (got .nan)"},
        BadCase{"preset: dgx-h100\nnum_gpus: 12\n",
                "c.yaml:2:11: num_gpus: 12 is not a whole number of 8-GPU nodes"},
        // Found by fuzz/job_yaml: num_gpus was divided by node.gpus 0 (UBSan).
        BadCase{"preset: dgx-h100\nnode: {gpus: 0}\nnum_gpus: 16\n",
                "c.yaml:2:14: node.gpus: must be in [1, 72] (got 0)"},
        BadCase{"preset: dgx-h100\nnum_gpus: 16\nnum_nodes: 2\n",
                "c.yaml: give num_gpus or num_nodes, not both"},
        BadCase{"preset: dgx-h100\nfabric: 3\n", "c.yaml:2:9: fabric: expected a mapping"},
        BadCase{"- 1\n- 2\n", "c.yaml:1:1: the cluster spec must be a mapping"},
        BadCase{"node: {gpus: [1\n",
                "c.yaml:2:1: malformed YAML: a '[' list is not closed with ']'"},
        BadCase{"speed: 3\n",
                "c.yaml:1:1: speed: unknown field (fields: preset, name, gpu, node, network, "
                "fabric, num_gpus, num_nodes)"}));

TEST(ClusterYaml, ResolveRejectsNonPresetNonFile) {
  Result<ClusterSpec> c = resolve_cluster("dgx-h900");
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().message(),
            "cluster \"dgx-h900\" is neither a preset (dgx-a100, dgx-h100, hgx-h200, dgx-b200) nor "
            "a .yaml file");
  EXPECT_FALSE(resolve_cluster("/nonexistent/c.yaml").is_ok());
}

TEST(ClusterYaml, NodeApiPrefixesFieldsAndAsksWhere) {
  const YAML::Node root = YAML::Load("preset: dgx-h100\nnode: {gpus: 8, nvlinks: 3}\n");
  ClusterYamlContext context{"job.yaml", "cluster.", nullptr};
  EXPECT_EQ(parse_cluster_yaml_node(root, context).status().message(),
            "job.yaml:2:17: cluster.node.nvlinks: unknown field (fields of node: gpus, "
            "nvlink_links, nvlink_link_GBps, nvls, pcie_GBps, cpu_vendor)");
  context.where = [](std::string_view field, const YAML::Mark& m) {
    return std::string(field) + "@" + std::to_string(m.line + 1);
  };
  EXPECT_EQ(parse_cluster_yaml_node(YAML::Load("preset: dgx-h100\nnum_gpus: 12\n"), context)
                .status()
                .message(),
            "num_gpus@2: cluster.num_gpus: 12 is not a whole number of 8-GPU nodes");
  Result<ClusterSpec> c =
      parse_cluster_yaml_node(YAML::Load("preset: dgx-a100\nnum_nodes: 3\n"), context);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->num_gpus(), 24);
}

}  // namespace
}  // namespace prism
