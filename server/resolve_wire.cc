#include "server/resolve_wire.h"

#include <string>

namespace weightpath::server {

ResolveScratch& ThreadResolveScratch() {
  thread_local ResolveScratch scratch;
  return scratch;
}

absl::Status ParseResolveRequest(grpc::ByteBuffer* bytes, ResolveScratch* scratch) {
  grpc::Slice contiguous;
  const bool have_bytes =
      bytes->TrySingleSlice(&contiguous).ok() || bytes->DumpToSingleSlice(&contiguous).ok();
  bytes->Clear();
  if (!have_bytes) {
    scratch->decoder.Reset(&scratch->request);
    return absl::InvalidArgumentError("request: the message could not be read");
  }
  const absl::string_view wire(reinterpret_cast<const char*>(contiguous.begin()), contiguous.size());

  v1::ResolveWeightPathRequest* request = &scratch->request;
  RequestDecoder& decoder = scratch->decoder;
  decoder.Reset(request);
  bool parsed = decoder.Decode(wire, request);
  if (!parsed) {
    // The rare path takes protobuf's own verdict; Reset first so no string
    // lent by the decoder is left in the request.
    decoder.Reset(request);
    parsed = request->MergeFromString(std::string(wire));
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

void EncodeResolveResponse(const grpc::Slice& decided, const v1::ResolveWeightPathResponse& per_call,
                           grpc::ByteBuffer* out) {
  const size_t size = per_call.ByteSizeLong();
  grpc::Slice tail(size);
  per_call.SerializeWithCachedSizesToArray(const_cast<uint8_t*>(tail.begin()));
  const grpc::Slice parts[] = {decided, tail};
  grpc::ByteBuffer bytes(parts, 2);
  out->Swap(&bytes);
}

}  // namespace weightpath::server
