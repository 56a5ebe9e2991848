#include "server/config/catalog.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/bounded_yaml.h"
#include "common/strict_yaml.h"
#include "common/control_characters.h"
#include "common/status_macros.h"
#include "policy/model_facts.h"
#include "server/config/content_hash.h"
#include "trust/build_manifest.h"
#include "weightpath/v1/weightpath.pb.h"
#include "yaml-cpp/yaml.h"

namespace weightpath::server {
namespace {

bool IsLowercaseHexSha256(absl::string_view text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool HasSupportedScheme(absl::string_view uri) {
  for (absl::string_view scheme : {"https://", "http://", "file://"}) {
    if (absl::StartsWith(uri, scheme) && uri.size() > scheme.size()) return true;
  }
  return false;
}

absl::StatusOr<std::string> ReadUri(const yaml::Reader& reader, const yaml::Entry& entry) {
  ASSIGN_OR_RETURN(std::string uri, yaml::ReadString(reader, entry));
  if (!HasSupportedScheme(uri)) {
    return yaml::Fault(reader, entry,
                       absl::StrCat("\"", uri, "\" must start with https://, http:// or file://"));
  }
  return uri;
}

absl::StatusOr<std::string> ReadSha256(const yaml::Reader& reader, const yaml::Entry& entry) {
  ASSIGN_OR_RETURN(std::string sha256, yaml::ReadString(reader, entry));
  if (!IsLowercaseHexSha256(sha256)) {
    return yaml::Fault(reader, entry, "must be 64 lowercase hex digits");
  }
  return sha256;
}

// One file of `files:`; its uri is left empty when it gives none.
absl::StatusOr<CatalogBuildFile> ParseBuildFile(const yaml::Reader& reader,
                                                const yaml::Entry& file_entry) {
  ASSIGN_OR_RETURN(const yaml::Map map, yaml::Map::Read(reader, file_entry,
                                                        {"path", "sha256", "size_bytes", "uri"}));
  CatalogBuildFile file;
  for (const yaml::Entry& entry : map.entries()) {
    if (entry.key == "path") {
      ASSIGN_OR_RETURN(file.path, yaml::ReadString(reader, entry));
      if (absl::Status valid = trust::CheckBuildFilePath(file.path); !valid.ok()) {
        return yaml::Fault(reader, entry, absl::StrCat("\"", file.path, "\": ", valid.message()));
      }
    } else if (entry.key == "sha256") {
      ASSIGN_OR_RETURN(file.sha256, ReadSha256(reader, entry));
    } else if (entry.key == "size_bytes") {
      // A file of a model directory may be empty; the manifest writes sizes
      // as signed 64-bit integers.
      ASSIGN_OR_RETURN(const int64_t size, yaml::ReadInt64(reader, entry, 0,
                                                           std::numeric_limits<int64_t>::max()));
      file.size_bytes = static_cast<uint64_t>(size);
    } else if (entry.key == "uri") {
      ASSIGN_OR_RETURN(file.uri, ReadUri(reader, entry));
    }
  }
  for (absl::string_view required : {"path", "sha256", "size_bytes"}) {
    RETURN_IF_ERROR(map.Require(required, "is missing").status());
  }
  return file;
}

// `files:` (and `base_uri`) of a directory build: every file with its uri,
// sorted by path, and the artifact's digest made the manifest's.
absl::Status ParseBuildFiles(const yaml::Reader& reader, const yaml::Map& map,
                             CatalogArtifact* artifact) {
  const yaml::Entry& files_entry = *map.Find("files");
  for (absl::string_view single : {"uri", "sha256", "size_bytes", "tokenizer"}) {
    if (const yaml::Entry* entry = map.Find(single); entry != nullptr) {
      return reader.FaultAt(entry->key_mark, entry->path,
                            absl::StrCat("a directory build (`files`) takes no `", single,
                                         "`: ", single == "tokenizer"
                                                    ? "the engine reads the tokenizer files of "
                                                      "the directory"
                                                    : "each file gives its own, and the build's "
                                                      "sha256 and size are its manifest's"));
    }
  }
  std::string base_uri;
  if (const yaml::Entry* entry = map.Find("base_uri"); entry != nullptr) {
    ASSIGN_OR_RETURN(base_uri, ReadUri(reader, *entry));
  }
  if (!files_entry.value.IsSequence() || files_entry.value.size() == 0) {
    return yaml::Fault(reader, files_entry, "must list at least one file");
  }
  // Counted before any item is read: a hostile list costs nothing more.
  if (files_entry.value.size() > trust::kMaxBuildFiles) {
    return yaml::Fault(reader, files_entry,
                       absl::StrCat("lists ", files_entry.value.size(), " files; at most ",
                                    trust::kMaxBuildFiles, " are accepted"));
  }
  ASSIGN_OR_RETURN(const std::vector<yaml::Entry> items,
                   yaml::ReadList(reader, files_entry, "a list of files"));
  std::vector<CatalogBuildFile> files;
  files.reserve(items.size());
  for (const yaml::Entry& item : items) {
    ASSIGN_OR_RETURN(CatalogBuildFile file, ParseBuildFile(reader, item));
    if (file.uri.empty()) {
      if (base_uri.empty()) {
        return yaml::Fault(reader, item, "has no uri, and the build gives no base_uri to join "
                                         "its path to");
      }
      file.uri = JoinUrl(base_uri, file.path);
    }
    files.push_back(std::move(file));
  }
  std::vector<trust::BuildManifestFile> manifest;
  manifest.reserve(files.size());
  for (const CatalogBuildFile& file : files) {
    manifest.push_back({file.path, file.sha256, file.size_bytes});
  }
  // Duplicates, case clashes, a file under another: the list as a whole.
  if (absl::Status valid = trust::ValidateBuildFiles(manifest); !valid.ok()) {
    return yaml::Fault(reader, files_entry, valid.message());
  }
  std::sort(files.begin(), files.end(),
            [](const CatalogBuildFile& a, const CatalogBuildFile& b) { return a.path < b.path; });
  const trust::BuildManifestDigest digest = trust::DigestBuildManifest(manifest);
  artifact->sha256 = digest.sha256;
  artifact->size_bytes = digest.size_bytes;
  artifact->files = std::move(files);
  return absl::OkStatus();
}

absl::StatusOr<CatalogArtifact> ParseArtifact(const yaml::Reader& reader,
                                              const yaml::Entry& artifact_entry) {
  ASSIGN_OR_RETURN(const yaml::Map map,
                   yaml::Map::Read(reader, artifact_entry,
                                   {"uri", "sha256", "size_bytes", "version", "target_path",
                                    "tokenizer", "files", "base_uri"}));
  CatalogArtifact artifact;
  for (const yaml::Entry& entry : map.entries()) {
    if (entry.key == "version") {
      ASSIGN_OR_RETURN(artifact.version, yaml::ReadString(reader, entry));
    } else if (entry.key == "target_path") {
      ASSIGN_OR_RETURN(artifact.target_path, yaml::ReadString(reader, entry));
      if (absl::Status valid = CheckTargetPath(artifact.target_path); !valid.ok()) {
        return yaml::Fault(reader, entry,
                           absl::StrCat("\"", artifact.target_path, "\": ", valid.message()));
      }
    }
  }
  if (map.Find("files") != nullptr) {
    RETURN_IF_ERROR(ParseBuildFiles(reader, map, &artifact));
    return artifact;
  }
  for (const yaml::Entry& entry : map.entries()) {
    if (entry.key == "uri") {
      ASSIGN_OR_RETURN(artifact.uri, ReadUri(reader, entry));
    } else if (entry.key == "sha256") {
      ASSIGN_OR_RETURN(artifact.sha256, ReadSha256(reader, entry));
    } else if (entry.key == "size_bytes") {
      ASSIGN_OR_RETURN(const std::string text, yaml::ReadString(reader, entry));
      if (!absl::SimpleAtoi(text, &artifact.size_bytes) || artifact.size_bytes == 0) {
        return yaml::Fault(reader, entry,
                           absl::StrCat("\"", text, "\" must be a positive whole number of bytes"));
      }
    } else if (entry.key == "tokenizer") {
      ASSIGN_OR_RETURN(artifact.tokenizer, yaml::ReadNonEmptyString(reader, entry));
    } else if (entry.key == "base_uri") {
      return reader.FaultAt(entry.key_mark, entry.path,
                            "only a directory build (`files`) takes a base_uri");
    }
  }
  for (absl::string_view required : {"uri", "sha256", "size_bytes"}) {
    RETURN_IF_ERROR(map.Require(required, "is missing (or give `files` for a directory build)")
                        .status());
  }
  return artifact;
}

absl::StatusOr<std::shared_ptr<const Catalog>> ParseCatalog(const yaml::Reader& reader,
                                                            const YAML::Node& root,
                                                            absl::string_view yaml_text,
                                                            const policy::Policy& policy) {
  if (!root.IsMap()) {
    return reader.FaultAt(YAML::Mark::null_mark(), "",
                          "the catalog must be a mapping with default_model and models");
  }
  ASSIGN_OR_RETURN(const yaml::Map top,
                   yaml::Map::Read(reader, root, "", {"default_model", "models", "model_facts"}));
  std::string default_model;
  const yaml::Entry* default_model_entry = top.Find("default_model");
  if (default_model_entry != nullptr) {
    ASSIGN_OR_RETURN(default_model, yaml::ReadString(reader, *default_model_entry));
  }
  ASSIGN_OR_RETURN(const yaml::Entry* models_entry, top.Require("models", "is missing"));
  if (!models_entry->value.IsMap() || models_entry->value.size() == 0) {
    return yaml::Fault(reader, *models_entry, "must map at least one model name to its artifacts");
  }
  ASSIGN_OR_RETURN(const yaml::Map model_map, yaml::Map::ReadAnyKeys(reader, *models_entry));

  std::map<std::string, Catalog::ModelArtifacts, std::less<>> models;
  const std::vector<std::string> reachable_paths = policy.ReachablePathNames();
  for (const yaml::Entry& model : model_map.entries()) {
    if (model.key.empty()) return reader.FaultAt(model.key_mark, model.path, "model name is empty");
    if (!model.value.IsMap()) return yaml::Fault(reader, model, "must map path names to artifacts");
    ASSIGN_OR_RETURN(const yaml::Map path_map, yaml::Map::ReadAnyKeys(reader, model));
    Catalog::ModelArtifacts artifacts;
    for (const yaml::Entry& path : path_map.entries()) {
      ASSIGN_OR_RETURN(CatalogArtifact artifact, ParseArtifact(reader, path));
      artifacts.emplace(path.key, std::move(artifact));
    }
    // The policy can hand any of these names to a device: a missing one would
    // only surface as a failed resolve on some device much later.
    for (const std::string& reachable : reachable_paths) {
      if (artifacts.find(reachable) == artifacts.end()) {
        return reader.Fault(model.value, yaml::ChildPath(model.path, reachable),
                            absl::StrCat("is missing: policy ", policy.version(),
                                         " can return path \"", reachable, "\""));
      }
    }
    models.emplace(model.key, std::move(artifacts));
  }

  Catalog::ModelFactsMap model_facts;
  if (const yaml::Entry* facts_entry = top.Find("model_facts"); facts_entry != nullptr) {
    ASSIGN_OR_RETURN(model_facts, policy::ReadModelFacts(reader, *facts_entry));
    // Facts for a model the catalog cannot serve are a typo in its name:
    // the model it meant would derive its engine arguments without them.
    ASSIGN_OR_RETURN(const yaml::Map named, yaml::Map::ReadAnyKeys(reader, *facts_entry));
    for (const yaml::Entry& model : named.entries()) {
      if (models.find(model.key) == models.end()) {
        return reader.FaultAt(model.key_mark, model.path,
                              absl::StrCat("\"", model.key, "\" is not one of the models"));
      }
    }
  }

  if (default_model_entry == nullptr) return top.Require("default_model", "is missing").status();
  if (default_model.empty()) return yaml::Fault(reader, *default_model_entry, "is empty");
  if (models.find(default_model) == models.end()) {
    return yaml::Fault(reader, *default_model_entry,
                       absl::StrCat("\"", default_model, "\" is not one of the models"));
  }
  return std::make_shared<const Catalog>(std::move(default_model), std::move(models),
                                         ShortContentVersion(yaml_text),
                                         std::string(reader.source_name()), CatalogTrust(),
                                         std::move(model_facts));
}

}  // namespace

std::string UrlPath(absl::string_view path) {
  std::string out;
  out.reserve(path.size());
  for (unsigned char c : path) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~' || c == '/') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

std::string JoinUrl(absl::string_view base_url, absl::string_view path) {
  while (!base_url.empty() && base_url.back() == '/') base_url.remove_suffix(1);
  return absl::StrCat(base_url, "/", UrlPath(path));
}

void FillArtifact(const CatalogArtifact& artifact, v1::Artifact* out) {
  out->set_uri(artifact.uri);
  out->set_sha256(artifact.sha256);
  out->set_size_bytes(artifact.size_bytes);
  out->set_version(artifact.version);
  out->set_target_path(artifact.target_path);
  out->set_signed_target(artifact.signed_target);
  out->set_tokenizer(artifact.tokenizer);
  for (const CatalogBuildFile& file : artifact.files) {
    v1::BuildFile* built = out->add_files();
    built->set_path(file.path);
    built->set_sha256(file.sha256);
    built->set_size_bytes(file.size_bytes);
    built->set_uri(file.uri);
  }
}

absl::Status CheckTargetPath(absl::string_view path) {
  if (path.empty()) return absl::InvalidArgumentError("empty target path");
  if (path.size() > kMaxTargetPathBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("longer than ", kMaxTargetPathBytes, " bytes"));
  }
  if (path.front() == '/') return absl::InvalidArgumentError("must be relative (no leading '/')");
  for (char c : path) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError("control character");
    }
    if (c == '\\') return absl::InvalidArgumentError("backslash");
  }
  for (absl::string_view component : absl::StrSplit(path, '/')) {
    if (component.empty()) return absl::InvalidArgumentError("empty path component");
    if (component == "." || component == "..") {
      return absl::InvalidArgumentError("'.' or '..' component");
    }
  }
  return absl::OkStatus();
}

