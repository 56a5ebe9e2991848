#include "deploy/conditional_fail_test.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace weightpath::deploy {
namespace {

constexpr int kOddsRatios = 7;

double LogChoose(uint64_t n, uint64_t k) {
  return std::lgamma(static_cast<double>(n) + 1) - std::lgamma(static_cast<double>(k) + 1) -
         std::lgamma(static_cast<double>(n - k) + 1);
}

double LogSumExp(const std::vector<double>& terms) {
  double largest = -std::numeric_limits<double>::infinity();
  for (double term : terms) largest = std::max(largest, term);
  if (std::isinf(largest)) return largest;
  double sum = 0;
  for (double term : terms) sum += std::exp(term - largest);
  return largest + std::log(sum);
}

}  // namespace

std::vector<double> ConditionalOddsRatios(double min_relative_increase) {
  std::vector<double> ratios;
  for (int k = 0; k < kOddsRatios; ++k) {
    ratios.push_back(1 + (min_relative_increase - 1) * std::ldexp(1.0, k));
  }
  return ratios;
}

std::vector<double> LogBlockLikelihoodRatios(const std::vector<double>& odds_ratios,
                                             uint64_t member_trials, uint64_t control_trials,
                                             uint64_t failures, uint64_t member_failures) {
  std::vector<double> logs(odds_ratios.size(), 0.0);
  // A block whose failures could only have been on one side says nothing
  // about the split: its ratio is 1 whatever psi.
  const uint64_t low = failures > control_trials ? failures - control_trials : 0;
  const uint64_t high = std::min(failures, member_trials);
  if (low == high) return logs;
  // ln P0(X = y), the central hypergeometric law, for the support.
  std::vector<double> log_null;
  const double log_total = LogChoose(member_trials + control_trials, failures);
  for (uint64_t y = low; y <= high; ++y) {
    log_null.push_back(LogChoose(member_trials, y) + LogChoose(control_trials, failures - y) -
                       log_total);
  }
  for (size_t k = 0; k < odds_ratios.size(); ++k) {
    const double log_psi = std::log(odds_ratios[k]);
    std::vector<double> terms;
    terms.reserve(log_null.size());
    for (uint64_t y = low; y <= high; ++y) {
      terms.push_back(log_null[y - low] + static_cast<double>(y) * log_psi);
    }
    logs[k] = static_cast<double>(member_failures) * log_psi - LogSumExp(terms);
  }
  return logs;
}

ConditionalEProcess::ConditionalEProcess(double min_relative_increase, uint32_t block_side)
    : odds_ratios_(ConditionalOddsRatios(min_relative_increase)),
      block_side_(std::max<uint32_t>(1, block_side)),
      log_products_(odds_ratios_.size(), 0.0) {}

void ConditionalEProcess::Add(bool member, bool failed) {
  (member ? block_members_ : block_control_) += 1;
  (member ? member_trials_ : control_trials_) += 1;
  if (failed) {
    ++block_failures_;
    if (member) ++block_member_failures_;
  }
  if (block_members_ >= block_side_ && block_control_ >= block_side_) CloseBlock();
}

void ConditionalEProcess::CloseBlock() {
  const std::vector<double> logs = LogBlockLikelihoodRatios(
      odds_ratios_, block_members_, block_control_, block_failures_, block_member_failures_);
  for (size_t k = 0; k < logs.size(); ++k) log_products_[k] += logs[k];
  block_members_ = block_control_ = block_failures_ = block_member_failures_ = 0;
}

double ConditionalEProcess::LogEValue() const {
  return LogSumExp(log_products_) - std::log(static_cast<double>(log_products_.size()));
}

double FisherUpperTail(uint64_t member_trials, uint64_t control_trials, uint64_t failures,
                       uint64_t member_failures) {
  const uint64_t low = failures > control_trials ? failures - control_trials : 0;
  const uint64_t high = std::min(failures, member_trials);
  if (member_failures <= low) return 1.0;
  if (member_failures > high) return 0.0;
  const double log_total = LogChoose(member_trials + control_trials, failures);
  std::vector<double> terms;
  for (uint64_t y = member_failures; y <= high; ++y) {
    terms.push_back(LogChoose(member_trials, y) + LogChoose(control_trials, failures - y) -
                    log_total);
  }
  return std::min(1.0, std::exp(LogSumExp(terms)));
}

