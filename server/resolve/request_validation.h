// Checks a ResolveWeightPath request before any policy work: every field an
// attacker or a broken agent controls is bounded, and a refusal names the
// field at fault (INVALID_ARGUMENT).
#pragma once

#include "absl/strings/string_view.h"
#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "policy/hardware_class.h"
#include "server/resolve/request_head.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::server {

inline constexpr size_t kMaxDeviceIdBytes = 256;
inline constexpr size_t kMaxStringBytes = 256;
inline constexpr int kMaxCpuFlags = 4096;
inline constexpr int kMaxClusters = 1024;
inline constexpr int kMaxCpusPerCluster = 4096;
inline constexpr int kMaxAccelerators = 64;
inline constexpr int kMaxGpuCapability = 4;
inline constexpr int kMaxGpus = 64;                // agent/probe/nvidia_gpu.h's bound
inline constexpr int kMaxMigInstancesPerGpu = 8;
inline constexpr int kMaxProbeNotes = 64;
inline constexpr int kMaxLabels = 64;

// device_id: 1..256 bytes of [A-Za-z0-9._:/@+=-], so it can hold a host
// name, a serial number or a SPIFFE-style URI, and never breaks a log line.
absl::Status ValidateDeviceId(absl::string_view device_id);

// Empty, or up to 64 lowercase hex digits: the decision_etag of an earlier
// answer.
absl::Status ValidateKnownDecisionEtag(absl::string_view etag);

// Bounds, then the hardware class: a profile with no accelerator and an arch
// that is neither x86_64 nor aarch64 is refused naming profile.arch.
absl::Status ValidateResolveRequest(const v1::ResolveWeightPathRequest& request);
// The same checks, returning the class they computed, so that the rest of a
// resolve (rollout shaping, the policy) does not classify the profile again.
absl::StatusOr<policy::HardwareClass> ValidateAndClassifyResolveRequest(
    const v1::ResolveWeightPathRequest& request);

// true when ValidateResolveRequest passes every field of a request with this
// head (server/wire/request_decoder.h: DecodeRequestHead) but the profile and the
// etag: device_id, model, agent_version, the labels and the priority. Left
// to ValidateResolveRequest otherwise, which names the fault.
bool RequestHeadIsValid(const RequestHead& head);
// ValidateKnownDecisionEtag(etag).ok(), without building a status. An etag
// equal to a decision's own is valid: the caller may skip this then.
bool KnownDecisionEtagIsValid(absl::string_view etag);

// The reports: the store's checks (store/measurement_validation.h: every
// string bounded, figures sane), and device_id held to the same rules as a
// resolve's, so no device RPC stores or logs an id a resolve would refuse.
absl::Status ValidateReport(const v1::ReportMeasurementRequest& request);
absl::Status ValidateReport(const v1::ReportOutcomeRequest& request);

}  // namespace weightpath::server
