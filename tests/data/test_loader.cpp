// The data loader: windows, shuffling, determinism, DP dealing, cursors, epoch wrap, errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <map>
#include <set>

#include "core/error.h"
#include "data/loader.h"
#include "data/shard.h"
#include "tests/data/data_test_util.h"

namespace dt {
namespace {

using testing::ScratchDir;

constexpr int kT = 10;

// Two shards whose token values are unique, so a window is known by its first token:
// shard a holds 0..1000 (100 windows of T = 10), shard b holds 20000..20536 (53 windows). W = 153.
struct Shards {
  ScratchDir dir;
  std::vector<std::string> paths;
  std::vector<std::vector<uint16_t>> tokens;
  explicit Shards(std::vector<int> sizes = {1001, 537}) {
    for (size_t s = 0; s < sizes.size(); ++s) {
      std::vector<uint16_t> t(sizes[s]);
      for (int i = 0; i < sizes[s]; ++i) t[i] = static_cast<uint16_t>(20000 * s + i);
      paths.push_back(dir / ("d_train_" + std::to_string(s) + ".bin"));
      write_shard(paths.back(), t);
      tokens.push_back(std::move(t));
    }
  }
  // Window index in file order from its first token (independent of the loader's bookkeeping).
  int64_t window_of(int32_t first) const {
    int64_t base = 0;
    for (size_t s = 0; s < tokens.size(); ++s) {
      const int64_t offset = first - 20000 * static_cast<int64_t>(s);
      const int64_t n_windows = (static_cast<int64_t>(tokens[s].size()) - 1) / kT;
      if (offset >= 0 && offset < static_cast<int64_t>(tokens[s].size())) {
        EXPECT_EQ(offset % kT, 0) << "a window must start at a multiple of T";
        EXPECT_LT(offset / kT, n_windows);
        return base + offset / kT;
      }
      base += n_windows;
    }
    ADD_FAILURE() << "token " << first << " is in no shard";
    return -1;
  }
};

// One call of next(), outputs poisoned first; checks inputs/targets against the shard data and
// returns the windows (file-order indices) of the batch.
std::vector<int64_t> next_windows(DataLoader& loader, const Shards& sh, int B) {
  std::vector<int32_t> in(B * kT, INT32_MIN), tg(B * kT, INT32_MIN);
  loader.next(in.data(), tg.data());
  std::vector<int64_t> w;
  for (int b = 0; b < B; ++b) {
    const int32_t first = in[b * kT];
    w.push_back(sh.window_of(first));
    // Tokens are consecutive in each shard: the window is first..first+T, whole inside one shard.
    for (int t = 0; t < kT; ++t) {
      EXPECT_EQ(in[b * kT + t], first + t);
      EXPECT_EQ(tg[b * kT + t], first + t + 1) << "targets are inputs shifted by one";
    }
  }
  return w;
}

std::vector<int64_t> stream(DataLoader& loader, const Shards& sh, int B, int steps) {
  std::vector<int64_t> all;
  for (int i = 0; i < steps; ++i) {
    auto w = next_windows(loader, sh, B);
    all.insert(all.end(), w.begin(), w.end());
  }
  return all;
}

TEST(Loader, CountsWindowsAndTokens) {
  Shards sh;
  DataLoader loader(sh.paths, 4, kT, 50257, 1, true);
  EXPECT_EQ(loader.tokens_in_shards(), 1001 + 537);
  EXPECT_EQ(loader.windows_in_shards(), 153);
  EXPECT_EQ(loader.batches_per_epoch(), 38);
  EXPECT_EQ(loader.windows_per_epoch(), 152);
}

TEST(Loader, EvalModeIsFileOrderAndWraps) {
  Shards sh;
  DataLoader loader(sh.paths, 3, kT, 50257, 1, false);
  std::vector<int64_t> all = stream(loader, sh, 3, 51);  // 153 / 3 = 51 batches: exactly one epoch
  for (int64_t i = 0; i < 153; ++i) EXPECT_EQ(all[i], i);
  EXPECT_EQ(loader.cursor(), (LoaderCursor{0, 153}));
  EXPECT_EQ(next_windows(loader, sh, 3), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(loader.cursor(), (LoaderCursor{1, 3}));
}

TEST(Loader, EachShuffledEpochIsAPermutation) {
  Shards sh;
  DataLoader loader(sh.paths, 1, kT, 50257, 7, true);
  std::vector<std::vector<int64_t>> epochs;
  for (int e = 0; e < 3; ++e) {
    epochs.push_back(stream(loader, sh, 1, 153));
    std::vector<int64_t> sorted = epochs.back();
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < 153; ++i) ASSERT_EQ(sorted[i], i) << "epoch " << e;
  }
  std::vector<int64_t> identity(153);
  for (int64_t i = 0; i < 153; ++i) identity[i] = i;
  EXPECT_NE(epochs[0], identity);
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(epochs[1], epochs[2]);
  // Windows from both shards are mixed early on (not shard by shard).
  int from_b = 0;
  for (int i = 0; i < 50; ++i) from_b += epochs[0][i] >= 100;
  EXPECT_GT(from_b, 5);
  EXPECT_LT(from_b, 45);
}

TEST(Loader, SameSeedSameStreamOtherSeedDiffers) {
  Shards sh;
  DataLoader a(sh.paths, 4, kT, 50257, 42, true), b(sh.paths, 4, kT, 50257, 42, true),
      c(sh.paths, 4, kT, 50257, 43, true);
  const auto sa = stream(a, sh, 4, 100), sb = stream(b, sh, 4, 100), sc = stream(c, sh, 4, 100);
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, sc);
}

TEST(Loader, RestoreContinuesTheExactStream) {
  Shards sh;
  for (int k : {0, 5, 37, 38, 60}) {  // includes the last batch of epoch 0 and a point in epoch 1
    DataLoader a(sh.paths, 4, kT, 50257, 9, true);
    stream(a, sh, 4, k);
    const LoaderCursor saved = a.cursor();
    const auto expected = stream(a, sh, 4, 50);  // crosses an epoch boundary
    DataLoader b(sh.paths, 4, kT, 50257, 9, true);
    stream(b, sh, 4, 3);  // some other state first
    b.restore(saved);
    EXPECT_EQ(stream(b, sh, 4, 50), expected) << "k = " << k;
    // The same loader can be rewound too.
    a.restore(saved);
    EXPECT_EQ(stream(a, sh, 4, 50), expected) << "k = " << k;
  }
  DataLoader a(sh.paths, 4, kT, 50257, 9, true);
  const auto first = stream(a, sh, 4, 10);
  a.reset();
  EXPECT_EQ(stream(a, sh, 4, 10), first);
}

TEST(Loader, EpochWrapAround) {
  Shards sh;
  DataLoader loader(sh.paths, 4, kT, 50257, 3, true);
  stream(loader, sh, 4, 38);
  EXPECT_EQ(loader.cursor(), (LoaderCursor{0, 152}));
  next_windows(loader, sh, 4);
  EXPECT_EQ(loader.cursor(), (LoaderCursor{1, 4}));
  // The batch after the wrap is epoch 1's first: the same as a fresh loader restored to epoch 1.
  DataLoader fresh(sh.paths, 4, kT, 50257, 3, true);
  fresh.restore({1, 0});
  DataLoader again(sh.paths, 4, kT, 50257, 3, true);
  stream(again, sh, 4, 38);
  EXPECT_EQ(next_windows(again, sh, 4), next_windows(fresh, sh, 4));
}

// Ranks 0..3 get disjoint windows that together cover the epoch, dealt as specified:
// rank r's b-th window of global step k sits at position k*B*dp + b*dp + r of the epoch's order.
TEST(Loader, DataParallelRanksAreDisjointAndCover) {
  Shards sh({1001, 601});  // 100 + 60 = 160 windows = 20 global batches of 2 x 4
  const int B = 2, dp = 4;
  for (bool shuffle : {true, false}) {
    std::vector<DataLoader> ranks;
    for (int r = 0; r < dp; ++r) ranks.emplace_back(sh.paths, B, kT, 50257, 11, shuffle, r, dp);
    EXPECT_EQ(ranks[0].windows_per_epoch(), 40);
    for (int e = 0; e < 2; ++e) {
      std::set<int64_t> seen;
      for (int k = 0; k < 20; ++k) {
        for (int r = 0; r < dp; ++r) {
          auto w = next_windows(ranks[r], sh, B);
          for (int b = 0; b < B; ++b) {
            EXPECT_TRUE(seen.insert(w[b]).second) << "window " << w[b] << " dealt twice";
            EXPECT_EQ(static_cast<uint64_t>(w[b]), ranks[r].window_at(e, k * B * dp + b * dp + r));
          }
        }
      }
      EXPECT_EQ(seen.size(), 160u) << "epoch " << e << (shuffle ? " shuffled" : " in order");
      for (int r = 0; r < dp; ++r) EXPECT_EQ(ranks[r].cursor(), ranks[0].cursor()) << "cursors agree on all ranks";
    }
  }
}

TEST(Loader, ShardShorterThanAWindowIsNamed) {
  Shards sh({1001, 10});
  try {
    DataLoader loader(sh.paths, 1, kT, 50257, 1, true);
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(sh.paths[1]), std::string::npos) << msg;
    EXPECT_NE(msg.find("10 tokens, fewer than one training window of T+1 = 11"), std::string::npos) << msg;
  }
  DataLoader ok(std::vector<std::string>{sh.paths[0]}, 1, kT, 50257, 1, true);  // the other one alone is fine
  EXPECT_EQ(ok.windows_in_shards(), 100);
}

