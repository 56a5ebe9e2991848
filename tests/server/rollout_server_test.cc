// The server's rollout layer against real stores: SQLite, and one real
// PostgreSQL shared by two "replicas" (two stores, caches and admins on one
// database, as two server processes would have). Time is injected.
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "deploy/rollout_bucket.h"
#include "absl/time/clock.h"
#include "common/proto_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "policy/profile_json.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "server/rollout/rollout_admin.h"
#include "server/rollout/rollout_cache.h"
#include "server/rollout/rollout_metrics.h"
#include "server/rollout/rollout_outcome.h"
#include "server/rollout/rollout_reconciler.h"
#include "server/resolve/rollout_resolve.h"
#include "store/store.h"
#include "tests/store/store_backends.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::server {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;
using store::testing::Backend;
using store::testing::FreshDatabaseUrl;
using store::testing::MakeDevice;

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

v1::HardwareProfile AmxProfile() {
  std::ifstream in(WEIGHTPATH_EXAMPLE_PROFILES_DIR "/intel-sapphire-rapids.json");
  std::stringstream text;
  text << in.rdbuf();
  return policy::ParseProfileJson(text.str(), "intel-sapphire-rapids.json").value();
}

// Agentic devices onto fidelity; stages 1 -> 10 -> 50 -> 100 percent.
v1::Rollout FidelitySpec(const std::string& id) {
  v1::Rollout rollout;
  rollout.set_id(id);
  (*rollout.mutable_selector()->mutable_match_labels())["workload"] = "agentic";
  rollout.mutable_action()->set_set_priority(v1::PRIORITY_FIDELITY);
  for (uint32_t percent : {1u, 10u, 50u, 100u}) {
    v1::RolloutStage* stage = rollout.add_stages();
    stage->set_percent(percent);
    stage->set_min_bake_seconds(600);
    stage->set_min_reporting_devices(1);
    stage->set_report_timeout_seconds(1800);
  }
  rollout.mutable_gates()->set_max_task_failure_delta(0.1);
  rollout.mutable_gates()->set_max_engine_failure_delta(0.2);
  return rollout;
}

// One replica's rollout machinery over its own connection to the database.
struct Replica {
  explicit Replica(const std::string& url, absl::Time* clock)
      : store(store::OpenFleetStore(url).value()),
        registry(std::make_shared<prometheus::Registry>()),
        metrics(registry) {
    RolloutDependencies deps;
    deps.store = store.get();
    deps.cache = &cache;
    deps.metrics = &metrics;
    deps.policy = [] { return policy::DefaultPolicy(); };
    deps.now = [clock] { return *clock; };
    // What the server records in its audit trail (server.cc adds the replica).
    deps.audit = [this](v1::AuditEvent event) {
      absl::MutexLock lock(&audit_mutex);
      audited.push_back(std::move(event));
    };
    admin = std::make_unique<RolloutAdmin>(deps);
    reconciler = std::make_unique<RolloutReconciler>(deps);
  }

  std::string Decide(const std::string& device_id, const std::string& workload) {
    v1::ResolveWeightPathRequest request;
    request.set_device_id(device_id);
    *request.mutable_profile() = AmxProfile();
    request.set_priority(v1::PRIORITY_SPEED);
    (*request.mutable_labels())["workload"] = workload;
    absl::StatusOr<ShapedResolve> shaped = ResolveShaped(
        *policy::DefaultPolicy(), policy::HardwareClass::kX86Cpu, request, *cache.Current());
    EXPECT_THAT(shaped.status(), IsOk());
    return shaped.ok() ? shaped->resolution.decision.path->name : "";
  }

  std::string Metrics() const {
    prometheus::TextSerializer serializer;
    return serializer.Serialize(registry->Collect());
  }

  std::unique_ptr<store::FleetStore> store;
  std::shared_ptr<prometheus::Registry> registry;
  RolloutMetrics metrics;
  RolloutCache cache;
  std::unique_ptr<RolloutAdmin> admin;
  std::unique_ptr<RolloutReconciler> reconciler;

  // The audit events of the steps this replica's reconciler stored.
  std::vector<v1::AuditEvent> Audited() {
    absl::MutexLock lock(&audit_mutex);
    return audited;
  }
  absl::Mutex audit_mutex;
  std::vector<v1::AuditEvent> audited ABSL_GUARDED_BY(audit_mutex);
};

// device-0002 has bucket 34 in rollout "fidelity-agentic" (deploy/README.md):
// a member from the 1% stage on. device-0001 has 8492: in only at 100%.
constexpr char kRolloutId[] = "fidelity-agentic";

void Register(store::FleetStore& store, const std::string& id, const std::string& workload,
              absl::Time seen) {
  v1::Device device = MakeDevice(id, "x86_cpu", "w4a8-amx", "Intel Xeon", seen);
  (*device.mutable_labels())["workload"] = workload;
  ASSERT_THAT(store.UpsertDevices({device}), IsOk());
}

v1::ReportOutcomeRequest Report(const std::string& device, const std::string& rollout,
                                v1::Outcome outcome, absl::Time at) {
  v1::ReportOutcomeRequest report;
  report.set_idempotency_key(absl::StrCat(device, "/", rollout, "/", outcome, "/", absl::ToUnixSeconds(at)));
  report.set_device_id(device);
  report.set_rollout_id(rollout);
  report.set_outcome(outcome);
  *report.mutable_observed_at() = ToProtoTime(at);
  return report;
}

class RolloutServerTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> url = FreshDatabaseUrl(GetParam());
    ASSERT_THAT(url.status(), IsOk());
    url_ = *url;
    replica_ = std::make_unique<Replica>(url_, &now_);
  }

  absl::Time now_ = kT0;
  std::string url_;
  std::unique_ptr<Replica> replica_;
};

