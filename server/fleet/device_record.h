// What the device registry keeps of one resolve, built on the resolving
// thread. EncodeDeviceRecord writes the record's stored form directly from
// the request and the response, without building a v1::Device: it must give
// exactly store::EncodeDevice(FillDeviceRecord(...)), which the tests check.
#pragma once

#include <string_view>

#include "absl/time/time.h"
#include "store/encoded_device.h"
#include "weightpath/v1/fleet.pb.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::server {

// The response comes in two parts (server/resolver.h); the per-call part
// wins where both carry a field. Regression fields are the store's own.
void FillDeviceRecord(const v1::ResolveWeightPathRequest& request,
                      const v1::ResolveWeightPathResponse& decided,
                      const v1::ResolveWeightPathResponse& per_call, absl::Time now,
                      v1::Device& device);

// `profile_wire`: the request's profile field as the device sent it, when
// the caller has its bytes (the wire decoder's head); empty: serialized from
// request.profile(). Either way a profile over store::kMaxStoredProfileBytes
// is left out.
store::EncodedDevice EncodeDeviceRecord(const v1::ResolveWeightPathRequest& request,
                                        const v1::ResolveWeightPathResponse& decided,
                                        const v1::ResolveWeightPathResponse& per_call,
                                        absl::Time now, std::string_view profile_wire = {});

}  // namespace weightpath::server
