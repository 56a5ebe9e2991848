// The artifact catalog: YAML text in, checked against the bundled policy.
// An accepted catalog must carry an artifact for every reachable path of
// every model it names, starting with its default model (the server hands
// these out without looking again).
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "policy/policy.h"
#include "server/config/catalog.h"
#include "tests/fuzz/fuzz_support.h"
#include "trust/build_manifest.h"

namespace weightpath::fuzz {
namespace {

void CheckUri(const std::string& uri) {
  FUZZ_CHECK(absl::StartsWith(uri, "https://") || absl::StartsWith(uri, "http://") ||
                 absl::StartsWith(uri, "file://"),
             absl::StrCat("unsupported uri accepted: ", uri));
}

void CheckModel(const server::Catalog& catalog, const policy::Policy& policy,
                absl::string_view model) {
  const server::Catalog::ModelArtifacts* artifacts = catalog.FindModel(model);
  FUZZ_CHECK(artifacts != nullptr, absl::StrCat("listed model not found: ", model));
  for (const std::string& name : policy.ReachablePathNames()) {
    auto found = artifacts->find(name);
    FUZZ_CHECK(found != artifacts->end(),
               absl::StrCat("model ", model, " has no artifact for reachable path ", name));
    const server::CatalogArtifact& artifact = found->second;
    FUZZ_CHECK(artifact.sha256.size() == 64, "sha256 is not 64 digits");
    for (char c : artifact.sha256) {
      FUZZ_CHECK(absl::ascii_isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f'),
                 "sha256 is not lowercase hex");
    }
    FUZZ_CHECK(artifact.size_bytes > 0, "an artifact of zero bytes was accepted");
    if (!artifact.directory_build()) {
      CheckUri(artifact.uri);
      continue;
    }
    // A directory build is fetched file by file: it has no URI of its own,
    // and each file is checked like a single-file build.
    FUZZ_CHECK(artifact.uri.empty(),
               absl::StrCat("a directory build also has a uri: ", artifact.uri));
    FUZZ_CHECK(artifact.tokenizer.empty(), "a directory build has a --tokenizer");
    std::set<std::string> paths;
    for (const server::CatalogBuildFile& file : artifact.files) {
      FUZZ_CHECK(trust::CheckBuildFilePath(file.path).ok(),
                 absl::StrCat("hostile build file path accepted: ", file.path));
      FUZZ_CHECK(paths.insert(file.path).second,
                 absl::StrCat("build file listed twice: ", file.path));
      FUZZ_CHECK(file.sha256.size() == 64, "a build file's sha256 is not 64 digits");
      CheckUri(file.uri);
    }
  }
}

}  // namespace
}  // namespace weightpath::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weightpath;
  static const auto* const kPolicy = new std::shared_ptr<const policy::Policy>(policy::DefaultPolicy());
  const std::string_view text = fuzz::Text(data, size);
  auto catalog = server::LoadCatalog(absl::string_view(text.data(), text.size()), "fuzz-catalog.yaml",
                                     **kPolicy);
  if (!catalog.ok()) {
    FUZZ_CHECK(fuzz::IsCleanRefusal(catalog.status()), catalog.status().ToString());
    return 0;
  }
  fuzz::CheckModel(**catalog, **kPolicy, (*catalog)->default_model());
  // known_models() is "a, b, c" for the NOT_FOUND message; a model whose
  // name itself holds ", " cannot be split back, so only whole names that
  // are found are checked.
  for (absl::string_view model : absl::StrSplit((*catalog)->known_models(), ", ")) {
    if ((*catalog)->FindModel(model) != nullptr) fuzz::CheckModel(**catalog, **kPolicy, model);
  }
  FUZZ_CHECK(absl::StartsWith((*catalog)->version(), "sha256:"), "catalog version malformed");
  return 0;
}
