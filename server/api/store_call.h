// The one gRPC adapter for unary calls whose work reaches the fleet store
// (ReportMeasurement, ReportOutcome, every FleetAdmin method). They are
// registered as raw callback methods, so this code, not gRPC's, decides
// what a malformed request gets, and so the work can leave gRPC's callback
// threads:
//
//   bytes -> parse with protobuf (INVALID_ARGUMENT naming the request type)
//         -> queue on the StoreExecutor; on a worker, with the store's waits
//            bounded by the call's deadline: the typed handler
//         -> serialize its response, or its absl::Status through ToGrpcStatus
//         -> finish the reactor (from the worker), counting the answer's
//            code in weightpath_rpc_requests_total.
//
// A call the pool cannot take (queue full), or that is still queued when its
// deadline is near, is answered UNAVAILABLE naming the store: retryable, and
// while the caller still listens.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "server/fleet/store_executor.h"
#include "server/api/weightpath_service.h"
#include "store/call_deadline.h"

namespace weightpath::server {

// How a call's answers are counted: weightpath_rpc_requests_total's method
// label, "FleetAdmin/ListDevices" (ServerMetrics::RecordRpc).
struct CountedAs {
  ServerMetrics* metrics;
  const char* method;
};

namespace store_call_internal {

// INVALID_ARGUMENT naming the request type when `bytes` is not one.
absl::Status ParseRequest(const grpc::ByteBuffer& bytes, google::protobuf::Message* request);
void SerializeResponse(const google::protobuf::Message& response, grpc::ByteBuffer* bytes);
// When the call's store work must give up, leaving time for the answer to
// reach the caller before its deadline; InfiniteFuture without a deadline.
absl::Time StoreDeadline(const grpc::CallbackServerContext& context);
absl::Status QueueFull(const StoreExecutor& executor);
absl::Status ExpiredInQueue();

// What the caller is told of the handler's `status`. A device (a
// "WeightPath/" method) that failed on the server's side (UNAVAILABLE,
// INTERNAL, ABORTED, DEADLINE_EXCEEDED, UNKNOWN, DATA_LOSS) gets the code, so
// it retries, and any retry pushback, but not the store's message: that
// names the store's URL (host, user), its file or its SQL, and devices are
// many and outside the operators' trust. Operators' calls keep the message.
absl::Status AsToldToTheCaller(const CountedAs& counted, const absl::Status& status);

// Counts `status`, then answers the call with it (FinishCall).
void FinishCounted(const CountedAs& counted, grpc::CallbackServerContext* context,
                   grpc::ServerUnaryReactor* reactor, const absl::Status& status);

}  // namespace store_call_internal

// Serves one call as described above. `handler`: absl::StatusOr<Response>
// (const Request&), run on a worker; it may capture `context`, which stays
// valid until the call is finished. `admit`: absl::StatusOr<Held>
// (const Request&), run on the callback thread right after parsing; a
// refusal answers the call at once (its retry pushback, if any, as the
// grpc-retry-pushback-ms trailer), and what it holds lives until the call
// is answered (an in-flight place, server/device_call_limits.h).
template <typename Request, typename Handler, typename Admit>
grpc::ServerUnaryReactor* ServeStoreCall(const CountedAs& counted,
                                         grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request_bytes,
                                         grpc::ByteBuffer* response_bytes,
                                         StoreExecutor* executor, Handler handler, Admit admit) {
  using store_call_internal::FinishCounted;
  using Result = std::invoke_result_t<Handler&, const Request&>;
  static_assert(std::is_base_of_v<google::protobuf::Message, typename Result::value_type>,
                "the handler returns absl::StatusOr<a response message>");
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!request_bytes->Valid()) {
    // The call ended before its message arrived (the client reset the
    // stream); answered as gRPC answers a typed method there.
    FinishCounted(counted, context, reactor, absl::InternalError("No payload"));
    return reactor;
  }
  auto request = std::make_unique<Request>();
  if (absl::Status parsed = store_call_internal::ParseRequest(*request_bytes, request.get());
      !parsed.ok()) {
    FinishCounted(counted, context, reactor, parsed);
    return reactor;
  }
  auto admitted = admit(static_cast<const Request&>(*request));
  if (!admitted.ok()) {
    FinishCounted(counted, context, reactor, admitted.status());
    return reactor;
  }
  const absl::Time deadline = store_call_internal::StoreDeadline(*context);
  const bool queued = executor->Submit(
      deadline,
      [counted, context, reactor, response_bytes, deadline, request = std::move(request),
       handler = std::move(handler), held = *std::move(admitted)]() mutable {
        Result result = [&] {
          const store::ScopedCallDeadline bounded(deadline);
          return handler(static_cast<const Request&>(*request));
        }();
        if (result.ok()) store_call_internal::SerializeResponse(*result, response_bytes);
        FinishCounted(counted, context, reactor,
                      store_call_internal::AsToldToTheCaller(counted, result.status()));
      },
      [counted, context, reactor] {
        FinishCounted(counted, context, reactor, store_call_internal::ExpiredInQueue());
      });
  // Not queued: both closures, and what admission holds, are gone already.
  if (!queued) FinishCounted(counted, context, reactor, store_call_internal::QueueFull(*executor));
  return reactor;
}

// The same without an admission step (the operator calls).
template <typename Request, typename Handler>
grpc::ServerUnaryReactor* ServeStoreCall(const CountedAs& counted,
                                         grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request_bytes,
                                         grpc::ByteBuffer* response_bytes,
                                         StoreExecutor* executor, Handler handler) {
  return ServeStoreCall<Request>(counted, context, request_bytes, response_bytes, executor,
                                 std::move(handler),
                                 [](const Request&) { return absl::StatusOr<bool>(true); });
}

}  // namespace weightpath::server
