#include "policy/policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "policy/absl_view.h"
#include "policy/content_version.h"
#include "policy/policy_document.h"
#include "policy/totality.h"

namespace weightpath::policy {
namespace {

// UNSPECIFIED means speed: the faster build wherever there is a choice.
absl::StatusOr<v1::Priority> EffectivePriority(v1::Priority priority) {
  switch (priority) {
    case v1::PRIORITY_UNSPECIFIED:
    case v1::PRIORITY_SPEED:
      return v1::PRIORITY_SPEED;
    case v1::PRIORITY_FIDELITY:
      return v1::PRIORITY_FIDELITY;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "priority ", static_cast<int>(priority), " is not one of speed, fidelity"));
  }
}

}  // namespace

const PathDefinition* Policy::FindPath(std::string_view id) const {
  for (const PathDefinition& path : paths_) {
    if (path.id == id) return &path;
  }
  return nullptr;
}

std::vector<std::string> Policy::ReachablePathNames() const {
  std::vector<std::string> names;
  for (size_t i = 0; i < rules_.size(); ++i) {
    if (!rule_reachable_[i]) continue;
    const std::string& name = rule_paths_[i]->name;
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

std::vector<HardwareClass> Policy::HardwareClassesRoutedTo(std::string_view path_name) const {
  uint32_t bits = 0;
  for (size_t i = 0; i < rules_.size(); ++i) {
    if (rule_paths_[i]->name == path_name) bits |= rule_class_bits_[i];
  }
  std::vector<HardwareClass> classes;
  for (HardwareClass hardware_class : kAllHardwareClasses) {
    if (bits & (uint32_t{1} << static_cast<int>(hardware_class))) classes.push_back(hardware_class);
  }
  return classes;
}

absl::StatusOr<std::shared_ptr<const Policy>> LoadPolicy(std::string_view yaml_text,
                                                         std::string_view source_name,
                                                         const std::atomic<bool>* cancel) {
  ASSIGN_OR_RETURN(PolicyDocument document,
                   ParsePolicyDocument(AbslView(yaml_text), AbslView(source_name), cancel));
  ASSIGN_OR_RETURN(CompiledRules compiled,
                   CompiledRules::Compile(document.rules, document.rules_location));
  ASSIGN_OR_RETURN(TotalityReport totality,
                   CheckTotality(compiled, document.rules_location, cancel));

  std::shared_ptr<Policy> policy(new Policy());
  policy->paths_ = std::move(document.paths);
  policy->rules_ = std::move(document.rules);
  policy->compiled_ = std::move(compiled);
  policy->rule_reachable_ = std::move(totality.rule_reachable);
  policy->rule_class_bits_ = std::move(totality.rule_class_bits);
  for (size_t i = 0; i < policy->rules_.size(); ++i) {
    // The document parser already refused rules naming undefined ids.
    policy->rule_paths_.push_back(policy->FindPath(policy->rules_[i].path_id));
    if (!policy->rule_reachable_[i]) policy->unreachable_rules_.push_back(policy->rules_[i].name);
  }
  policy->version_ = ContentVersion(yaml_text);
  policy->source_name_ = std::string(source_name);
  return std::shared_ptr<const Policy>(std::move(policy));
}

absl::StatusOr<Decision> Evaluate(const Policy& policy, const v1::HardwareProfile& profile,
                                  v1::Priority priority, const Labels& labels) {
  ASSIGN_OR_RETURN(HardwareClass hardware_class, ClassifyHardware(profile));
  return Evaluate(policy, hardware_class, profile, priority, labels);
}

absl::StatusOr<Decision> Evaluate(const Policy& policy, HardwareClass hardware_class,
                                  const v1::HardwareProfile& profile, v1::Priority priority,
                                  const Labels& labels) {
  ASSIGN_OR_RETURN(v1::Priority effective_priority, EffectivePriority(priority));
  const ProfileFacts facts =
      policy.compiled_.FactsFor(hardware_class, profile, effective_priority, labels);
  const int match = policy.compiled_.FirstMatch(facts);
  if (match < 0) {
    // Loading proved the rules total, so this is a bug, not a bad input.
    return absl::InternalError(absl::StrCat("policy ", policy.version(),
                                            " matched no rule for a hardware_class ",
                                            AbslView(HardwareClassName(hardware_class)),
                                            " profile"));
  }
  Decision decision;
  decision.hardware_class = hardware_class;
  decision.rule = &policy.rules_[match];
  decision.path = policy.rule_paths_[match];
  decision.effective_priority = effective_priority;
  return decision;
}

std::vector<std::string> TraceRules(const Policy& policy, const v1::HardwareProfile& profile,
                                    v1::Priority priority, const Labels& labels) {
  absl::StatusOr<v1::Priority> effective_priority = EffectivePriority(priority);
  if (!effective_priority.ok()) return {std::string(effective_priority.status().message())};
  absl::StatusOr<HardwareClass> hardware_class = ClassifyHardware(profile);
  if (!hardware_class.ok()) return {std::string(hardware_class.status().message())};
  const ProfileFacts facts =
      policy.compiled_.FactsFor(*hardware_class, profile, *effective_priority, labels);
  std::vector<std::string> trace;
  bool chosen = false;
  for (size_t i = 0; i < policy.rules_.size(); ++i) {
    const Rule& rule = policy.rules_[i];
    RuleCondition failed = policy.compiled_.FirstFailedCondition(i, facts);
    std::string verdict;
    if (failed != RuleCondition::kMatched) {
      verdict = absl::StrCat("no match (", RuleConditionField(failed), ")");
    } else if (!chosen) {
      verdict = "matched, chosen";
      chosen = true;
    } else {
      verdict = "matched, but an earlier rule was chosen";
    }
    trace.push_back(absl::StrCat(rule.name, " -> ", rule.path_id, ": ", verdict));
  }
  return trace;
}

void FillWeightPathSpec(const PathDefinition& path, v1::WeightPathSpec* out) {
  out->Clear();
  out->set_name(path.name);
  out->set_quantization(path.quantization);
  if (path.group_size.has_value()) out->set_group_size(*path.group_size);
  if (path.bits_per_weight.has_value()) out->set_bits_per_weight(*path.bits_per_weight);
  out->set_fused_cpu_norms(path.fused_cpu_norms);
  out->set_runs_in_vllm(path.runs_in_vllm);
  out->set_verified(path.verified);
  out->set_rationale(path.rationale);
  out->set_build_with(path.build_with);
  for (const std::string& note : path.notes) out->add_notes(note);
  out->set_path_id(path.id);
  for (const ExpectedFigures& figures : path.expected) {
    v1::ExpectedFigures* message = out->add_expected();
    message->set_cpu_model(figures.cpu_model);
    message->set_threads(figures.threads);
    message->set_model(figures.model);
    message->set_condition(figures.condition);
    if (figures.decode_tok_s) message->set_decode_tok_s(*figures.decode_tok_s);
    if (figures.prefill_vs_llama_cpp) {
      message->set_prefill_vs_llama_cpp(*figures.prefill_vs_llama_cpp);
    }
    if (figures.gemm_ms_per_step) message->set_gemm_ms_per_step(*figures.gemm_ms_per_step);
    if (figures.step_ms) message->set_step_ms(*figures.step_ms);
    if (figures.fidelity_exact_matches) {
      message->set_fidelity_exact_matches(*figures.fidelity_exact_matches);
    }
    if (figures.fidelity_prompts) message->set_fidelity_prompts(*figures.fidelity_prompts);
  }
}

void FillEngineKwargs(const PathDefinition& path, google::protobuf::Struct* out) {
  out->Clear();
  // An exported artifact (runs_in_vllm false) takes no engine arguments at all.
  if (!path.runs_in_vllm || path.quantization.empty()) return;
  (*out->mutable_fields())["quantization"].set_string_value(path.quantization);
}

}  // namespace weightpath::policy
