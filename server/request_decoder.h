// A decoder for ResolveWeightPathRequest that gives exactly the message
// protobuf's parser gives, at a fraction of the cost for the field that
// dominates a request: the profile's hundred-odd CPU flags.
//
// A fleet has few distinct flag lists (one per CPU model and kernel), and a
// list arrives as one run of consecutive fields. Each thread keeps the last
// few runs it decoded, as wire bytes next to the parsed strings; a run equal
// to a kept one lends its strings to the request instead of being parsed
// again. A new run is parsed once, with one tight ASCII check per flag.
// Every other field, known or unknown, is gathered as its wire bytes and
// handed to protobuf's parser, which the wire format allows: fields may come
// in any order and repeated fields append.
//
// Anything unusual (a non-ASCII flag, flags not in one run, groups, a
// malformed length) makes the decoder decline, and the caller parses the
// whole message with protobuf, so what is accepted and what is refused never
// differs from protobuf.
#pragma once

#include <array>
#include <string>

#include "absl/strings/string_view.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::server {

class RequestDecoder {
 public:
  RequestDecoder() = default;
  RequestDecoder(const RequestDecoder&) = delete;
  RequestDecoder& operator=(const RequestDecoder&) = delete;

  // Empties `request` for the next decode, keeping its profile and every
  // string it holds allocated. Always call it before Decode, with the same
  // request each time: a lent flag list goes back to its cache entry here.
  void Reset(v1::ResolveWeightPathRequest* request);

  // false: declined (request contents unspecified; Reset before reuse).
  bool Decode(absl::string_view wire, v1::ResolveWeightPathRequest* request);

  // Flag lists kept; for tests and the benchmark.
  int cached_flag_lists() const;

 private:
  struct FlagList {
    std::string wire;  // the run of cpu_flags fields, tag and length included
    google::protobuf::RepeatedPtrField<std::string> flags;
  };
  // Enough for the CPU models one server sees from a thread in a while;
  // bounded so a fleet of odd devices cannot grow it.
  static constexpr int kCachedFlagLists = 8;

  bool SplitProfile(absl::string_view wire, v1::HardwareProfile* profile);
  // The list for the run `run` of flag fields, parsed or found.
  FlagList* FlagsFor(absl::string_view run);

  std::array<FlagList, kCachedFlagLists> flag_lists_;
  int next_victim_ = 0;
  int lent_ = -1;  // the entry whose strings the request holds now
  std::string request_rest_;  // top-level fields other than the profile
  std::string profile_rest_;  // profile fields other than cpu_flags
};

}  // namespace weightpath::server
