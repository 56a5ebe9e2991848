// ResolveWeightPath is served as a raw method: the handler gets the request's
// wire bytes and hands back response bytes. That lets every thread decode
// into the same request message call after call (server/request_decoder.h),
// so a profile with a hundred CPU flags costs no allocation, and lets the
// response go out as the decided part's cached encoding followed by the
// small per-call part (server/resolver.h, server/response_cache.h).
#pragma once

#include "absl/status/status.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "server/request_decoder.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::server {

// The calling thread's messages. A handler clears and fills them and must be
// done with them before it returns; nothing may keep a pointer into them.
struct ResolveScratch {
  v1::ResolveWeightPathRequest request;
  v1::ResolveWeightPathResponse per_call;
  RequestDecoder decoder;  // lends its kept flag strings to `request`
};
ResolveScratch& ThreadResolveScratch();

// Into scratch->request, exactly as protobuf would parse it. INVALID_ARGUMENT
// when the bytes are not a ResolveWeightPathRequest. `bytes` is consumed.
absl::Status ParseResolveRequest(grpc::ByteBuffer* bytes, ResolveScratch* scratch);

// `decided` (already encoded) followed by `per_call`: a parser merges the two
// into the one response (server/resolver.h).
void EncodeResolveResponse(const grpc::Slice& decided, const v1::ResolveWeightPathResponse& per_call,
                           grpc::ByteBuffer* out);

}  // namespace weightpath::server