TEST_P(RolloutServerTest, CreateStoresTheStartedRolloutWithItsStageClocks) {
  absl::StatusOr<v1::Rollout> created = replica_->admin->Create(FidelitySpec(kRolloutId));
  ASSERT_THAT(created.status(), IsOk());
  EXPECT_EQ(created->state(), v1::ROLLOUT_STATE_PROGRESSING);

  absl::StatusOr<store::StoredRollout> stored = replica_->store->GetRollout(kRolloutId);
  ASSERT_THAT(stored.status(), IsOk());
  ASSERT_EQ(stored->rollout.stage_entered_at_size(), 1) << "stage_entered_at must round-trip";
  EXPECT_EQ(FromProtoTime(stored->rollout.stage_entered_at(0)), kT0);
  EXPECT_EQ(FromProtoTime(stored->rollout.created_at()), kT0);

  now_ += absl::Minutes(1);
  ASSERT_THAT(replica_->admin->Advance(kRolloutId, "").status(), IsOk());
  stored = replica_->store->GetRollout(kRolloutId);
  ASSERT_EQ(stored->rollout.stage_entered_at_size(), 2);
  EXPECT_EQ(FromProtoTime(stored->rollout.stage_entered_at(1)), kT0 + absl::Minutes(1));
  EXPECT_EQ(stored->rollout.current_stage(), 1u);
}