TEST(Loader, TooFewWindowsForTheGlobalBatch) {
  Shards sh({101});  // 10 windows
  DataLoader fits(sh.paths, 5, kT, 50257, 1, true, 1, 2);
  EXPECT_EQ(fits.batches_per_epoch(), 1);
  try {
    DataLoader loader(sh.paths, 3, kT, 50257, 1, true, 0, 4);
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("10 windows"), std::string::npos) << msg;
    EXPECT_NE(msg.find("3 x 4 = 12"), std::string::npos) << msg;
    EXPECT_NE(msg.find("smaller batch size or sequence length, or more data"), std::string::npos) << msg;
  }
}

TEST(Loader, BadArguments) {
  Shards sh;
  EXPECT_THROW(DataLoader({}, 1, kT, 50257, 1, true), Error);
  EXPECT_THROW(DataLoader(sh.paths, 0, kT, 50257, 1, true), Error);
  EXPECT_THROW(DataLoader(sh.paths, 1, 0, 50257, 1, true), Error);
  EXPECT_THROW(DataLoader(sh.paths, 1, kT, 50257, 1, true, 4, 4), Error);
  EXPECT_THROW(DataLoader(sh.paths, 1, kT, 50257, 1, true, -1, 4), Error);
  DataLoader loader(sh.paths, 1, kT, 50257, 1, true);
  EXPECT_THROW(loader.restore({0, 154}), Error);
}

