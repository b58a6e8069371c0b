// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
// Counter-based: the value at (key, counter) does not depend on call order or on
// which device computes it, so CPU and GPU initialisation give the same numbers.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define DT_HOST_DEVICE __host__ __device__
#else
#define DT_HOST_DEVICE
#endif

namespace dt {

struct PhiloxOut {
  uint32_t v[4];
};

DT_HOST_DEVICE inline PhiloxOut philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
  uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return PhiloxOut{{c0, c1, c2, c3}};
}

// Uniform in (0, 1), from 32 random bits.
DT_HOST_DEVICE inline double philox_u01(uint32_t x) { return (static_cast<double>(x) + 0.5) * (1.0 / 4294967296.0); }

// Element `index` of the stream `stream` under `seed`: uniform in (0, 1).
DT_HOST_DEVICE inline double philox_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return philox_u01(philox4x32(seed, stream, index).v[0]);
}

// Element `index` of the stream `stream` under `seed`: standard normal (Box-Muller, in double).
DT_HOST_DEVICE inline double philox_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  PhiloxOut r = philox4x32(seed, stream, index);
  double u1 = philox_u01(r.v[0]), u2 = philox_u01(r.v[1]);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// A stable 64-bit stream id from a name (FNV-1a), so a tensor's init depends on its name only.
inline uint64_t philox_stream_of(const char* name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *name; ++name) h = (h ^ static_cast<unsigned char>(*name)) * 0x100000001b3ull;
  return h;
}

}  // namespace dt
