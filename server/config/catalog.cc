#include "server/config/catalog.h"

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
#include "server/config/content_hash.h"
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

absl::StatusOr<CatalogArtifact> ParseArtifact(const yaml::Reader& reader,
                                              const yaml::Entry& artifact_entry) {
  ASSIGN_OR_RETURN(const yaml::Map map,
                   yaml::Map::Read(reader, artifact_entry,
                                   {"uri", "sha256", "size_bytes", "version", "target_path"}));
  CatalogArtifact artifact;
  for (const yaml::Entry& entry : map.entries()) {
    if (entry.key == "uri") {
      ASSIGN_OR_RETURN(artifact.uri, yaml::ReadString(reader, entry));
      if (!HasSupportedScheme(artifact.uri)) {
        return yaml::Fault(reader, entry,
                           absl::StrCat("\"", artifact.uri,
                                        "\" must start with https://, http:// or file://"));
      }
    } else if (entry.key == "sha256") {
      ASSIGN_OR_RETURN(artifact.sha256, yaml::ReadString(reader, entry));
      if (!IsLowercaseHexSha256(artifact.sha256)) {
        return yaml::Fault(reader, entry, "must be 64 lowercase hex digits");
      }
    } else if (entry.key == "size_bytes") {
      ASSIGN_OR_RETURN(const std::string text, yaml::ReadString(reader, entry));
      if (!absl::SimpleAtoi(text, &artifact.size_bytes) || artifact.size_bytes == 0) {
        return yaml::Fault(reader, entry,
                           absl::StrCat("\"", text, "\" must be a positive whole number of bytes"));
      }
    } else if (entry.key == "version") {
      ASSIGN_OR_RETURN(artifact.version, yaml::ReadString(reader, entry));
    } else if (entry.key == "target_path") {
      ASSIGN_OR_RETURN(artifact.target_path, yaml::ReadString(reader, entry));
      if (absl::Status valid = CheckTargetPath(artifact.target_path); !valid.ok()) {
        return yaml::Fault(reader, entry,
                           absl::StrCat("\"", artifact.target_path, "\": ", valid.message()));
      }
    }
  }
  for (absl::string_view required : {"uri", "sha256", "size_bytes"}) {
    RETURN_IF_ERROR(map.Require(required, "is missing").status());
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
                   yaml::Map::Read(reader, root, "", {"default_model", "models"}));
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

  if (default_model_entry == nullptr) return top.Require("default_model", "is missing").status();
  if (default_model.empty()) return yaml::Fault(reader, *default_model_entry, "is empty");
  if (models.find(default_model) == models.end()) {
    return yaml::Fault(reader, *default_model_entry,
                       absl::StrCat("\"", default_model, "\" is not one of the models"));
  }
  return std::make_shared<const Catalog>(std::move(default_model), std::move(models),
                                         ShortContentVersion(yaml_text),
                                         std::string(reader.source_name()));
}

}  // namespace

void FillArtifact(const CatalogArtifact& artifact, v1::Artifact* out) {
  out->set_uri(artifact.uri);
  out->set_sha256(artifact.sha256);
  out->set_size_bytes(artifact.size_bytes);
  out->set_version(artifact.version);
  out->set_target_path(artifact.target_path);
  out->set_signed_target(artifact.signed_target);
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
                 std::string source_name, CatalogTrust trust)
    : default_model_(std::move(default_model)),
      models_(std::move(models)),
      version_(std::move(version)),
      source_name_(std::move(source_name)),
      trust_(std::move(trust)) {
  std::vector<absl::string_view> names;
  names.reserve(models_.size());
  for (const auto& [name, artifacts] : models_) names.push_back(name);
  known_models_ = absl::StrJoin(names, ", ");
}

const Catalog::ModelArtifacts* Catalog::FindModel(absl::string_view model) const {
  auto it = models_.find(model);
  return it == models_.end() ? nullptr : &it->second;
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