// Ids are checked as windows are read, not when the loader is built: shard b holds ids up to 20536,
// so with a vocabulary of 20000 the 100 windows of shard a read fine and the first of b is refused,
// named by its shard and offset.
TEST(Loader, IdAtOrAboveVocabIsAnErrorOfTheReadThatMeetsIt) {
  Shards sh;
  EXPECT_THROW(DataLoader(sh.paths, 1, kT, 0, 1, true), Error);
  DataLoader loader(sh.paths, 1, kT, 20000, 1, /*shuffle=*/false);
  std::vector<int32_t> in(kT), tg(kT);
  for (int i = 0; i < 100; ++i) loader.next(in.data(), tg.data());
  try {
    loader.next(in.data(), tg.data());
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("shard " + sh.paths[1] + ": token 20000 at position 0 is >= vocab_size 20000"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("another tokenizer"), std::string::npos) << msg;
  }
  // The offset is the token's within its shard: with vocab 20005 the window starting at 20000 fails at 20005.
  DataLoader later(std::vector<std::string>{sh.paths[1]}, 1, kT, 20005, 1, false);
  try {
    later.next(in.data(), tg.data());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token 20005 at position 5 is"), std::string::npos) << e.what();
  }
}

TEST(Loader, ExpandShardGlob) {
  Shards sh({101, 101, 101});
  const auto paths = expand_shard_glob(sh.dir / "d_train_*.bin");
  EXPECT_EQ(paths, sh.paths);  // sorted
  try {
    expand_shard_glob(sh.dir / "nothing_*.bin");
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("no shard files match"), std::string::npos) << msg;
    EXPECT_NE(msg.find("nothing_*.bin"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace dt
