#include "net/cluster_spec.h"

#include <gtest/gtest.h>

namespace prism {
namespace {

TEST(ClusterSpec, PresetsAreValidAndDistinct) {
  for (std::string_view name : cluster_preset_names()) {
    Result<ClusterSpec> c = cluster_preset(name);
    ASSERT_TRUE(c.is_ok()) << name;
    EXPECT_EQ(c->name, name);
    EXPECT_TRUE(validate_cluster(*c).is_ok()) << name;
  }
  EXPECT_DOUBLE_EQ(cluster_preset("dgx-h100")->nvlink_GBps(), 18 * 20.6);
  EXPECT_DOUBLE_EQ(cluster_preset("dgx-a100")->nvlink_GBps(), 12 * 20.0);
  EXPECT_DOUBLE_EQ(cluster_preset("dgx-a100")->nic_GBps(), 25.0);
  EXPECT_FALSE(cluster_preset("dgx-a100")->nvls);
  EXPECT_TRUE(cluster_preset("dgx-b200")->nvls);
}

TEST(ClusterSpec, UnknownPresetNamesThePresets) {
  Result<ClusterSpec> c = cluster_preset("dgx-z9");
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().message(),
            "unknown cluster preset \"dgx-z9\" (presets: dgx-a100, dgx-h100, hgx-h200, dgx-b200)");
}

TEST(ClusterSpec, SizeFromGpusOrNodes) {
  ClusterSpec c = *cluster_preset("dgx-h100");
  ASSERT_TRUE(size_cluster(&c, 64, 0).is_ok());
  EXPECT_EQ(c.num_nodes, 8);
  EXPECT_EQ(c.num_gpus(), 64);
  ASSERT_TRUE(size_cluster(&c, 0, 3).is_ok());
  EXPECT_EQ(c.num_gpus(), 24);
  ASSERT_TRUE(size_cluster(&c, 4, 0).is_ok());  // part of one node
  EXPECT_EQ(c.gpus_per_node, 4);
  EXPECT_EQ(c.num_nodes, 1);
}

TEST(ClusterSpec, SizeRejections) {
  ClusterSpec c = *cluster_preset("dgx-h100");
  EXPECT_EQ(size_cluster(&c, 12, 0).message(), "num_gpus: 12 is not a whole number of 8-GPU nodes");
  EXPECT_EQ(size_cluster(&c, 8, 1).message(), "give num_gpus or num_nodes, not both");
  EXPECT_EQ(size_cluster(&c, -1, 0).message(), "num_gpus: must be > 0 (got -1)");
}

TEST(ClusterSpec, ValidationNamesTheField) {
  ClusterSpec c = *cluster_preset("dgx-h100");
  c.nic_Gbps = 0;
  EXPECT_EQ(validate_cluster(c).message(),
            "network.nic_Gbps: must be > 0 and at most 100000 (got 0)");
  c = *cluster_preset("dgx-h100");
  c.oversubscription = 0.5;
  EXPECT_EQ(validate_cluster(c).message(),
            "fabric.oversubscription: must be in [1, 1024] (got 0.5)");
  c = *cluster_preset("dgx-h100");
  c.nics_per_node = 16;
  EXPECT_EQ(validate_cluster(c).message(),
            "network.nics_per_node: 16 NICs for 8 GPUs: at most one NIC per GPU is modelled");
  c = *cluster_preset("dgx-h100");
  c.fabric_tiers = 1;
  c.num_nodes = 40;
  EXPECT_EQ(validate_cluster(c).message(),
            "fabric.tiers: a single switch tier holds 32 nodes (fabric.nodes_per_leaf); 40 nodes "
            "need 2 or 3 tiers");
}

TEST(ClusterSpec, RailsSpreadGpusOverNics) {
  ClusterSpec c = *cluster_preset("dgx-h100");
  EXPECT_EQ(c.rail_of_gpu(5), 5);
  c.nics_per_node = 4;
  EXPECT_EQ(c.rail_of_gpu(5), 2);
}

}  // namespace
}  // namespace prism
