// The random draws of the backoff jitter, injected so a test can seed them
// (or pin them to a bound) and check the exact schedule.
#pragma once

#include <cstdint>
#include <random>

namespace weightpath::agent {

class RandomSource {
 public:
  virtual ~RandomSource() = default;
  // A value drawn uniformly from [low, high]; `low` when the range is empty.
  virtual double Uniform(double low, double high) = 0;
};

// Mersenne Twister with an explicit seed; the agent seeds it from
// std::random_device so devices rebooting together draw different waits.
class SeededRandomSource : public RandomSource {
 public:
  explicit SeededRandomSource(uint64_t seed) : engine_(seed) {}
  double Uniform(double low, double high) override;

 private:
  std::mt19937_64 engine_;
};

}  // namespace weightpath::agent
