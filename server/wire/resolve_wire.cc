#include "server/wire/resolve_wire.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/deterministic_bytes.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"

namespace weightpath::server {
namespace {

using google::protobuf::MessageLite;
using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;
using google::protobuf::internal::WireFormatLite;
using Response = v1::ResolveWeightPathResponse;
using Spec = v1::WeightPathSpec;

// Calls visit(field number, the field's bytes with its tag) for each field of
// `wire`, in order. `wire` is our own serializer's output, so well formed.
template <typename Visit>
void ForEachField(absl::string_view wire, Visit visit) {
  CodedInputStream input(reinterpret_cast<const uint8_t*>(wire.data()), static_cast<int>(wire.size()));
  int start = 0;
  for (uint32_t tag = input.ReadTag(); tag != 0; tag = input.ReadTag()) {
    WireFormatLite::SkipField(&input, tag);
    const int end = input.CurrentPosition();
    visit(WireFormatLite::GetTagFieldNumber(tag), wire.substr(start, end - start));
    start = end;
  }
}

size_t MessageFieldSize(int field, size_t payload) {
  return WireFormatLite::TagSize(field, WireFormatLite::TYPE_MESSAGE) +
         CodedOutputStream::VarintSize64(payload) + payload;
}

uint8_t* WriteMessageHeader(int field, size_t payload, uint8_t* target) {
  target = WireFormatLite::WriteTagToArray(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED, target);
  return CodedOutputStream::WriteVarint64ToArray(payload, target);
}

// Sub-messages here hold no maps, so their cached-size serialization is
// already the deterministic one. ByteSizeLong() must have run on `message`.
uint8_t* WriteMessageField(int field, const MessageLite& message, uint8_t* target) {
  target = WriteMessageHeader(field, message.GetCachedSize(), target);
  return message.SerializeWithCachedSizesToArray(target);
}

uint8_t* WriteBytes(absl::string_view bytes, uint8_t* target) {
  std::memcpy(target, bytes.data(), bytes.size());
  return target + bytes.size();
}

}  // namespace

namespace {

// WEIGHTPATH_REQUEST_DECODER=protobuf: every request is parsed by protobuf
// into the thread's reused message, the control the decoder is measured
// against (bench/server_load.sh SERVER_B_ENV). Read once.
bool ProtobufParserOnly() {
  static const bool protobuf_only = [] {
    const char* choice = std::getenv("WEIGHTPATH_REQUEST_DECODER");
    return choice != nullptr && absl::string_view(choice) == "protobuf";
  }();
  return protobuf_only;
}

}  // namespace

ResolveScratch& ThreadResolveScratch() {
  thread_local ResolveScratch scratch;
  return scratch;
}

bool ResolveRequestBytes(const grpc::ByteBuffer& bytes, grpc::Slice* contiguous) {
  return bytes.TrySingleSlice(contiguous).ok() || bytes.DumpToSingleSlice(contiguous).ok();
}

absl::Status ParseResolveRequest(grpc::ByteBuffer* bytes, ResolveScratch* scratch) {
  grpc::Slice contiguous;
  const bool have_bytes = ResolveRequestBytes(*bytes, &contiguous);
  bytes->Clear();
  if (!have_bytes) {
    scratch->decoder.Reset(&scratch->request);
    return absl::InvalidArgumentError("request: the message could not be read");
  }
  return ParseResolveRequest(
      absl::string_view(reinterpret_cast<const char*>(contiguous.begin()), contiguous.size()),
      scratch);
}

absl::Status ParseResolveRequest(absl::string_view wire, ResolveScratch* scratch) {
  scratch->head_only = false;
  v1::ResolveWeightPathRequest* request = &scratch->request;
  RequestDecoder& decoder = scratch->decoder;
  bool parsed = false;
  if (ProtobufParserOnly()) {
    parsed = request->ParseFromArray(wire.data(), static_cast<int>(wire.size()));
  } else {
    decoder.Reset(request);
    parsed = decoder.Decode(wire, request);
    if (!parsed) {
      // The rare path takes protobuf's own verdict; Reset first so no string
      // lent by the decoder is left in the request.
      decoder.Reset(request);
      parsed = request->ParseFromArray(wire.data(), static_cast<int>(wire.size()));
    }
  }
  if (!parsed) {
    // Whatever the failed parse left (a device_id, say) must not be taken
    // for the request's, in the log or anywhere else.
    decoder.Reset(request);
    return absl::InvalidArgumentError(
        "request: the message is not a valid weightpath.v1.ResolveWeightPathRequest");
  }
  return absl::OkStatus();
}

void FillRequestHead(const RequestHead& head, ResolveScratch* scratch) {
  v1::ResolveWeightPathRequest* request = &scratch->request;
  if (!scratch->head_only) {
    // A parse may have left a profile, labels, unknown fields.
    scratch->decoder.Reset(request);
    scratch->head_only = true;
  }
  // Each string as a parse leaves it: the value, or empty when not sent.
  auto set = [](absl::string_view value, std::string* field) {
    field->assign(value.data(), value.size());
  };
  if (!head.device_id.empty() || !request->device_id().empty()) {
    set(head.device_id, request->mutable_device_id());
  }
  if (!head.model.empty() || !request->model().empty()) set(head.model, request->mutable_model());
  if (!head.agent_version.empty() || !request->agent_version().empty()) {
    set(head.agent_version, request->mutable_agent_version());
  }
  if (!head.known_decision_etag.empty() || !request->known_decision_etag().empty()) {
    set(head.known_decision_etag, request->mutable_known_decision_etag());
  }
  request->set_priority(head.priority);
  request->set_dry_run(head.dry_run);
  request->set_accepts_directory_builds(head.accepts_directory_builds);
}

DecidedEncoding EncodeDecidedPart(const Response& decided) {
  DecidedEncoding encoding;
  ForEachField(DeterministicBytes(decided), [&](int field, absl::string_view bytes) {
    if (field < Response::kWeightPathFieldNumber) {
      encoding.before_spec.append(bytes.data(), bytes.size());
    } else if (field == Response::kArtifactFieldNumber) {
      encoding.artifact.assign(bytes.data(), bytes.size());
    } else if (field > Response::kArtifactFieldNumber && field < Response::kRolloutFieldNumber) {
      encoding.after_artifact.append(bytes.data(), bytes.size());
    } else if (field > Response::kUnchangedFieldNumber) {
      encoding.after_per_call.append(bytes.data(), bytes.size());
    }
    // weight_path is cut below; per-call fields are never in `decided`.
  });
  encoding.has_spec = decided.has_weight_path();
  ForEachField(DeterministicBytes(decided.weight_path()), [&](int field, absl::string_view bytes) {
    if (field < Spec::kVerifiedFieldNumber) {
      encoding.spec_head.append(bytes.data(), bytes.size());
    } else if (field > Spec::kVerifiedFieldNumber && field < Spec::kVerificationFieldNumber) {
      encoding.spec_middle.append(bytes.data(), bytes.size());
    } else if (field > Spec::kVerificationFieldNumber) {
      encoding.spec_tail.append(bytes.data(), bytes.size());
    }
  });
  return encoding;
}

namespace {

// A uint32 field as protobuf writes it: nothing for 0 (proto3's default).
size_t UInt32FieldSize(int field_number, uint32_t value) {
  if (value == 0) return 0;
  return WireFormatLite::TagSize(field_number, WireFormatLite::TYPE_UINT32) +
         WireFormatLite::UInt32Size(value);
}

}  // namespace

void EncodeResolveResponse(const DecidedEncoding& decided, const Response& per_call,
                           grpc::ByteBuffer* out) {
  const Spec& per_call_spec = per_call.weight_path();
  const bool verified = per_call_spec.verified();
  const bool has_verification = per_call_spec.has_verification();
  const size_t verification_size = has_verification ? per_call_spec.verification().ByteSizeLong() : 0;
  const size_t spec_size =
      decided.spec_head.size() +
      (verified ? WireFormatLite::TagSize(Spec::kVerifiedFieldNumber, WireFormatLite::TYPE_BOOL) + 1
                : 0) +
      decided.spec_middle.size() +
      (has_verification ? MessageFieldSize(Spec::kVerificationFieldNumber, verification_size) : 0) +
      decided.spec_tail.size();
  const bool has_spec = decided.has_spec || per_call.has_weight_path();

  const bool pinned = per_call.has_artifact();
  const size_t artifact_size =
      pinned ? MessageFieldSize(Response::kArtifactFieldNumber, per_call.artifact().ByteSizeLong())
             : decided.artifact.size();
  const size_t rollout_size =
      per_call.has_rollout()
          ? MessageFieldSize(Response::kRolloutFieldNumber, per_call.rollout().ByteSizeLong())
          : 0;
  const uint32_t interval = per_call.resolve_interval_seconds();
  const size_t interval_size = UInt32FieldSize(Response::kResolveIntervalSecondsFieldNumber, interval);
  const std::string& etag = per_call.decision_etag();
  const size_t etag_size =
      etag.empty() ? 0
                   : WireFormatLite::TagSize(Response::kDecisionEtagFieldNumber,
                                             WireFormatLite::TYPE_STRING) +
                         WireFormatLite::StringSize(etag);
  const size_t unchanged_size =
      per_call.unchanged()
          ? WireFormatLite::TagSize(Response::kUnchangedFieldNumber, WireFormatLite::TYPE_BOOL) + 1
          : 0;
  const uint32_t retry = per_call.failed_build_retry_seconds();
  const size_t retry_size = UInt32FieldSize(Response::kFailedBuildRetrySecondsFieldNumber, retry);

  const size_t total = decided.before_spec.size() +
                       (has_spec ? MessageFieldSize(Response::kWeightPathFieldNumber, spec_size) : 0) +
                       artifact_size + decided.after_artifact.size() + rollout_size + interval_size +
                       etag_size + unchanged_size + retry_size + decided.after_per_call.size();
  grpc::Slice slice(total);
  uint8_t* target = const_cast<uint8_t*>(slice.begin());
  target = WriteBytes(decided.before_spec, target);
  if (has_spec) {
    target = WriteMessageHeader(Response::kWeightPathFieldNumber, spec_size, target);
    target = WriteBytes(decided.spec_head, target);
    if (verified) target = WireFormatLite::WriteBoolToArray(Spec::kVerifiedFieldNumber, true, target);
    target = WriteBytes(decided.spec_middle, target);
    if (has_verification) {
      target = WriteMessageField(Spec::kVerificationFieldNumber, per_call_spec.verification(), target);
    }
    target = WriteBytes(decided.spec_tail, target);
  }
  target = pinned ? WriteMessageField(Response::kArtifactFieldNumber, per_call.artifact(), target)
                  : WriteBytes(decided.artifact, target);
  target = WriteBytes(decided.after_artifact, target);
  if (per_call.has_rollout()) {
    target = WriteMessageField(Response::kRolloutFieldNumber, per_call.rollout(), target);
  }
  if (interval != 0) {
    target = WireFormatLite::WriteUInt32ToArray(Response::kResolveIntervalSecondsFieldNumber,
                                                interval, target);
  }
  if (!etag.empty()) {
    target = WireFormatLite::WriteStringToArray(Response::kDecisionEtagFieldNumber, etag, target);
  }
  if (per_call.unchanged()) {
    target = WireFormatLite::WriteBoolToArray(Response::kUnchangedFieldNumber, true, target);
  }
  if (retry != 0) {
    target = WireFormatLite::WriteUInt32ToArray(Response::kFailedBuildRetrySecondsFieldNumber,
                                                retry, target);
  }
  target = WriteBytes(decided.after_per_call, target);
  grpc::ByteBuffer bytes(&slice, 1);
  out->Swap(&bytes);
}

void EncodeUnchangedResponse(absl::string_view policy_version, uint32_t resolve_interval_seconds,
                             absl::string_view decision_etag, grpc::ByteBuffer* out) {
  // Written field by field: building and serializing a message for these
  // few bytes cost more than the rest of an unchanged answer.
  auto string_field_size = [](int field, absl::string_view value) {
    return value.empty() ? size_t{0}
                         : WireFormatLite::TagSize(field, WireFormatLite::TYPE_STRING) +
                               CodedOutputStream::VarintSize64(value.size()) + value.size();
  };
  const size_t total =
      string_field_size(Response::kPolicyVersionFieldNumber, policy_version) +
      UInt32FieldSize(Response::kResolveIntervalSecondsFieldNumber, resolve_interval_seconds) +
      string_field_size(Response::kDecisionEtagFieldNumber, decision_etag) +
      WireFormatLite::TagSize(Response::kUnchangedFieldNumber, WireFormatLite::TYPE_BOOL) + 1;
  grpc::Slice slice(total);
  uint8_t* target = const_cast<uint8_t*>(slice.begin());
  auto write_string = [&target](int field, absl::string_view value) {
    if (value.empty()) return;
    target = WriteMessageHeader(field, value.size(), target);  // same wire type as a message
    target = WriteBytes(value, target);
  };
  write_string(Response::kPolicyVersionFieldNumber, policy_version);
  if (resolve_interval_seconds != 0) {
    target = WireFormatLite::WriteUInt32ToArray(Response::kResolveIntervalSecondsFieldNumber,
                                                resolve_interval_seconds, target);
  }
  write_string(Response::kDecisionEtagFieldNumber, decision_etag);
  target = WireFormatLite::WriteBoolToArray(Response::kUnchangedFieldNumber, true, target);
  grpc::ByteBuffer bytes(&slice, 1);
  out->Swap(&bytes);
}

}  // namespace weightpath::server
