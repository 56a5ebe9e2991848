// absl::Status <-> grpc::Status: the one conversion between the status every
// layer returns and what crosses the wire, for the server's services and for
// every client (agent, weightpathctl).
//
// absl and gRPC share the canonical code numbering, so the code carries over
// unchanged and the message with it. Two things ride along beside them:
//  - the request field a refusal names (common/field_violation.h), as a
//    google.rpc.BadRequest field violation inside a google.rpc.Status, which
//    gRPC sends as the grpc-status-details-bin trailer: any gRPC client can
//    read which field was wrong without parsing the message;
//  - on the client side, the server's grpc-retry-pushback-ms trailer, as the
//    retry pushback of common/retry_pushback.h.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"

namespace weightpath {

// What the server answers for `status`: its code and message, and when it
// names a field, the google.rpc.Status detail described above.
grpc::Status ToGrpcStatus(const absl::Status& status);

// A finished call's outcome as an absl::Status: the code unchanged, the
// message prefixed with "`method`: ", the field of a BadRequest detail the
// server sent (ViolatedField reads it), and the retry pushback the server
// asked for. Details that are not a well-formed google.rpc.Status with a
// BadRequest are ignored: the code and message still stand. The result also
// records that it came back from a call (ReceivedFrom), so a caller can tell
// a refusal from the peer from a status of its own with the same code.
absl::Status FromGrpcStatus(absl::string_view method, const grpc::Status& status,
                            const grpc::ClientContext& context);

// The method of the call `status` came back from, when FromGrpcStatus made
// it (the peer or the channel to it answered); nullopt for any other status.
std::optional<std::string> ReceivedFrom(const absl::Status& status);

}  // namespace weightpath
