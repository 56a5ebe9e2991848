// ResolveWeightPath is served as a raw method: the handler gets the request's
// wire bytes and hands back response bytes. That lets every thread decode
// into the same request message call after call (server/request_decoder.h),
// so a profile with a hundred CPU flags costs no allocation, and lets the
// response be written from the decided part's cached encoding plus the
// small per-call part (server/resolver.h, server/response_cache.h).
//
// The response on the wire is exactly what protobuf's own serializer writes
// for the merged message: every field once, in field-number order. Parsers
// disagree on a singular message field sent twice (C++ merges the two,
// protobufjs keeps the last), so the cached bytes are kept in pieces cut
// where the per-call fields belong, and one length prefix is written per
// call around the WeightPathSpec.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/byte_buffer.h"
#include "server/wire/request_decoder.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::server {

// The calling thread's messages. A handler clears and fills them and must be
// done with them before it returns; nothing may keep a pointer into them.
struct ResolveScratch {
  v1::ResolveWeightPathRequest request;
  v1::ResolveWeightPathResponse per_call;
  RequestDecoder decoder;  // lends its kept flag strings to `request`
  // `request` holds only what FillRequestHead set (no profile, no labels).
  bool head_only = false;
};
ResolveScratch& ThreadResolveScratch();

// Into scratch->request, exactly as protobuf would parse it. INVALID_ARGUMENT
// when the bytes are not a ResolveWeightPathRequest. `bytes` is consumed.
absl::Status ParseResolveRequest(grpc::ByteBuffer* bytes, ResolveScratch* scratch);
// The same for a request already in one piece (ResolveRequestBytes).
absl::Status ParseResolveRequest(absl::string_view wire, ResolveScratch* scratch);

// The request's bytes in one slice (shared with `bytes` when they arrived in
// one, as they almost always do). false when they cannot be read.
bool ResolveRequestBytes(const grpc::ByteBuffer& bytes, grpc::Slice* contiguous);

// The head's top-level fields into scratch->request, which is emptied first
// (RequestDecoder::Reset): everything but the profile and the labels, which
// stay unset. For a call answered without decoding the profile.
void FillRequestHead(const RequestHead& head, ResolveScratch* scratch);

// The decided part's encoding, cut around the places of the per-call fields
// (the spec's `verified` and `verification`, a pinned `artifact`, `rollout`,
// `resolve_interval_seconds`, `decision_etag`, `unchanged`). Each piece
// holds whole fields, tags and lengths included.
struct DecidedEncoding {
  std::string before_spec;         // response fields below weight_path
  std::string spec_head;           // WeightPathSpec fields below verified
  std::string spec_middle;         // between verified and verification
  std::string spec_tail;           // above verification
  std::string artifact;            // the catalog's artifact; empty when a rollout pins one
  std::string after_artifact;      // response fields between artifact and rollout
  std::string after_per_call;      // response fields above unchanged
  bool has_spec = false;
};

// `decided` holds no per-call field (server/resolver.h: FillDecidedPart).
DecidedEncoding EncodeDecidedPart(const v1::ResolveWeightPathResponse& decided);

// The response that is `decided` merged with `per_call`, each field once.
// `per_call` may set only the per-call fields.
void EncodeResolveResponse(const DecidedEncoding& decided,
                           const v1::ResolveWeightPathResponse& per_call, grpc::ByteBuffer* out);

// The answer to a device that holds the decision already: policy_version,
// resolve_interval_seconds, decision_etag and unchanged, nothing else.
void EncodeUnchangedResponse(absl::string_view policy_version, uint32_t resolve_interval_seconds,
                             absl::string_view decision_etag, grpc::ByteBuffer* out);

}  // namespace weightpath::server