TEST_P(RolloutServerTest, CreateRefusesBadSpecsNamingTheField) {
  v1::Rollout decreasing = FidelitySpec("bad-stages");
  decreasing.mutable_stages(1)->set_percent(1);
  EXPECT_THAT(replica_->admin->Create(decreasing),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rollout.stages[1].percent")));
  v1::Rollout unknown_path = FidelitySpec("bad-path");
  unknown_path.mutable_action()->set_pin_path("no-such-path");
  EXPECT_THAT(replica_->admin->Create(unknown_path),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pin_path")));
  v1::Rollout everyone = FidelitySpec("bad-selector");
  everyone.mutable_selector()->clear_match_labels();
  EXPECT_THAT(replica_->admin->Create(everyone),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rollout.selector")));
  ASSERT_THAT(replica_->admin->Create(FidelitySpec(kRolloutId)).status(), IsOk());
  EXPECT_THAT(replica_->admin->Create(FidelitySpec(kRolloutId)),
              StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(replica_->admin->Get("nope"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(replica_->admin->Get(""), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("id")));
}

TEST_P(RolloutServerTest, OperatorTransitionsNameTheStateTheyCannotLeave) {
  ASSERT_THAT(replica_->admin->Create(FidelitySpec(kRolloutId)).status(), IsOk());
  EXPECT_THAT(replica_->admin->Resume(kRolloutId, ""),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("PROGRESSING")));
  ASSERT_THAT(replica_->admin->Pause(kRolloutId, "looking at logs").status(), IsOk());
  EXPECT_THAT(replica_->admin->Advance(kRolloutId, ""),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("PAUSED")));
  ASSERT_THAT(replica_->admin->Resume(kRolloutId, "").status(), IsOk());
  absl::StatusOr<v1::Rollout> aborted = replica_->admin->Abort(kRolloutId, "wrong build");
  ASSERT_THAT(aborted.status(), IsOk());
  EXPECT_EQ(aborted->state(), v1::ROLLOUT_STATE_ABORTED);
  EXPECT_EQ(aborted->state_reason(), "aborted by operator: wrong build");
  EXPECT_THAT(replica_->admin->Abort(kRolloutId, ""),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("ABORTED")));
  EXPECT_THAT(replica_->admin->Pause("missing", ""), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(RolloutServerTest, ResolveShapesMembersOnlyAndAbortReturnsThem) {
  ASSERT_THAT(replica_->admin->Create(FidelitySpec(kRolloutId)).status(), IsOk());
  EXPECT_EQ(replica_->Decide("device-0002", "agentic"), "w4a16-tinygemm") << "bucket 34 < 100";
  EXPECT_EQ(replica_->Decide("device-0001", "agentic"), "w4a8-amx") << "bucket 8492, not yet";
  EXPECT_EQ(replica_->Decide("device-0002", "chat"), "w4a8-amx") << "outside the selector";

  v1::ResolveWeightPathRequest request;
  request.set_device_id("device-0002");
  *request.mutable_profile() = AmxProfile();
  (*request.mutable_labels())["workload"] = "agentic";
  absl::StatusOr<ShapedResolve> shaped =
      ResolveShaped(*policy::DefaultPolicy(), policy::HardwareClass::kX86Cpu, request,
                    *replica_->cache.Current());
  ASSERT_THAT(shaped.status(), IsOk());
  v1::ResolveWeightPathResponse response;
  ApplyShaping(*shaped, &response);
  EXPECT_EQ(response.rollout().rollout_id(), kRolloutId);
  EXPECT_EQ(response.rollout().bucket(), 34u);
  EXPECT_EQ(response.resolve_interval_seconds(), 300u) << "during_rollout default, timeout/3 = 600";

  ASSERT_THAT(replica_->admin->Abort(kRolloutId, "").status(), IsOk());
  EXPECT_EQ(replica_->Decide("device-0002", "agentic"), "w4a8-amx");
}

TEST_P(RolloutServerTest, ReconcileAdvancesAfterBakeAndEvidenceThenCompletes) {
  Register(*replica_->store, "device-0002", "agentic", kT0);
  Register(*replica_->store, "device-0001", "agentic", kT0);
  ASSERT_THAT(replica_->admin->Create(FidelitySpec(kRolloutId)).status(), IsOk());

  absl::StatusOr<std::vector<ReconcileResult>> pass = replica_->reconciler->ReconcileOnce();
  ASSERT_THAT(pass.status(), IsOk());
  ASSERT_THAT(*pass, SizeIs(1));
  EXPECT_EQ((*pass)[0].step, deploy::RolloutStep::kHold) << (*pass)[0].reason;

  ASSERT_THAT(replica_->store->RecordOutcome(
                  Report("device-0002", kRolloutId, v1::OUTCOME_ENGINE_STARTED, kT0 + absl::Minutes(2)),
                  kT0 + absl::Minutes(2)),
              IsOk());
  now_ = kT0 + absl::Minutes(11);
  pass = replica_->reconciler->ReconcileOnce();
  ASSERT_THAT(pass.status(), IsOk());
  EXPECT_EQ((*pass)[0].step, deploy::RolloutStep::kAdvance) << (*pass)[0].reason;
  EXPECT_TRUE((*pass)[0].stored);
  absl::StatusOr<v1::Rollout> after = replica_->admin->Get(kRolloutId);
  EXPECT_EQ(after->current_stage(), 1u);
  EXPECT_EQ(after->members().engine_started(), 1u);
  EXPECT_EQ(after->members().devices(), 1u);
  EXPECT_EQ(after->control().devices(), 1u);
  EXPECT_THAT(replica_->Metrics(), HasSubstr("weightpath_rollout_stage{rollout=\"fidelity-agentic\"} 1"));
  EXPECT_THAT(replica_->Metrics(),
              HasSubstr("weightpath_rollout_state{rollout=\"fidelity-agentic\",state=\"progressing\"} 1"));
  // Stage 2 of 4, admitting 10% of the selected devices; one member and one
  // control device, the member reporting.
  const std::string metrics = replica_->Metrics();
  EXPECT_THAT(metrics, HasSubstr("weightpath_rollout_stages{rollout=\"fidelity-agentic\"} 4"));
  EXPECT_THAT(metrics, HasSubstr("weightpath_rollout_stage_fraction{rollout=\"fidelity-agentic\"} 0.1"));
  EXPECT_THAT(metrics, HasSubstr("weightpath_rollout_cohort_devices{cohort=\"member\",rollout=\"fidelity-agentic\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("weightpath_rollout_cohort_devices{cohort=\"control\",rollout=\"fidelity-agentic\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("weightpath_rollout_cohort_reporting{cohort=\"member\",rollout=\"fidelity-agentic\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("weightpath_rollout_gate_max_delta{gate=\"engine\",rollout=\"fidelity-agentic\"} 0.2"));
  EXPECT_THAT(metrics, HasSubstr("weightpath_rollout_gate_failure_ratio{cohort=\"member\",gate=\"engine\",rollout=\"fidelity-agentic\"} 0"));
}

TEST_P(RolloutServerTest, SequentialGatesShowTheirEvidenceThresholdAndVerdictAsMetrics) {
  Register(*replica_->store, "device-0002", "agentic", kT0);
  Register(*replica_->store, "device-0001", "agentic", kT0);
  v1::Rollout spec = FidelitySpec(kRolloutId);
  spec.mutable_gates()->mutable_sequential()->set_false_pause_rate(0.01);
  ASSERT_THAT(replica_->admin->Create(spec).status(), IsOk());
  const absl::Time at = kT0 + absl::Minutes(1);
  OutcomeContext context{replica_->store.get(), &replica_->cache, &replica_->metrics, std::nullopt, at};
  ASSERT_THAT(HandleReportOutcome(Report("device-0002", kRolloutId, v1::OUTCOME_ENGINE_STARTED, at), context)
                  .status(),
              IsOk());
  ASSERT_THAT(HandleReportOutcome(Report("device-0001", "", v1::OUTCOME_ENGINE_STARTED, at), context)
                  .status(),
              IsOk());
  ASSERT_THAT(replica_->reconciler->ReconcileOnce().status(), IsOk());
  absl::StatusOr<v1::Rollout> judged = replica_->admin->Get(kRolloutId);
  ASSERT_THAT(judged.status(), IsOk());
  ASSERT_GT(judged->sequential_gates_size(), 0);
  const v1::SequentialGateStatus& gate = judged->sequential_gates(0);
  const std::string metrics = replica_->Metrics();
  const std::string labels = absl::StrCat("gate=\"", gate.gate(), "\",rollout=\"fidelity-agentic\"");
  // The threshold is the stage's share of the false-pause rate, inverted.
  EXPECT_GT(gate.threshold(), 100);
  EXPECT_THAT(metrics, HasSubstr(absl::StrCat("weightpath_rollout_sequential_gate_threshold{", labels, "} ")));
  EXPECT_THAT(metrics, HasSubstr(absl::StrCat("weightpath_rollout_sequential_gate_verdict{", labels,
                                              ",verdict=\"", gate.verdict(), "\"} 1")));
  EXPECT_THAT(metrics, HasSubstr(absl::StrCat("weightpath_rollout_sequential_gate_e_value{evidence=\"fail\",",
                                              labels, "}")));
  EXPECT_THAT(metrics, HasSubstr(absl::StrCat("weightpath_rollout_sequential_gate_e_value{evidence=\"pass\",",
                                              labels, "}")));
  // Per hardware class and cohort, the counts the gate judged.
  ASSERT_GT(gate.classes_size(), 0);
  for (const v1::SequentialGateClass& counts : gate.classes()) {
    const std::string class_labels = absl::StrCat("gate=\"", gate.gate(), "\",hardware_class=\"",
                                                  counts.hardware_class(), "\",rollout=\"fidelity-agentic\"");
    EXPECT_THAT(metrics, HasSubstr(absl::StrCat(
                             "weightpath_rollout_sequential_gate_class_reports{cohort=\"member\",count=\"trials\",",
                             class_labels, "} ", counts.member_trials())));
    EXPECT_THAT(metrics, HasSubstr(absl::StrCat(
                             "weightpath_rollout_sequential_gate_class_reports{cohort=\"control\",count=\"failures\",",
                             class_labels, "} ", counts.control_failures())));
  }
}

TEST_P(RolloutServerTest, TaskFailuresInTheCohortPauseTheRolloutAndCountTheBreach) {
  Register(*replica_->store, "device-0002", "agentic", kT0);
  Register(*replica_->store, "device-0001", "agentic", kT0);
  ASSERT_THAT(replica_->admin->Create(FidelitySpec(kRolloutId)).status(), IsOk());
  const absl::Time at = kT0 + absl::Minutes(1);
  OutcomeContext context{replica_->store.get(), &replica_->cache, &replica_->metrics, std::nullopt, at};
  ASSERT_THAT(HandleReportOutcome(Report("device-0002", kRolloutId, v1::OUTCOME_ENGINE_STARTED, at), context)
                  .status(),
              IsOk());
  v1::ReportOutcomeRequest tasks = Report("device-0002", kRolloutId, v1::OUTCOME_TASKS, at);
  tasks.set_tasks_completed(2);
  tasks.set_tasks_undone(8);
  ASSERT_THAT(HandleReportOutcome(tasks, context).status(), IsOk());
  v1::ReportOutcomeRequest control = Report("device-0001", "", v1::OUTCOME_TASKS, at);
  control.set_tasks_completed(10);
  ASSERT_THAT(HandleReportOutcome(control, context).status(), IsOk());

  absl::StatusOr<std::vector<ReconcileResult>> pass = replica_->reconciler->ReconcileOnce();
  ASSERT_THAT(pass.status(), IsOk());
  EXPECT_EQ((*pass)[0].step, deploy::RolloutStep::kPause);
  EXPECT_THAT((*pass)[0].reason, HasSubstr("task gate"));
  // The pause is the driver's own, in the audit trail with the gate.
  const std::vector<v1::AuditEvent> audited = replica_->Audited();
  ASSERT_THAT(audited, SizeIs(1));
  EXPECT_EQ(audited[0].rpc(), "RolloutPaused");
  EXPECT_EQ(audited[0].identity(), kRolloutDriverIdentity);
  EXPECT_EQ(audited[0].role(), "system");
  EXPECT_EQ(audited[0].target(), kRolloutId);
  EXPECT_THAT(audited[0].request_summary(),
              AllOf(HasSubstr("step: \"pause\" from_stage: 1 to_stage: 1 stages: 4"),
                    HasSubstr("gates: \"task\"")));
  EXPECT_THAT(audited[0].message(), HasSubstr("paused by gate: stage 1 of 4: task gate"));
  absl::StatusOr<v1::Rollout> paused = replica_->admin->Get(kRolloutId);
  EXPECT_EQ(paused->state(), v1::ROLLOUT_STATE_PAUSED);
  EXPECT_THAT(paused->state_reason(), HasSubstr("task gate: members 0.800 vs control 0.000"));
  const std::string metrics = replica_->Metrics();
  EXPECT_THAT(metrics, HasSubstr("weightpath_rollout_gate_breaches_total{gate=\"task\",rollout=\"fidelity-agentic\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("weightpath_rollout_outcomes_total{cohort=\"member\",outcome=\"tasks\",rollout=\"fidelity-agentic\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("weightpath_rollout_outcomes_total{cohort=\"control\",outcome=\"tasks\",rollout=\"fidelity-agentic\"} 1"));
  // The rates the gate judged by, and its limit, beside the breach.
  EXPECT_THAT(metrics, HasSubstr("weightpath_rollout_gate_failure_ratio{cohort=\"member\",gate=\"task\",rollout=\"fidelity-agentic\"} 0.8"));
  EXPECT_THAT(metrics, HasSubstr("weightpath_rollout_gate_failure_ratio{cohort=\"control\",gate=\"task\",rollout=\"fidelity-agentic\"} 0"));
  EXPECT_THAT(metrics, HasSubstr("weightpath_rollout_gate_max_delta{gate=\"task\",rollout=\"fidelity-agentic\"} 0.1"));

  // Resume does not override the gate: the next pass pauses again; neither
  // can an operator advance past it.
  ASSERT_THAT(replica_->admin->Resume(kRolloutId, "").status(), IsOk());
  EXPECT_THAT(replica_->admin->Advance(kRolloutId, ""),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("task gate")));
}

// With rollback_on_breach the same breach rolls it back, recorded as such.
TEST_P(RolloutServerTest, ABreachWithRollbackOnBreachIsRecordedAsTheDriversRollback) {
  Register(*replica_->store, "device-0002", "agentic", kT0);
  v1::Rollout spec = FidelitySpec(kRolloutId);
  spec.mutable_gates()->set_rollback_on_breach(true);
  ASSERT_THAT(replica_->admin->Create(spec).status(), IsOk());
  const absl::Time at = kT0 + absl::Minutes(1);
  OutcomeContext context{replica_->store.get(), &replica_->cache, &replica_->metrics, std::nullopt, at};
  ASSERT_THAT(HandleReportOutcome(Report("device-0002", kRolloutId, v1::OUTCOME_ENGINE_START_FAILED, at),
                                  context)
                  .status(),
              IsOk());
  absl::StatusOr<std::vector<ReconcileResult>> pass = replica_->reconciler->ReconcileOnce();
  ASSERT_THAT(pass.status(), IsOk());
  ASSERT_THAT(*pass, SizeIs(1));
  EXPECT_EQ((*pass)[0].step, deploy::RolloutStep::kRollback);
  const std::vector<v1::AuditEvent> audited = replica_->Audited();
  ASSERT_THAT(audited, SizeIs(1));
  EXPECT_EQ(audited[0].rpc(), "RolloutRolledBack");
  EXPECT_EQ(audited[0].identity(), kRolloutDriverIdentity);
  EXPECT_THAT(audited[0].request_summary(),
              AllOf(HasSubstr("ROLLOUT_STATE_ROLLED_BACK"), HasSubstr("gates: \"engine\"")));
  EXPECT_THAT(audited[0].message(), HasSubstr("rolled back by gate: stage 1 of 4: engine gate"));
  // A finished rollout takes no more steps, so nothing more is recorded.
  ASSERT_THAT(replica_->reconciler->ReconcileOnce().status(), IsOk());
  EXPECT_THAT(replica_->Audited(), SizeIs(1));
}

TEST_P(RolloutServerTest, ReportOutcomeIsIdempotentAndOnlyForTheCertifiedDevice) {
  Register(*replica_->store, "device-0002", "agentic", kT0);
  ASSERT_THAT(replica_->admin->Create(FidelitySpec(kRolloutId)).status(), IsOk());
  OutcomeContext context{replica_->store.get(), &replica_->cache, &replica_->metrics,
                         std::string("device-0002"), kT0};
  const v1::ReportOutcomeRequest report =
      Report("device-0002", kRolloutId, v1::OUTCOME_ENGINE_STARTED, kT0);
  absl::StatusOr<v1::ReportOutcomeResponse> first = HandleReportOutcome(report, context);
  ASSERT_THAT(first.status(), IsOk());
  EXPECT_FALSE(first->duplicate());
  absl::StatusOr<v1::ReportOutcomeResponse> again = HandleReportOutcome(report, context);
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_TRUE(again->duplicate());
  EXPECT_THAT(HandleReportOutcome(Report("device-0001", "", v1::OUTCOME_BOOT_OK, kT0), context),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("device-0001")));
  v1::ReportOutcomeRequest unspecified = report;
  unspecified.set_outcome(v1::OUTCOME_UNSPECIFIED);
  unspecified.set_idempotency_key("other");
  EXPECT_THAT(HandleReportOutcome(unspecified, context),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outcome")));
  absl::StatusOr<std::vector<store::DeviceOutcomes>> stored = replica_->store->LatestOutcomes(kRolloutId);
  ASSERT_THAT(stored.status(), IsOk());
  ASSERT_THAT(*stored, SizeIs(1));
  EXPECT_EQ(stored->front().reports, 1u);
}

// A rollout id labels the outcome counters: only one that exists is taken,
// whether this replica's cache has seen it yet or only the store has.
TEST_P(RolloutServerTest, OutcomeForARolloutThatDoesNotExistIsNotFoundAndNotCounted) {
  Register(*replica_->store, "device-0002", "agentic", kT0);
  OutcomeContext context{replica_->store.get(), &replica_->cache, &replica_->metrics, std::nullopt, kT0};
  EXPECT_THAT(HandleReportOutcome(Report("device-0002", "made-up", v1::OUTCOME_BOOT_FAILED, kT0), context),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("rollout_id \"made-up\"")));
  EXPECT_THAT(replica_->Metrics(), ::testing::Not(HasSubstr("made-up")));
  absl::StatusOr<std::vector<store::DeviceOutcomes>> stored = replica_->store->LatestOutcomes("");
  ASSERT_THAT(stored.status(), IsOk());
  EXPECT_THAT(*stored, SizeIs(0)) << "a refused outcome stores nothing";

  // Created by another replica: not in this cache yet, found in the store.
  ASSERT_THAT(replica_->store->CreateRollout(FidelitySpec(kRolloutId)).status(), IsOk());
  ASSERT_TRUE(replica_->cache.Current()->empty());
  EXPECT_THAT(HandleReportOutcome(Report("device-0002", kRolloutId, v1::OUTCOME_ENGINE_STARTED, kT0),
                                  context)
                  .status(),
              IsOk());
  EXPECT_THAT(replica_->Metrics(),
              HasSubstr("weightpath_rollout_outcomes_total{cohort=\"member\",outcome=\"engine_started\",rollout=\"fidelity-agentic\"} 1"));
}

TEST_P(RolloutServerTest, UpdateChangesTheSpecInPlaceAndRefusesWhatItCannotChange) {
  ASSERT_THAT(replica_->admin->Create(FidelitySpec(kRolloutId)).status(), IsOk());
  now_ += absl::Minutes(1);
  ASSERT_THAT(replica_->admin->Advance(kRolloutId, "").status(), IsOk());

  v1::Rollout spec = FidelitySpec(kRolloutId);
  spec.set_description("stricter engine gate");
  spec.mutable_gates()->set_max_engine_failure_delta(0.05);
  spec.mutable_gates()->mutable_sequential()->set_false_pause_rate(0.02);
  absl::StatusOr<v1::Rollout> updated = replica_->admin->Update(spec);
  ASSERT_THAT(updated.status(), IsOk());
  EXPECT_EQ(updated->current_stage(), 1u) << "a spec change keeps the rollout's progress";
  absl::StatusOr<v1::Rollout> stored = replica_->admin->Get(kRolloutId);
  ASSERT_THAT(stored.status(), IsOk());
  EXPECT_EQ(stored->description(), "stricter engine gate");
  EXPECT_DOUBLE_EQ(stored->gates().max_engine_failure_delta(), 0.05);
  EXPECT_EQ(FromProtoTime(stored->created_at()), kT0);
  ASSERT_THAT(*replica_->cache.Current(), SizeIs(1));
  EXPECT_EQ(replica_->cache.Current()->front().description(), "stricter engine gate");

  v1::Rollout with_state = spec;
  with_state.set_state(v1::ROLLOUT_STATE_COMPLETED);
  EXPECT_THAT(replica_->admin->Update(with_state),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::AllOf(HasSubstr("rollout.state"), HasSubstr("set by the server"))));
  v1::Rollout bad = spec;
  bad.mutable_stages(3)->set_percent(90);
  EXPECT_THAT(replica_->admin->Update(bad),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rollout.stages[3].percent")));
  EXPECT_THAT(replica_->admin->Update(FidelitySpec("missing")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("rollout.id: 'missing'")));
  v1::Rollout chat = spec;
  (*chat.mutable_selector()->mutable_match_labels())["workload"] = "chat";
  EXPECT_THAT(replica_->admin->Update(chat),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("rollout.selector")));
  ASSERT_THAT(replica_->admin->Abort(kRolloutId, "").status(), IsOk());
  EXPECT_THAT(replica_->admin->Update(spec),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("ABORTED")));
}

TEST_P(RolloutServerTest, DeleteTakesOnlyAFinishedRolloutAndItsIdStartsAfresh) {
  Register(*replica_->store, "device-0002", "agentic", kT0);
  Register(*replica_->store, "device-0001", "agentic", kT0);
  ASSERT_THAT(replica_->admin->Create(FidelitySpec(kRolloutId)).status(), IsOk());
  EXPECT_THAT(replica_->admin->Delete(kRolloutId),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       ::testing::AllOf(HasSubstr("PROGRESSING"), HasSubstr("abort it first"))));
  EXPECT_THAT(replica_->admin->Delete("missing"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("id: 'missing' names no rollout")));
  EXPECT_THAT(replica_->admin->Delete(""), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("id")));

  // The member fails to start the engine; the rollout is aborted and deleted.
  now_ = kT0 + absl::Minutes(1);
  OutcomeContext context{replica_->store.get(), &replica_->cache, &replica_->metrics, std::nullopt, now_};
  ASSERT_THAT(HandleReportOutcome(Report("device-0002", kRolloutId, v1::OUTCOME_ENGINE_START_FAILED, now_),
                                  context)
                  .status(),
              IsOk());
  ASSERT_THAT(replica_->reconciler->ReconcileOnce().status(), IsOk());
  ASSERT_THAT(replica_->admin->Abort(kRolloutId, "bad build").status(), IsOk());
  ASSERT_THAT(replica_->admin->Delete(kRolloutId).status(), IsOk());
  EXPECT_THAT(replica_->admin->Get(kRolloutId), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(replica_->cache.Current()->empty());
  EXPECT_THAT(replica_->Metrics(), ::testing::Not(HasSubstr("fidelity-agentic")));
  EXPECT_THAT(replica_->store->LatestOutcomes(kRolloutId), ::weightpath::testing::IsOkAndHolds(SizeIs(1)))
      << "the deleted rollout's outcomes stay";

  // The same id again: a new rollout, judged on its own members' reports.
  now_ = kT0 + absl::Hours(1);
  ASSERT_THAT(replica_->admin->Create(FidelitySpec(kRolloutId)).status(), IsOk());
  ASSERT_THAT(replica_->reconciler->ReconcileOnce().status(), IsOk());
  absl::StatusOr<v1::Rollout> reused = replica_->admin->Get(kRolloutId);
  ASSERT_THAT(reused.status(), IsOk());
  EXPECT_EQ(reused->state(), v1::ROLLOUT_STATE_PROGRESSING);
  EXPECT_EQ(reused->members().devices(), 1u);
  EXPECT_EQ(reused->members().engine_failed(), 0u) << "the old rollout's failure is not inherited";
  EXPECT_EQ(reused->members().reporting(), 0u);
  EXPECT_EQ(replica_->Decide("device-0002", "agentic"), "w4a16-tinygemm");
}

TEST_P(RolloutServerTest, ListDevicesPagesTheMembersWithTheirStandingAndRefusesBadInputs) {
  Register(*replica_->store, "device-0002", "agentic", kT0);
  Register(*replica_->store, "device-0001", "agentic", kT0);
  v1::Rollout spec = FidelitySpec(kRolloutId);
  ASSERT_THAT(replica_->admin->Create(spec).status(), IsOk());
  ASSERT_THAT(replica_->admin->Advance(kRolloutId, "").status(), IsOk());
  ASSERT_THAT(replica_->admin->Advance(kRolloutId, "").status(), IsOk());
  ASSERT_THAT(replica_->admin->Advance(kRolloutId, "").status(), IsOk());  // 100%: both
  ASSERT_THAT(replica_->store->RecordOutcome(
                  Report("device-0002", kRolloutId, v1::OUTCOME_ROLLED_BACK, kT0 + absl::Minutes(2)),
                  kT0 + absl::Minutes(2)),
              IsOk());
  v1::ListRolloutDevicesRequest request;
  request.set_id(kRolloutId);
  request.set_page_size(1);
  absl::StatusOr<v1::ListRolloutDevicesResponse> page = replica_->admin->ListDevices(request);
  ASSERT_THAT(page.status(), IsOk());
  ASSERT_EQ(page->devices_size(), 1);
  EXPECT_EQ(page->devices(0).device_id(), "device-0001");
  EXPECT_EQ(page->devices(0).stage(), 3u);
  EXPECT_EQ(page->devices(0).standing(), "pending") << "registered, never told of the rollout";
  EXPECT_EQ(page->matched(), 2u);
  EXPECT_EQ(page->next_page_token(), "device-0001");
  request.set_page_token(page->next_page_token());
  page = replica_->admin->ListDevices(request);
  ASSERT_THAT(page.status(), IsOk());
  ASSERT_EQ(page->devices_size(), 1);
  EXPECT_EQ(page->devices(0).device_id(), "device-0002");
  EXPECT_EQ(page->devices(0).standing(), "rolled_back");
  EXPECT_EQ(page->devices(0).stage(), 0u);
  EXPECT_TRUE(page->next_page_token().empty());

  v1::ListRolloutDevicesRequest failed;
  failed.set_id(kRolloutId);
  failed.add_standings("rolled_back");
  page = replica_->admin->ListDevices(failed);
  ASSERT_THAT(page.status(), IsOk());
  EXPECT_EQ(page->matched(), 1u);

  failed.add_standings("exploded");
  EXPECT_THAT(replica_->admin->ListDevices(failed).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("standings[1]: 'exploded'")));
  v1::ListRolloutDevicesRequest huge;
  huge.set_id(kRolloutId);
  huge.set_page_size(5000);
  EXPECT_THAT(replica_->admin->ListDevices(huge).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("page_size: 5000 is over 1000")));
  huge.set_page_size(0);
  huge.set_page_token(std::string(300, 'x'));
  EXPECT_THAT(replica_->admin->ListDevices(huge).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("page_token")));
  huge.set_id("missing");
  huge.clear_page_token();
  EXPECT_THAT(replica_->admin->ListDevices(huge).status(), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(RolloutServerTest, ACompletedRolloutKeepsCountingFailuresWithinItsWatch) {
  Register(*replica_->store, "device-0002", "agentic", kT0);
  v1::Rollout spec = FidelitySpec(kRolloutId);
  ASSERT_THAT(replica_->admin->Create(spec).status(), IsOk());
  for (int i = 0; i < 4; ++i) ASSERT_THAT(replica_->admin->Advance(kRolloutId, "").status(), IsOk());
  ASSERT_EQ(replica_->admin->Get(kRolloutId)->state(), v1::ROLLOUT_STATE_COMPLETED);
  now_ = kT0 + absl::Hours(2);
  ASSERT_THAT(replica_->store->RecordOutcome(
                  Report("device-0002", kRolloutId, v1::OUTCOME_ROLLED_BACK, now_), now_),
              IsOk());
  ASSERT_THAT(replica_->reconciler->ReconcileOnce().status(), IsOk());
  absl::StatusOr<v1::Rollout> watched = replica_->admin->Get(kRolloutId);
  EXPECT_EQ(watched->failures_after_completion(), 1u);
  EXPECT_THAT(replica_->Metrics(),
              HasSubstr("weightpath_rollout_failures_after_completion{rollout=\"fidelity-agentic\"} 1"));
}

// A 3x regression (15% of members' engine starts fail against 5% of the
// control's) pauses the stage before its horizon: a fifth of its members
// have not reported yet, and the conditional e-process alone stops it.
TEST_P(RolloutServerTest, AThreeFoldRegressionPausesBeforeTheHorizon) {
  std::vector<v1::Device> fleet;
  for (int i = 0; i < 2000; ++i) {
    fleet.push_back(MakeDevice(absl::StrFormat("dev-%04d", i), "x86_cpu", "w4a8-amx", "Intel Xeon", kT0));
    (*fleet.back().mutable_labels())["workload"] = "agentic";
  }
  ASSERT_THAT(replica_->store->UpsertDevices(fleet), IsOk());
  v1::Rollout spec = FidelitySpec(kRolloutId);
  spec.clear_stages();
  for (uint32_t percent : {20u, 100u}) {
    v1::RolloutStage* stage = spec.add_stages();
    stage->set_percent(percent);
    stage->set_min_reporting_devices(1);
    stage->set_report_timeout_seconds(3600);
  }
  spec.mutable_gates()->set_max_engine_failure_delta(1);
  spec.mutable_gates()->mutable_sequential();
  absl::StatusOr<v1::Rollout> created = replica_->admin->Create(spec);
  ASSERT_THAT(created.status(), IsOk());
  ASSERT_EQ(created->stage_plans_size(), 2);
  EXPECT_GT(created->stage_plans(0).detectable_ratio(), 1.0);
  EXPECT_LT(created->stage_plans(0).detectable_ratio(), 3.0);

  int member = 0, control = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::string id = absl::StrFormat("dev-%04d", i);
    const bool is_member = deploy::RolloutBucket(kRolloutId, id) < 2000;
    const absl::Time at = kT0 + absl::Seconds(1 + i);
    if (is_member) {
      if (member++ % 5 == 4) continue;  // a fifth not reported yet
      const bool fails = member % 20 < 3;  // 15%
      ASSERT_THAT(replica_->store->RecordOutcome(
                      Report(id, kRolloutId,
                             fails ? v1::OUTCOME_ROLLED_BACK : v1::OUTCOME_ENGINE_STARTED, at),
                      at),
                  IsOk());
    } else {
      const bool fails = control++ % 20 == 0;  // 5%
      ASSERT_THAT(replica_->store->RecordOutcome(
                      Report(id, "", fails ? v1::OUTCOME_ENGINE_START_FAILED
                                           : v1::OUTCOME_ENGINE_STARTED, at),
                      at),
                  IsOk());
    }
  }
  now_ = kT0 + absl::Minutes(40);
  absl::StatusOr<std::vector<ReconcileResult>> pass = replica_->reconciler->ReconcileOnce();
  ASSERT_THAT(pass.status(), IsOk());
  ASSERT_THAT(*pass, SizeIs(1));
  EXPECT_EQ((*pass)[0].step, deploy::RolloutStep::kPause) << (*pass)[0].reason;
  EXPECT_THAT((*pass)[0].reason, HasSubstr("stage 1 of 2: engine gate: fail, e-value"));
  absl::StatusOr<v1::Rollout> paused = replica_->admin->Get(kRolloutId);
  EXPECT_LT(FromProtoTime(paused->stage_horizon()) - now_, absl::Hours(2));
  EXPECT_GT(FromProtoTime(paused->stage_horizon()), now_) << "paused before its horizon";
}

INSTANTIATE_TEST_SUITE_P(Backends, RolloutServerTest,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         [](const auto& info) { return store::testing::BackendName(info.param); });

// Two replicas on one PostgreSQL.
class RolloutReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> url = FreshDatabaseUrl(Backend::kPostgres);
    ASSERT_THAT(url.status(), IsOk());
    url_ = *url;
    a_ = std::make_unique<Replica>(url_, &now_);
    b_ = std::make_unique<Replica>(url_, &now_);
  }
  absl::Time now_ = kT0;
  std::string url_;
  std::unique_ptr<Replica> a_;
  std::unique_ptr<Replica> b_;
};

