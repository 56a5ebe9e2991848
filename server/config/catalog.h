// The artifact catalog: for every model, the build each path name is built
// into. Loaded from YAML and checked against the policy it will serve with,
// so a reachable path can never lack an artifact.
//
//   default_model: Spark-X2.5-1.7B
//   models:
//     Spark-X2.5-1.7B:
//       w4a8-amx: {uri: https://..., sha256: <64 hex>, size_bytes: 123, version: "1",
//                  target_path: models/spark-x2.5-1.7b/w4a8-amx.bin,   # optional
//                  tokenizer: Spark/Spark-X2.5-1.7B}                   # optional (GGUF)
//       w4a16-gptq:                                                    # a directory build
//         version: "2"
//         base_uri: https://mirror.example/spark/w4a16-gptq            # optional
//         files:
//           - {path: config.json, sha256: <64 hex>, size_bytes: 812}   # base_uri/config.json
//           - {path: model-00001-of-00002.safetensors, sha256: <64 hex>, size_bytes: 2147483648,
//              uri: https://other.example/shard1}                      # its own uri
//
// A directory build gives `files` instead of uri/sha256/size_bytes (never
// both): every file of the model directory the engine loads, each fetched
// from its `uri` or from base_uri joined with its percent-encoded path. Its
// sha256 and size_bytes are those of the build's canonical manifest
// (trust/build_manifest.h), what TUF signs and a device checks.
//
// `target_path` is the artifact's path among the targets of a TUF image
// repository, the name a device with its own trust root looks up; a plain
// catalog is never signed (Artifact.signed_target stays false).
//
// Optionally, what the policy's engine-argument expressions read about each
// model (policy/model_facts.h; every fact optional, each in its range):
//
//   model_facts:
//     Spark-X2.5-1.7B: {parameters: 1720000000, attention_heads: 16, kv_heads: 8,
//                       layers: 28, head_dim: 128, max_context: 32768}
#pragma once

#include "absl/strings/string_view.h"
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "policy/model_facts.h"
#include "policy/policy.h"

namespace weightpath::v1 {
class Artifact;
}

namespace weightpath::server {

// A catalog is reloaded while the server serves, like the policy, and gets
// the same bounds: its text, and the text it amounts to once YAML aliases
// are expanded, at most 16 MiB; at most 200,000 YAML nodes (~100 MB of
// yaml-cpp tree), far more than a catalog of many models needs.
inline constexpr size_t kMaxCatalogBytes = 16 * 1024 * 1024;
inline constexpr size_t kMaxCatalogNodes = 200000;

// One file of a directory build, with where it is fetched from.
struct CatalogBuildFile {
  std::string path;    // trust::CheckBuildFilePath
  std::string sha256;  // 64 lowercase hex digits
  uint64_t size_bytes = 0;
  std::string uri;     // https://, http:// or file://
};

struct CatalogArtifact {
  std::string uri;      // https://, http:// or file://; empty for a directory build
  // The file's, or for a directory build its manifest's
  // (trust::DigestBuildManifest of `files`).
  std::string sha256;   // 64 lowercase hex digits
  uint64_t size_bytes = 0;
  std::string version;  // free-form, may be empty
  // The TUF target path (relative, '/'-separated, no '.'/'..' components);
  // empty when the catalog does not name one.
  std::string target_path;
  // Taken from targets metadata the server verified against its trusted
  // root; always false for a plain YAML catalog.
  bool signed_target = false;
  // A directory build: every file, sorted by path; empty for one file.
  std::vector<CatalogBuildFile> files;
  // A single-file build only: the engine's --tokenizer; empty: none.
  std::string tokenizer;

