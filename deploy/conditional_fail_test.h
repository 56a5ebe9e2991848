// The conditional fail test of the lifecycle gates: a mixture sequential
// probability ratio test on the members' share of the failures, within
// blocks of consecutive reports, conditioned on each block's failures. It
// needs no base rate, so it spends no evidence learning one; README.md
// ("The conditional fail test") says why its error rate holds.
#pragma once

#include <cstdint>
#include <vector>

namespace weightpath::deploy {

// A block closes once it holds this many member trials and this many
// control trials, counted in arrival order whatever their outcome, so where
// blocks end depends on which side reports, never on what. A failure in a
// block of one side says nothing (its side is known), so both sides are
// required; larger blocks waste more at the end (an open block is not read).
inline constexpr uint32_t kConditionalBlockSide = 8;

// The share of a stage's false-pause rate the conditional test keeps for
// Fisher's test at the horizon; the e-process before it gets the rest.
// Validity holds for any fixed share; 0.7 was chosen on the simulation
// (bench/RESULTS-deploy-gates.md): at 1,000 members / 4,000 control / 2%
// it gives up a little early detection for 2x caught by the horizon.
inline constexpr double kHorizonShareOfFalsePauseRate = 0.7;

// Odds ratios the mixture ranges over: 1 + (rho - 1) 2^k, k = 0..6, each
// weighted 1/7, as the universal test's alternative curves.
std::vector<double> ConditionalOddsRatios(double min_relative_increase);

// ln E over one block with `member_trials` and `control_trials`, of whose
// `failures` `member_failures` were members': for each odds ratio psi,
// psi^x / E[psi^X] with X hypergeometric (the block's failures spread over
// its trials at random), the likelihood ratio of Fisher's noncentral
// hypergeometric law at psi to the central one. Returned per psi (logs).
std::vector<double> LogBlockLikelihoodRatios(const std::vector<double>& odds_ratios,
                                             uint64_t member_trials, uint64_t control_trials,
                                             uint64_t failures, uint64_t member_failures);

// The e-process of one class, fed trial by trial in arrival order.
class ConditionalEProcess {
 public:
  explicit ConditionalEProcess(double min_relative_increase,
                               uint32_t block_side = kConditionalBlockSide);

  void Add(bool member, bool failed);

  // ln of the mixture over the closed blocks: sum_k w_k prod_b LR_b(psi_k).
  double LogEValue() const;

  // Trials counted so far (closed blocks and the open one).
  uint64_t member_trials() const { return member_trials_; }
  uint64_t control_trials() const { return control_trials_; }

 private:
  void CloseBlock();

  std::vector<double> odds_ratios_;
  uint32_t block_side_;
  std::vector<double> log_products_;  // by odds ratio, over closed blocks
  uint64_t block_members_ = 0, block_control_ = 0, block_failures_ = 0, block_member_failures_ = 0;
  uint64_t member_trials_ = 0, control_trials_ = 0;
};

// The test at the horizon: Fisher's exact one-sided p-value, P(X >= x)
// for X hypergeometric (`failures` spread at random over the trials),
// i.e. how surprising that many member failures are if members fail no
// more often than control devices. Exact for any base rate; read once, at
// the horizon.
double FisherUpperTail(uint64_t member_trials, uint64_t control_trials, uint64_t failures,
                       uint64_t member_failures);

// The smallest member/control rate ratio that Fisher's test at `alpha`
// catches with probability `power` by a horizon where `members` and
// `control` trials have concluded at `base_rate` (binomial counts; exact
// sums, no simulation). The conditional e-process can only add to that
// chance, so this is a lower bound on the gate's power. 0 when even members
// failing every time would not be caught (a stage too small).
double DetectableRatio(uint64_t members, uint64_t control, double base_rate, double alpha,
                       double power = 0.8);

}  // namespace weightpath::deploy
