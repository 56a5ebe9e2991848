// TUF metadata as a mirror serves it: strict JSON and its canonical form,
// the four role documents, the root a device is provisioned with (its own
// signatures verified against its own keys), the device's persisted trust
// state, and delegated path patterns.
//
// Properties: canonical JSON parses back to the same value and is a fixed
// point; the pretty form parses back to the same value; a parsed document
// written out again parses to the same document and covers the same
// canonical bytes (the ones its signatures are over).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tests/fuzz/fuzz_support.h"
#include "trust/json.h"
#include "trust/metadata.h"
#include "trust/trusted_metadata_set.h"

namespace weightpath::fuzz {
namespace {

using trust::Json;

void CheckJson(absl::string_view text) {
  absl::StatusOr<Json> value = trust::ParseJson(text, "fuzz.json");
  if (!value.ok()) {
    FUZZ_CHECK(IsCleanRefusal(value.status()), value.status().ToString());
    return;
  }
  const std::string pretty = trust::PrettyJson(*value);
  absl::StatusOr<Json> from_pretty = trust::ParseJson(pretty, "pretty.json");
  FUZZ_CHECK(from_pretty.ok() && *from_pretty == *value,
             absl::StrCat("pretty JSON does not read back: ", pretty));
  const std::string canonical = trust::CanonicalJson(*value);
  // OLPC canonical JSON escapes only '"' and '\\' and writes control
  // characters as they are, so with one in a string it is the bytes that get
  // signed but no longer JSON a strict reader takes; only the rest reads back.
  const bool has_control = std::any_of(canonical.begin(), canonical.end(),
                                       [](char c) { return static_cast<unsigned char>(c) < 0x20; });
  if (has_control) return;
  absl::StatusOr<Json> reread = trust::ParseJson(canonical, "canonical.json");
  FUZZ_CHECK(reread.ok(), absl::StrCat("canonical JSON does not parse: ",
                                       reread.status().ToString(), "\n", canonical));
  FUZZ_CHECK(*reread == *value, absl::StrCat("canonical JSON changed the value: ", canonical));
  FUZZ_CHECK(trust::CanonicalJson(*reread) == canonical, "canonical JSON is not a fixed point");
}

template <typename T, typename Parse>
void CheckRole(absl::string_view text, Parse parse) {
  absl::StatusOr<trust::Metadata<T>> metadata = parse(text, "fuzz.json");
  if (!metadata.ok()) {
    // Refusals here are INVALID_ARGUMENT (form) by contract; signatures
    // are only counted later.
    FUZZ_CHECK(IsCleanRefusal(metadata.status()), metadata.status().ToString());
    return;
  }
  const Json signed_json = trust::SignedToJson(metadata->signed_part);
  FUZZ_CHECK(trust::CanonicalJson(signed_json) == metadata->canonical_signed,
             absl::StrCat("the parsed document does not cover the signed bytes:\n",
                          metadata->canonical_signed, "\nvs\n", trust::CanonicalJson(signed_json)));
  const std::string file =
      trust::EncodeMetadataFile(signed_json, metadata->signatures, metadata->unrecognized);
  absl::StatusOr<trust::Metadata<T>> again = parse(file, "written.json");
  FUZZ_CHECK(again.ok(), absl::StrCat("a written document does not parse: ",
                                      again.status().ToString()));
  FUZZ_CHECK(again->canonical_signed == metadata->canonical_signed,
             "the written document covers other bytes");
  FUZZ_CHECK(again->signatures.size() == metadata->signatures.size(), "signatures lost");
}

void CheckDelegations(const trust::Targets& targets) {
  if (!targets.delegations) return;
  int checks = 0;
  for (const trust::DelegatedRole& role : targets.delegations->roles) {
    for (const auto& [path, unused] : targets.targets) {
      if (++checks > 2000) return;
      (void)role.IsDelegatedPath(path);
    }
    (void)role.IsDelegatedPath("models/spark/w4a8-amx.safetensors");
  }
}

}  // namespace
}  // namespace weightpath::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weightpath;
  const std::string_view raw = fuzz::Text(data, size);
  const absl::string_view text(raw.data(), raw.size());
  fuzz::CheckJson(text);
  fuzz::CheckRole<trust::Root>(text, trust::ParseRoot);
  fuzz::CheckRole<trust::Timestamp>(text, trust::ParseTimestamp);
  fuzz::CheckRole<trust::Snapshot>(text, trust::ParseSnapshot);
  fuzz::CheckRole<trust::Targets>(text, trust::ParseTargets);
  if (auto targets = trust::ParseTargets(text, "targets.json"); targets.ok()) {
    fuzz::CheckDelegations(targets->signed_part);
  }
  const absl::Time now = absl::FromUnixSeconds(1750000000);
  // The provisioned root verifies its own signatures with its own keys, so
  // the fuzzed keys and signatures reach the ed25519 code.
  (void)trust::TrustedMetadataSet::Create(text, now);
  (void)trust::TrustedMetadataSet::Restore(text, now);
  if (size == 20) {
    absl::StatusOr<absl::Time> expires = trust::ParseExpires(text);
    if (expires.ok()) {
      FUZZ_CHECK(trust::FormatExpires(*expires) == text,
                 absl::StrCat("expiry does not print back: ", trust::FormatExpires(*expires)));
    }
  }
  return 0;
}