  bool directory_build() const { return !files.empty(); }
};

// A path in a URL: unreserved characters and '/' as they are, the rest
// percent-encoded, so a mirror is asked for exactly the named file.
std::string UrlPath(absl::string_view path);
// `base_url` (trailing '/' dropped) + "/" + UrlPath(path): where a signed
// target, or a file of a directory build under a base URI, is fetched from.
std::string JoinUrl(absl::string_view base_url, absl::string_view path);

// The catalog -> response mapping: what a decision's Artifact carries.
void FillArtifact(const CatalogArtifact& artifact, v1::Artifact* out);

// A target path a device can look up and a mirror can serve: non-empty, at
// most kMaxTargetPathBytes, relative, no empty, '.' or '..' component, no
// backslash or control character (the rules `weightpathctl repo add-target`
// applies). INVALID_ARGUMENT with the reason (without the path).
inline constexpr size_t kMaxTargetPathBytes = 1024;
absl::Status CheckTargetPath(absl::string_view path);

// Where a catalog's artifacts come from: a plain YAML file (unsigned), or
// the targets of a TUF repository the server verified (server/signed_catalog.h).
// A route the policy can take that no signed build covers: the target for
// `model`'s `weight_path` does not list `hardware_class`, so every device of
// that class sent there refuses the artifact (and keeps its last good build).
struct UncoveredRoute {
  std::string model;
  std::string weight_path;
  std::string hardware_class;
  std::string target_path;
};

// A target the verified metadata lists: what an artifact must match to be
// that target.
struct SignedTargetFile {
  uint64_t length = 0;
  std::string sha256;
};

// A weightpath build of the verified targets, as the catalog serves it.
struct SignedBuild {
  std::string model;
  std::string weight_path;
  // custom.canary: served only where a rollout's pin_artifact names it; the
  // catalog's build for (model, weight_path) is the unmarked target.
  bool canary = false;
  CatalogArtifact artifact;
};

struct CatalogTrust {
  bool signed_catalog = false;
  // Signed catalog only: every weightpath build by target path, canaries
  // included, so a rollout can pin one by its target_path alone and be
  // served the signed uri, digest and files (server/resolve/rollout_resolve.h).
  std::map<std::string, SignedBuild, std::less<>> signed_builds;
  // Signed catalog only: every target of the verified metadata by target
  // path, weightpath artifact or not, so an artifact named outside the
  // catalog (a rollout's pin_artifact) can be checked against them.
  std::map<std::string, SignedTargetFile, std::less<>> verified_targets;
  // Signed catalog only, against the policy it was built for; warned about
  // (log and weightpath_catalog_uncovered_routes), not refused.
  std::vector<UncoveredRoute> uncovered_routes;
  // For the log: the routes above in one line; empty when there are none.
  std::string coverage_warning;
  // The earliest expiry of the verified root, timestamp, snapshot and
  // targets; InfiniteFuture for a plain catalog.
  absl::Time metadata_expires = absl::InfiniteFuture();
  // For the log: "unsigned (plain YAML catalog)" or "signed: root v1, ...".
  std::string summary = "unsigned (plain YAML catalog)";
};

class Catalog {
 public:
  // path name -> artifact
  using ModelArtifacts = std::map<std::string, CatalogArtifact, std::less<>>;
  using ModelFactsMap = std::map<std::string, policy::ModelFacts, std::less<>>;

  Catalog(std::string default_model, std::map<std::string, ModelArtifacts, std::less<>> models,
          std::string version, std::string source_name, CatalogTrust trust = {},
          ModelFactsMap model_facts = {});

  const std::string& default_model() const { return default_model_; }
  // nullptr when the catalog does not know the model.
  const ModelArtifacts* FindModel(absl::string_view model) const;
  // "a, b, c": for the NOT_FOUND message of an unknown model.
  const std::string& known_models() const { return known_models_; }
  // "sha256:" + 16 hex digits of the document text.
  const std::string& version() const { return version_; }
  const std::string& source_name() const { return source_name_; }
  const CatalogTrust& trust() const { return trust_; }
  const std::map<std::string, ModelArtifacts, std::less<>>& models() const { return models_; }
  // The model's facts (`model_facts`); all unknown when the catalog gives
  // none for it.
  const policy::ModelFacts& FindModelFacts(absl::string_view model) const;
  const ModelFactsMap& model_facts() const { return model_facts_; }

 private:
  std::string default_model_;
  std::map<std::string, ModelArtifacts, std::less<>> models_;
  std::string known_models_;
  std::string version_;
  std::string source_name_;
  CatalogTrust trust_;
  ModelFactsMap model_facts_;
};

// Parses and validates a whole document against `policy`: every name in
// policy.ReachablePathNames() must have an artifact for every model, and
// `model_facts` may name only models of `models`. Any
// fault refuses the document with INVALID_ARGUMENT naming
// `source_name:line` and the field path, or the limit above it is over.
// CANCELLED when `cancel` is set while the YAML is read.
absl::StatusOr<std::shared_ptr<const Catalog>> LoadCatalog(
    absl::string_view yaml_text, absl::string_view source_name, const policy::Policy& policy,
    const std::atomic<bool>* cancel = nullptr);

}  // namespace weightpath::server
