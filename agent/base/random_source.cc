#include "agent/base/random_source.h"

namespace weightpath::agent {

double SeededRandomSource::Uniform(double low, double high) {
  if (!(high > low)) return low;
  return std::uniform_real_distribution<double>(low, high)(engine_);
}

}  // namespace weightpath::agent
