// Counter-based hashing for dropout masks and deterministic initialisation:
// a pure function of (seed, row, col), so any sharding of a tensor draws the
// same value for the same logical element.
#include <cstdint>

#include "validate/device.hpp"

namespace paraplan::validate {

namespace {

// splitmix64 (Steele, Lea & Flood 2014; Vigna's constants): a bijection on
// 64-bit words with full avalanche.
std::uint64_t mix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

// The column is mixed before it meets the row (and the row is spread by an odd
// constant), so (row, col) and (col, row) or (row + 1, col - 1) do not collide.
std::uint64_t hash_mix(std::uint64_t seed, std::int64_t row, std::int64_t col) {
  const std::uint64_t rc = std::uint64_t(row) * 0xd6e8feb86659fd93ull ^ mix64(std::uint64_t(col));
  return mix64(seed ^ mix64(rc));
}

// Top 53 bits as a double in [0, 1).
double hash_uniform(std::uint64_t seed, std::int64_t row, std::int64_t col) {
  return double(hash_mix(seed, row, col) >> 11) * 0x1.0p-53;
}

}  // namespace paraplan::validate