namespace {

// Binomial(n, p) probabilities for k in [first, last], the range that holds
// all but about 1e-12 of the mass.
struct BinomialRange {
  uint64_t first = 0;
  std::vector<double> probabilities;
};

BinomialRange Binomial(uint64_t n, double p) {
  BinomialRange range;
  const double mean = static_cast<double>(n) * p;
  const double spread = 8 * std::sqrt(static_cast<double>(n) * p * (1 - p)) + 8;
  range.first = static_cast<uint64_t>(std::max(0.0, std::floor(mean - spread)));
  const uint64_t last = std::min<uint64_t>(n, static_cast<uint64_t>(std::ceil(mean + spread)));
  for (uint64_t k = range.first; k <= last; ++k) {
    double log_p = LogChoose(n, k);
    log_p += k == 0 ? 0 : static_cast<double>(k) * std::log(p);
    log_p += k == n ? 0 : static_cast<double>(n - k) * std::log1p(-p);
    range.probabilities.push_back(p <= 0 ? (k == 0 ? 1.0 : 0.0)
                                  : p >= 1 ? (k == n ? 1.0 : 0.0)
                                           : std::exp(log_p));
  }
  return range;
}

// The smallest member share of `failures` that Fisher's test rejects at
// alpha (one past the support: none does). The hypergeometric terms come
// from the top by their ratio, one lgamma in all.
int64_t FirstRejected(uint64_t members, uint64_t control, uint64_t failures, double alpha) {
  const uint64_t low = failures > control ? failures - control : 0;
  const uint64_t high = std::min(failures, members);
  double term = std::exp(LogChoose(members, high) + LogChoose(control, failures - high) -
                         LogChoose(members + control, failures));
  double tail = 0;
  for (uint64_t y = high;; --y) {
    tail += term;
    if (tail > alpha) return static_cast<int64_t>(y) + 1;
    if (y == low) return static_cast<int64_t>(low);  // the whole support rejects
    // P(y - 1) / P(y) = y (control - failures + y) / ((members - y + 1)(failures - y + 1))
    term *= static_cast<double>(y) * static_cast<double>(control - failures + y) /
            (static_cast<double>(members - y + 1) * static_cast<double>(failures - y + 1));
  }
}

// P(Fisher's test at alpha rejects) with members failing at member_rate.
double FisherPower(uint64_t members, uint64_t control, double base_rate, double member_rate,
                   double alpha, std::vector<int64_t>* critical) {
  const BinomialRange x = Binomial(members, member_rate);
  const BinomialRange y = Binomial(control, base_rate);
  double power = 0;
  for (size_t i = 0; i < x.probabilities.size(); ++i) {
    const uint64_t member_failures = x.first + i;
    double rejecting = 0;
    for (size_t j = 0; j < y.probabilities.size(); ++j) {
      const uint64_t failures = member_failures + y.first + j;
      if (failures >= critical->size()) critical->resize(failures + 1, -1);
      int64_t& first_rejected = (*critical)[failures];
      if (first_rejected < 0) first_rejected = FirstRejected(members, control, failures, alpha);
      if (static_cast<int64_t>(member_failures) >= first_rejected) rejecting += y.probabilities[j];
    }
    power += x.probabilities[i] * rejecting;
  }
  return power;
}

}  // namespace

double DetectableRatio(uint64_t members, uint64_t control, double base_rate, double alpha,
                       double power) {
  if (members == 0 || control == 0 || base_rate <= 0 || base_rate >= 1) return 0;
  std::vector<int64_t> critical;
  double low = 1.0;
  double high = 1.0 / base_rate;
  if (FisherPower(members, control, base_rate, 1.0, alpha, &critical) < power) return 0;
  for (int i = 0; i < 30 && high - low > 1e-3; ++i) {
    const double middle = 0.5 * (low + high);
    (FisherPower(members, control, base_rate, std::min(1.0, middle * base_rate), alpha,
                 &critical) >= power
         ? high
         : low) = middle;
  }
  return high;
}

}  // namespace weightpath::deploy