Catalog::Catalog(std::string default_model,
                 std::map<std::string, ModelArtifacts, std::less<>> models, std::string version,
                 std::string source_name, CatalogTrust trust, ModelFactsMap model_facts)
    : default_model_(std::move(default_model)),
      models_(std::move(models)),
      version_(std::move(version)),
      source_name_(std::move(source_name)),
      trust_(std::move(trust)),
      model_facts_(std::move(model_facts)) {
  std::vector<absl::string_view> names;
  names.reserve(models_.size());
  for (const auto& [name, artifacts] : models_) names.push_back(name);
  known_models_ = absl::StrJoin(names, ", ");
}

const Catalog::ModelArtifacts* Catalog::FindModel(absl::string_view model) const {
  auto it = models_.find(model);
  return it == models_.end() ? nullptr : &it->second;
}

const policy::ModelFacts& Catalog::FindModelFacts(absl::string_view model) const {
  static const policy::ModelFacts kUnknown;
  auto it = model_facts_.find(model);
  return it == model_facts_.end() ? kUnknown : it->second;
}

absl::StatusOr<std::shared_ptr<const Catalog>> LoadCatalog(absl::string_view yaml_text,
                                                           absl::string_view source_name,
                                                           const policy::Policy& policy,
                                                           const std::atomic<bool>* cancel) {
  const yaml::Reader reader(source_name);
  yaml::Limits limits;
  limits.max_bytes = kMaxCatalogBytes;
  limits.max_nodes = kMaxCatalogNodes;
  limits.cancel = cancel;
  ASSIGN_OR_RETURN(const YAML::Node root, yaml::LoadBounded(yaml_text, source_name, limits));
  try {
    return ParseCatalog(reader, root, yaml_text, policy);
  } catch (const YAML::Exception& e) {
    // A conversion yaml-cpp refuses while the tree is read.
    return absl::InvalidArgumentError(absl::StrCat(yaml::Place(source_name, e.mark),
                                                   ": invalid YAML: ", ControlEscaped(e.msg)));
  }
}

}  // namespace weightpath::server
