// The top-level fields of a resolve request read without decoding the
// profile: what the wire decoder (server/wire/request_decoder.h:
// DecodeRequestHead) finds and what validation (request_validation.h:
// RequestHeadIsValid) and the profile memo (profile_memo.h) read. Here, in
// resolve, so that neither needs the wire folder.
#pragma once

#include "absl/strings/string_view.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::server {

// The top-level fields of a ResolveWeightPathRequest in the plain shape an
// agent writes, as views into the request's bytes. The profile is left
// undecoded: ProfileMemo (server/resolve/profile_memo.h) may already know its
// verdict.
struct RequestHead {
  absl::string_view device_id;
  absl::string_view profile;  // the profile field's payload
  v1::Priority priority = v1::PRIORITY_UNSPECIFIED;
  absl::string_view model;
  int label_count = 0;  // label entries on the wire (duplicates included)
  absl::string_view agent_version;
  absl::string_view known_decision_etag;
  bool dry_run = false;
  bool accepts_directory_builds = false;
};

}  // namespace weightpath::server
