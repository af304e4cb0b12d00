#include "compute/kernel_db.h"

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

namespace prism {
namespace {

constexpr std::string_view kH100 = "H100-SXM5-80GB";

std::string parse_error(std::string_view csv) {
  const Result<KernelDb> db = KernelDb::parse(csv, "k.csv", kH100);
  EXPECT_FALSE(db.is_ok()) << csv;
  if (db.is_ok()) return "";
  EXPECT_EQ(db.status().code(), StatusCode::kInvalidArgument);
  return db.status().message();
}

TEST(KernelDbTest, ParsesRowsOfTheAskedGpu) {
  const Result<KernelDb> db = KernelDb::parse(
      "gpu,signature,us,source\n"
      "H100-SXM5-80GB,gemm bf16 m=8192 n=8192 k=8192,1512.3,measure_kernels.py 2026-11-23\n"
      "A100-SXM4-80GB,gemm bf16 m=8192 n=8192 k=8192,4100,measure_kernels.py\n"
      "H100-SXM5-80GB,mem layernorm_fwd bytes=134217728,52.5,\n",
      "k.csv", kH100);
  ASSERT_TRUE(db.is_ok()) << db.status().message();
  EXPECT_EQ(db->size(), 2u);
  EXPECT_EQ(db->find_us("gemm bf16 m=8192 n=8192 k=8192"), 1512.3);
  EXPECT_EQ(db->find_us(std::string_view("mem layernorm_fwd bytes=134217728")), 52.5);
  EXPECT_EQ(db->find_us("gemm bf16 m=1 n=1 k=1"), std::nullopt);
}

TEST(KernelDbTest, ColumnsByNameExtraColumnsCommentsBlanksCrlfBom) {
  const Result<KernelDb> db = KernelDb::parse(
      "\xEF\xBB\xBF# measured on node 7\r\n"
      "\r\n"
      "us, signature ,  notes,gpu\r\n"
      "  # a comment after blanks\n"
      "12.5,attn_fwd bf16 b=1 hq=16 hkv=2 sq=8192 skv=8192 d=128 causal,warm,H100-SXM5-80GB\r\n"
      "   \n"
      "0,mem adam bytes=0,,H100-SXM5-80GB",  // no final newline; zero is allowed
      "k.csv", kH100);
  ASSERT_TRUE(db.is_ok()) << db.status().message();
  EXPECT_EQ(db->size(), 2u);
  EXPECT_EQ(db->find_us("attn_fwd bf16 b=1 hq=16 hkv=2 sq=8192 skv=8192 d=128 causal"), 12.5);
  EXPECT_EQ(db->find_us("mem adam bytes=0"), 0.0);
}

// Rows `prism calibrate kineto` wrote (source "kineto ...") are taken in a
// training step; any other source, an empty one or none is not.
TEST(KernelDbTest, KinetoSourcesAreInSitu) {
  const Result<KernelDb> db = KernelDb::parse(
      "gpu,signature,us,source,count\n"
      "H100-SXM5-80GB,gemm bf16 m=1 n=1 k=1,5,kineto step.json 2026-11-28,3\n"
      "H100-SXM5-80GB,gemm bf16 m=2 n=1 k=1,5,measure_kernels.py torch 2.11.0,1\n"
      "H100-SXM5-80GB,gemm bf16 m=3 n=1 k=1,5,kinetoish,1\n"
      "H100-SXM5-80GB,gemm bf16 m=4 n=1 k=1,5,,1\n",
      "k.csv", kH100);
  ASSERT_TRUE(db.is_ok()) << db.status().message();
  EXPECT_TRUE(db->find("gemm bf16 m=1 n=1 k=1")->in_situ);
  EXPECT_EQ(db->find("gemm bf16 m=1 n=1 k=1")->us, 5.0);
  EXPECT_FALSE(db->find("gemm bf16 m=2 n=1 k=1")->in_situ);
  EXPECT_FALSE(db->find("gemm bf16 m=3 n=1 k=1")->in_situ);
  EXPECT_FALSE(db->find("gemm bf16 m=4 n=1 k=1")->in_situ);
  EXPECT_EQ(db->find("gemm bf16 m=5 n=1 k=1"), std::nullopt);
  const Result<KernelDb> bare =
      KernelDb::parse("gpu,signature,us\nH100-SXM5-80GB,gemm bf16 m=1 n=1 k=1,5\n", "k.csv", kH100);
  ASSERT_TRUE(bare.is_ok());
  EXPECT_FALSE(bare->find("gemm bf16 m=1 n=1 k=1")->in_situ);
  // merge() keeps the flag of the row that wins.
  KernelDb merged = *bare;
  merged.merge(*db);
  EXPECT_TRUE(merged.find("gemm bf16 m=1 n=1 k=1")->in_situ);
}

TEST(KernelDbTest, HeaderOnlyIsAnEmptyDatabase) {
  const Result<KernelDb> db = KernelDb::parse("gpu,signature,us\n", "k.csv", kH100);
  ASSERT_TRUE(db.is_ok());
  EXPECT_EQ(db->size(), 0u);
}

TEST(KernelDbTest, SameSignatureOnTwoGpusIsFine) {
  const Result<KernelDb> db = KernelDb::parse(
      "gpu,signature,us\nA100-SXM4-80GB,gemm bf16 m=1 n=1 k=1,5\nH100-SXM5-80GB,gemm bf16 m=1 "
      "n=1 k=1,3\n",
      "k.csv", kH100);
  ASSERT_TRUE(db.is_ok());
  EXPECT_EQ(db->find_us("gemm bf16 m=1 n=1 k=1"), 3.0);
}

TEST(KernelDbTest, RejectsMissingHeader) {
  EXPECT_EQ(parse_error(""), "k.csv: no header line (expected gpu,signature,us,source)");
  EXPECT_EQ(parse_error("# only a comment\n\n"),
            "k.csv: no header line (expected gpu,signature,us,source)");
}

TEST(KernelDbTest, RejectsBadHeaders) {
  EXPECT_EQ(parse_error("gpu,signature,source\n"),
            "k.csv:1: header lacks column 'us' (expected gpu,signature,us,source)");
  EXPECT_EQ(parse_error("# c\nH100-SXM5-80GB,gemm bf16 m=1 n=1 k=1,3\n"),
            "k.csv:2: header lacks column 'gpu' (expected gpu,signature,us,source)");
  EXPECT_EQ(parse_error("gpu,signature,us,gpu\n"),
            "k.csv:1: column 'gpu' appears twice in the header");
  EXPECT_EQ(parse_error("gpu,signature,us,\n"), "k.csv:1: empty column name in the header");
}

TEST(KernelDbTest, RejectsBadRows) {
  const std::string h = "gpu,signature,us,source\n";
  EXPECT_EQ(parse_error(h + "H100-SXM5-80GB,gemm bf16 m=1 n=1 k=1,3\n"),
            "k.csv:2: 3 fields where the header has 4");
  EXPECT_EQ(parse_error(h + "H100-SXM5-80GB,gemm bf16 m=1 n=1 k=1,3,a,b\n"),
            "k.csv:2: 5 fields where the header has 4");
  EXPECT_EQ(parse_error(h + "H100-SXM5-80GB,\"gemm bf16 m=1 n=1 k=1\",3,x\n"),
            "k.csv:2: quoted fields are not supported");
  EXPECT_EQ(parse_error(h + " ,gemm bf16 m=1 n=1 k=1,3,x\n"), "k.csv:2: empty gpu");
  EXPECT_EQ(parse_error(h + "H100-SXM5-80GB,  ,3,x\n"), "k.csv:2: empty signature");
  EXPECT_EQ(parse_error(h + "H100-SXM5-80GB,conv bf16 n=3,3,x\n"),
            "k.csv:2: signature 'conv bf16 n=3': unknown kernel kind 'conv' (gemm, attn_fwd, "
            "attn_bwd, mem)");
}

TEST(KernelDbTest, RejectsBadTimes) {
  const std::string h = "gpu,signature,us,source\n# c\n";
  const std::string row = "H100-SXM5-80GB,gemm bf16 m=1 n=1 k=1,";
  EXPECT_EQ(parse_error(h + row + "abc,x\n"), "k.csv:3: us 'abc' is not a number");
  EXPECT_EQ(parse_error(h + row + ",x\n"), "k.csv:3: us '' is not a number");
  EXPECT_EQ(parse_error(h + row + "12us,x\n"), "k.csv:3: us '12us' is not a number");
  EXPECT_EQ(parse_error(h + row + "-3.5,x\n"), "k.csv:3: us -3.5 is negative");
  EXPECT_EQ(parse_error(h + row + "inf,x\n"), "k.csv:3: us 'inf' is not a finite number");
  EXPECT_EQ(parse_error(h + row + "nan,x\n"), "k.csv:3: us 'nan' is not a finite number");
}

TEST(KernelDbTest, RejectsRowsOfOtherGpusToo) {
  // Every row is checked, whichever GPU it is for.
  EXPECT_EQ(parse_error("gpu,signature,us\nA100-SXM4-80GB,gemm bf16 m=1 n=1 k=1,-1\n"),
            "k.csv:2: us -1 is negative");
}

TEST(KernelDbTest, RejectsADuplicateSignatureForOneGpu) {
  EXPECT_EQ(parse_error("gpu,signature,us\n"
                        "H100-SXM5-80GB,gemm bf16 m=1 n=1 k=1,3\n"
                        "\n"
                        "H100-SXM5-80GB, gemm bf16 m=1 n=1 k=1 ,4\n"),
            "k.csv:4: duplicate signature 'gemm bf16 m=1 n=1 k=1' for gpu H100-SXM5-80GB (first "
            "on line 2)");
  EXPECT_EQ(parse_error("gpu,signature,us\n"
                        "A100-SXM4-80GB,mem adam bytes=8,3\n"
                        "A100-SXM4-80GB,mem adam bytes=8,3\n"),
            "k.csv:3: duplicate signature 'mem adam bytes=8' for gpu A100-SXM4-80GB (first on "
            "line 2)");
}

TEST(KernelDbTest, LoadReadsAFileAndNamesItInErrors) {
  const std::string path = testing::TempDir() + "kernel_db_test.csv";
  {
    std::ofstream out(path);
    out << "gpu,signature,us,source\nH100-SXM5-80GB,gemm bf16 m=2 n=2 k=2,7.25,test\n";
  }
  const Result<KernelDb> db = KernelDb::load(path, kH100);
  ASSERT_TRUE(db.is_ok()) << db.status().message();
  EXPECT_EQ(db->find_us("gemm bf16 m=2 n=2 k=2"), 7.25);
  {
    std::ofstream out(path);
    out << "gpu,signature,us\nH100-SXM5-80GB,gemm bf16 m=2 n=2 k=2,x\n";
  }
  const Result<KernelDb> bad = KernelDb::load(path, kH100);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message(), path + ":2: us 'x' is not a number");
  std::remove(path.c_str());

  const Result<KernelDb> missing = KernelDb::load(path + ".none", kH100);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(KernelDbTest, MergeAddsRowsAndTheOtherWins) {
  KernelDb a = *KernelDb::parse(
      "gpu,signature,us\nH100-SXM5-80GB,mem a bytes=1,1\nH100-SXM5-80GB,mem b bytes=1,2\n", "a",
      kH100);
  const KernelDb b = *KernelDb::parse(
      "gpu,signature,us\nH100-SXM5-80GB,mem b bytes=1,20\nH100-SXM5-80GB,mem c bytes=1,30\n", "b",
      kH100);
  a.merge(b);
  EXPECT_EQ(a.size(), 3u);
  EXPECT_EQ(a.find_us("mem a bytes=1"), 1.0);
  EXPECT_EQ(a.find_us("mem b bytes=1"), 20.0);
  EXPECT_EQ(a.find_us("mem c bytes=1"), 30.0);
}

}  // namespace
}  // namespace prism