TEST_F(RolloutReplicasTest, ARolloutCreatedThroughOneIsServedByTheOther) {
  EXPECT_EQ(b_->Decide("device-0002", "agentic"), "w4a8-amx");
  ASSERT_THAT(a_->admin->Create(FidelitySpec(kRolloutId)).status(), IsOk());
  EXPECT_EQ(b_->Decide("device-0002", "agentic"), "w4a8-amx") << "B has not refreshed yet";
  ASSERT_THAT(b_->cache.Refresh(*b_->store), IsOk());
  EXPECT_EQ(b_->Decide("device-0002", "agentic"), "w4a16-tinygemm");

  // An operator change through B is seen by A after A's refresh, and A's
  // stale copy cannot overwrite it: the compare-and-swap refuses.
  ASSERT_THAT(b_->admin->Abort(kRolloutId, "").status(), IsOk());
  ASSERT_THAT(a_->cache.Refresh(*a_->store), IsOk());
  EXPECT_EQ(a_->Decide("device-0002", "agentic"), "w4a8-amx");
  EXPECT_THAT(a_->store->UpdateRollout(FidelitySpec(kRolloutId), 1),
              StatusIs(absl::StatusCode::kAborted));
}

// A delete through A reaches B at B's next pass (cache, resolves,
// metrics), and B's copy of the deleted rollout cannot land on a new
// rollout created under the same id, though both are at revision 1.
TEST_F(RolloutReplicasTest, ARolloutDeletedThroughOneLeavesTheOther) {
  ASSERT_THAT(a_->admin->Create(FidelitySpec(kRolloutId)).status(), IsOk());
  ASSERT_THAT(b_->reconciler->ReconcileOnce().status(), IsOk());
  EXPECT_EQ(b_->Decide("device-0002", "agentic"), "w4a16-tinygemm");
  ASSERT_THAT(b_->admin->Abort(kRolloutId, "").status(), IsOk());
  absl::StatusOr<store::StoredRollout> old_copy = b_->store->GetRollout(kRolloutId);
  ASSERT_THAT(old_copy.status(), IsOk());

  ASSERT_THAT(a_->admin->Delete(kRolloutId).status(), IsOk());
  ASSERT_THAT(b_->reconciler->ReconcileOnce().status(), IsOk());
  EXPECT_TRUE(b_->cache.Current()->empty());
  EXPECT_THAT(b_->Metrics(), ::testing::Not(HasSubstr("fidelity-agentic")));

  now_ = kT0 + absl::Hours(1);
  ASSERT_THAT(a_->admin->Create(FidelitySpec(kRolloutId)).status(), IsOk());
  v1::Rollout stale = old_copy->rollout;
  EXPECT_THAT(b_->store->UpdateRollout(stale, 1), StatusIs(absl::StatusCode::kAborted));
  // B's cache takes the new rollout, and keeps it over the deleted one's
  // state at a higher revision (2): a later created_at is a later rollout.
  ASSERT_THAT(b_->cache.Refresh(*b_->store), IsOk());
  b_->cache.Publish(stale, old_copy->revision);
  ASSERT_THAT(*b_->cache.Current(), SizeIs(1));
  EXPECT_EQ(b_->cache.Current()->front().state(), v1::ROLLOUT_STATE_PROGRESSING);
  EXPECT_EQ(b_->Decide("device-0002", "agentic"), "w4a16-tinygemm");
}

