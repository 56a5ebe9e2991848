// A decoder for ResolveWeightPathRequest that gives exactly the message
// protobuf's parser gives, at a fraction of the cost for the fields that
// dominate a request: the profile's hundred-odd CPU flags and its CPU
// clusters (a list of every logical CPU).
//
// A fleet has few distinct flag and cluster lists (one per CPU model and
// kernel), and each list arrives as one run of consecutive fields. Each
// thread keeps the last few runs it decoded, as wire bytes next to the parsed
// elements; a run equal to a kept one lends its elements to the request
// instead of being parsed again. A new flag run is parsed once, with one
// tight ASCII check per flag.
// Every other field, known or unknown, is gathered as its wire bytes and
// handed to protobuf's parser, which the wire format allows: fields may come
// in any order and repeated fields append.
//
// Anything unusual (a non-ASCII flag, a list not in one run, groups, a
// malformed length) makes the decoder decline, and the caller parses the
// whole message with protobuf, so what is accepted and what is refused never
// differs from protobuf.
#pragma once

#include <array>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "server/resolve/request_head.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::server {

// The last few runs of one repeated field, as wire bytes next to the parsed
// elements, lent to a request whose run is byte for byte the same.
template <typename Element>
class KeptRuns {
 public:
  // The entry for `run`, parsed when new; nullptr when an element is not
  // something the decoder decides on (see ParseElement).
  google::protobuf::RepeatedPtrField<Element>* Find(absl::string_view run);
  // Swaps the entry's elements into `field` until Return.
  void Lend(google::protobuf::RepeatedPtrField<Element>* entry,
            google::protobuf::RepeatedPtrField<Element>* field);
  void Return(google::protobuf::RepeatedPtrField<Element>* field);
  bool lent() const { return lent_ >= 0; }
  int size() const;

 private:
  // Enough for the hardware one server sees from a thread in a while;
  // bounded so a fleet of odd devices cannot grow it.
  static constexpr int kEntries = 8;
  struct Entry {
    std::string wire;  // the run, tags and lengths included
    google::protobuf::RepeatedPtrField<Element> elements;
  };
  std::array<Entry, kEntries> entries_;
  int next_victim_ = 0;
  int lent_ = -1;
};

// true when `wire` is a request of the plain shape, in which case protobuf
// parses it into exactly these top-level values (the labels map aside,
// which is only counted): fields 1-8 each with one-byte tags and their
// proto types, the singular ones at most once, a profile present, every
// string and label ASCII (so valid UTF-8), the priority one of the enum's
// values in one byte, dry_run 0 or 1 in one byte, and each label entry a
// non-empty key of under 128 bytes and a value of under 128 bytes, in that
// order. Anything else (unknown fields, repeats, other encodings) is
// declined and left to the full parse, which decides on it as protobuf does.
bool DecodeRequestHead(absl::string_view wire, RequestHead* head);

class RequestDecoder {
 public:
  RequestDecoder() = default;
  RequestDecoder(const RequestDecoder&) = delete;
  RequestDecoder& operator=(const RequestDecoder&) = delete;

  // Empties `request` for the next decode: afterwards it is exactly a fresh
  // message (no profile attached), so protobuf can parse into it when the
  // decoder declines. Its profile, with every string it holds allocated, is
  // kept here for the next Decode. Always call it before Decode, with the
  // same request each time: lent runs go back to their entries here.
  void Reset(v1::ResolveWeightPathRequest* request);

  // false: declined (request contents unspecified; Reset before reuse).
  bool Decode(absl::string_view wire, v1::ResolveWeightPathRequest* request);

  // Flag lists and cluster lists kept; for tests and the benchmark.
  int cached_flag_lists() const { return flags_.size(); }
  int cached_cluster_lists() const { return clusters_.size(); }

 private:
  bool SplitProfile(absl::string_view wire, v1::HardwareProfile* profile);

  // The profile of an earlier request, cleared, for the next one that sends
  // a profile; null while attached to a request.
  std::unique_ptr<v1::HardwareProfile> spare_profile_;

  KeptRuns<std::string> flags_;
  KeptRuns<v1::CpuCluster> clusters_;
  std::string request_rest_;  // top-level fields other than the profile
  std::string profile_rest_;  // profile fields other than the kept runs
};

}  // namespace weightpath::server
