#include "server/api/store_call.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/slice.h"
#include "spdlog/spdlog.h"

namespace weightpath::server::store_call_internal {
namespace {

// What an answer needs to get back to its caller: a tenth of the call's
// budget, at most this (a WAN round trip with room to spare).
constexpr absl::Duration kMaxReplyMargin = absl::Milliseconds(250);
// How often a failure a device was not told the reason for is logged.
constexpr absl::Duration kReasonLogPeriod = absl::Seconds(10);

}  // namespace

absl::Status ParseRequest(const grpc::ByteBuffer& bytes, google::protobuf::Message* request) {
  // The copy shares the received slices; the reader needs a mutable buffer.
  grpc::ByteBuffer shared(bytes);
  grpc::ProtoBufferReader reader(&shared);
  if (reader.status().ok() && request->ParseFromZeroCopyStream(&reader)) return absl::OkStatus();
  request->Clear();
  return absl::InvalidArgumentError(absl::StrCat("request: the message is not a valid ",
                                                 request->GetDescriptor()->full_name()));
}

void SerializeResponse(const google::protobuf::Message& response, grpc::ByteBuffer* bytes) {
  grpc::Slice slice(response.ByteSizeLong());
  response.SerializeWithCachedSizesToArray(const_cast<uint8_t*>(slice.begin()));
  grpc::ByteBuffer serialized(&slice, 1);
  bytes->Swap(&serialized);
}

absl::Time StoreDeadline(const grpc::CallbackServerContext& context) {
  const std::chrono::system_clock::time_point deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  const absl::Time call_deadline = absl::FromChrono(deadline);
  const absl::Duration budget = std::max(absl::ZeroDuration(), call_deadline - absl::Now());
  return call_deadline - std::min(budget / 10, kMaxReplyMargin);
}

absl::Status QueueFull(const StoreExecutor& executor) {
  return absl::UnavailableError(absl::StrCat("fleet store: all ", executor.threads(),
                                             " store workers are busy and ", executor.max_queued(),
                                             " calls already wait for one; retry later"));
}

absl::Status ExpiredInQueue() {
  return absl::UnavailableError(
      "fleet store: every store worker stayed busy (the store is slow or locked) until the "
      "call's deadline; retry later");
}

absl::Status AsToldToTheCaller(const CountedAs& counted, const absl::Status& status) {
  if (status.ok() || !absl::StartsWith(counted.method, "WeightPath/")) return status;
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kDataLoss:
      break;
    default:
      return status;  // about the request: the device needs the reason
  }
  // The reason goes to the log instead, once per kReasonLogPeriod: an
  // outage fails every report, and one line says what a thousand would.
  {
    static absl::Mutex mutex(absl::kConstInit);
    static absl::Time next_line = absl::InfinitePast();
    static int64_t unlogged = 0;
    absl::MutexLock lock(&mutex);
    const absl::Time now = absl::Now();
    if (now < next_line) {
      ++unlogged;
    } else {
      const std::string more =
          unlogged == 0 ? "" : absl::StrCat(" (and ", unlogged, " more since the last such line)");
      spdlog::warn("{}: answered {} to the device without its reason: {}{}", counted.method,
                   absl::StatusCodeToString(status.code()), std::string(status.message()), more);
      unlogged = 0;
      next_line = now + kReasonLogPeriod;
    }
  }
  absl::Status told(status.code(),
                    absl::StrCat("the server could not take this call (its fleet store failed: ",
                                 absl::StatusCodeToString(status.code()),
                                 "); retry later; the server's log has the reason"));
  status.ForEachPayload([&told](absl::string_view url, const absl::Cord& payload) {
    told.SetPayload(url, payload);
  });
  return told;
}

void FinishCounted(const CountedAs& counted, grpc::CallbackServerContext* context,
                   grpc::ServerUnaryReactor* reactor, const absl::Status& status) {
  counted.metrics->RecordRpc(counted.method, static_cast<int>(status.code()));
  FinishCall(context, reactor, status);
}

}  // namespace weightpath::server::store_call_internal