TEST_F(RolloutReplicasTest, ARestartMidStageResumesWhereItWas) {
  Register(*a_->store, "device-0002", "agentic", kT0);
  ASSERT_THAT(a_->admin->Create(FidelitySpec(kRolloutId)).status(), IsOk());
  now_ = kT0 + absl::Minutes(1);
  ASSERT_THAT(a_->admin->Advance(kRolloutId, "").status(), IsOk());
  ASSERT_THAT(a_->store->RecordOutcome(
                  Report("device-0002", kRolloutId, v1::OUTCOME_ENGINE_STARTED, now_), now_),
              IsOk());
  a_.reset();  // replica A goes away mid-stage
  b_.reset();

  now_ = kT0 + absl::Minutes(5);  // inside stage 2's 10-minute bake
  Replica restarted(url_, &now_);
  absl::StatusOr<std::vector<ReconcileResult>> pass = restarted.reconciler->ReconcileOnce();
  ASSERT_THAT(pass.status(), IsOk());
  ASSERT_THAT(*pass, SizeIs(1));
  EXPECT_EQ((*pass)[0].step, deploy::RolloutStep::kHold);
  EXPECT_EQ((*pass)[0].stage, 1u) << "still the second stage, its bake clock kept";
  EXPECT_EQ(restarted.Decide("device-0002", "agentic"), "w4a16-tinygemm") << "cache filled by the pass";

  now_ = kT0 + absl::Minutes(12);  // the bake, counted from before the restart, is over
  pass = restarted.reconciler->ReconcileOnce();
  ASSERT_THAT(pass.status(), IsOk());
  EXPECT_EQ((*pass)[0].step, deploy::RolloutStep::kAdvance) << (*pass)[0].reason;
  EXPECT_EQ((*pass)[0].stage, 2u);
}

