// The loader's resident memory does not grow with its data: shards are mapped and a rank touches
// only the windows it reads. The shards are sparse files (a header, then ftruncate), so 2 GB of
// zero tokens (valid ids) cost no disk and no time to make.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "data/loader.h"
#include "data/shard.h"
#include "tests/data/data_test_util.h"

namespace dt {
namespace {

using testing::ScratchDir;

constexpr int64_t kMiB = 1 << 20;

// This process's resident set, in bytes, from /proc/self/status (VmRSS).
int64_t resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmRSS:   1234 kB"
  ADD_FAILURE() << "no VmRSS line in /proc/self/status";
  return -1;
}

// A shard of `n_tokens` zero tokens: the header, then a hole up to the file's length.
void write_sparse_shard(const std::string& path, int64_t n_tokens) {
  int32_t header[kShardHeaderInts] = {kShardMagic, kShardVersion, static_cast<int32_t>(n_tokens)};
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::write(fd, header, sizeof(header)), static_cast<ssize_t>(sizeof(header))) << path;
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(kShardHeaderBytes + 2 * n_tokens)), 0) << path;
  ::close(fd);
}

std::vector<std::string> sparse_shards(const ScratchDir& dir, const std::string& stem, int count, int64_t n_tokens) {
  std::vector<std::string> paths;
  for (int i = 0; i < count; ++i) {
    paths.push_back(dir / (stem + "_train_" + std::to_string(i) + ".bin"));
    write_sparse_shard(paths.back(), n_tokens);
  }
  return paths;
}

constexpr int kB = 8, kT = 1024, kBatches = 64;

// Resident growth from building a shuffled loader over `paths` and reading kBatches batches;
// every token read must be the shards' zero.
int64_t growth_of_reading(const std::vector<std::string>& paths, int64_t expect_windows) {
  std::vector<int32_t> in(kB * kT), tg(kB * kT);
  const int64_t before = resident_bytes();
  DataLoader loader(paths, kB, kT, 50257, 5, /*shuffle=*/true);
  EXPECT_EQ(loader.windows_in_shards(), expect_windows);
  int64_t nonzero = 0;
  for (int i = 0; i < kBatches; ++i) {
    in.assign(in.size(), -1);
    loader.next(in.data(), tg.data());
    for (int32_t id : in) nonzero += id != 0;
  }
  EXPECT_EQ(nonzero, 0) << "the sparse shards hold zeros only";
  return resident_bytes() - before;
}

TEST(LoaderMemory, ResidentMemoryStaysFlatAsTheShardSetGrows) {
  ScratchDir dir;
  const int64_t small_tokens = int64_t{1} << 20, big_tokens = int64_t{1} << 27;  // 2 MiB and 256 MiB per shard
  const auto small = sparse_shards(dir, "small", 4, small_tokens);               // 8 MiB in all
  const auto big = sparse_shards(dir, "big", 8, big_tokens);                     // 2 GiB in all
  const int64_t small_growth = growth_of_reading(small, 4 * ((small_tokens - 1) / kT));
  const int64_t big_growth = growth_of_reading(big, 8 * ((big_tokens - 1) / kT));
  std::printf("resident growth reading %d batches of %d x %d: %.1f MiB over 8 MiB of shards, %.1f MiB over 2 GiB\n",
              kBatches, kB, kT, static_cast<double>(small_growth) / kMiB, static_cast<double>(big_growth) / kMiB);
  EXPECT_LT(big_growth - small_growth, 100 * kMiB) << "2 GiB of shards must not be held in memory";

  // The measure sees a shard read whole (what a loader reading every shard into memory does, per
  // shard): one 256 MiB shard adds at least 200 MiB.
  const int64_t before = resident_bytes();
  const std::vector<uint16_t> whole = load_shard(big[0], 50257);
  const int64_t whole_growth = resident_bytes() - before;
  std::printf("resident growth reading one 256 MiB shard whole: %.1f MiB\n",
              static_cast<double>(whole_growth) / kMiB);
  EXPECT_EQ(static_cast<int64_t>(whole.size()), big_tokens);
  EXPECT_GT(whole_growth, 200 * kMiB);
}

}  // namespace
}  // namespace dt