TEST_F(RolloutReplicasTest, ConcurrentReconcilersStoreOneVerdictPerRevision) {
  Register(*a_->store, "device-0002", "agentic", kT0);
  ASSERT_THAT(a_->admin->Create(FidelitySpec(kRolloutId)).status(), IsOk());
  ASSERT_THAT(a_->store->RecordOutcome(
                  Report("device-0002", kRolloutId, v1::OUTCOME_ENGINE_STARTED, kT0), kT0),
              IsOk());
  now_ = kT0 + absl::Minutes(11);
  a_->reconciler->Start(absl::Milliseconds(5));
  b_->reconciler->Start(absl::Milliseconds(5));
  // Each pass either stores or loses the race; whoever wins, the first
  // stage is left exactly once.
  absl::StatusOr<v1::Rollout> rollout;
  for (int i = 0; i < 400; ++i) {
    rollout = a_->admin->Get(kRolloutId);
    if (rollout.ok() && rollout->current_stage() > 0) break;
    absl::SleepFor(absl::Milliseconds(25));
  }
  // Let both loops run many more passes over the advanced rollout.
  absl::SleepFor(absl::Milliseconds(200));
  a_->reconciler->Stop();
  b_->reconciler->Stop();
  rollout = a_->admin->Get(kRolloutId);
  ASSERT_THAT(rollout.status(), IsOk());
  // Bake is measured from each stage's entry at the injected `now`, which
  // stands still: only the first stage had its bake behind it.
  EXPECT_EQ(rollout->current_stage(), 1u);
  EXPECT_EQ(rollout->state(), v1::ROLLOUT_STATE_PROGRESSING);
  ASSERT_EQ(rollout->stage_entered_at_size(), 2);
  // The advance is in the audit trail once: only the replica whose
  // compare-and-swap stored it records it.
  std::vector<v1::AuditEvent> steps = a_->Audited();
  for (v1::AuditEvent& event : b_->Audited()) steps.push_back(std::move(event));
  ASSERT_THAT(steps, SizeIs(1));
  EXPECT_EQ(steps[0].rpc(), "RolloutAdvanced");
  EXPECT_THAT(steps[0].request_summary(), HasSubstr("from_stage: 1 to_stage: 2 stages: 4"));
}

}  // namespace
}  // namespace weightpath::server
