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
#include "common/control_characters.h"
#include "common/status_macros.h"
#include "server/config/content_hash.h"
#include "weightpath/v1/weightpath.pb.h"
#include "yaml-cpp/yaml.h"

namespace weightpath::server {
namespace {

// Errors point at a place an operator can open in an editor: file:line and
// the dotted field path.
class CatalogErrors {
 public:
  explicit CatalogErrors(absl::string_view source_name) : source_name_(source_name) {}

  // Field paths and problems quote the document's keys and values, which may
  // hold newlines: escaped, they cannot forge a log line.
  absl::Status At(const YAML::Node& node, absl::string_view field, absl::string_view problem) const {
    const YAML::Mark mark = node.Mark();
    std::string place = std::string(source_name_);
    if (mark.line >= 0) absl::StrAppend(&place, ":", mark.line + 1);
    return absl::InvalidArgumentError(
        absl::StrCat(place, ": ", ControlEscaped(field), ": ", ControlEscaped(problem)));
  }
  absl::Status Whole(absl::string_view problem) const {
    return absl::InvalidArgumentError(absl::StrCat(source_name_, ": ", ControlEscaped(problem)));
  }

 private:
  absl::string_view source_name_;
};

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

absl::StatusOr<std::string> ReadScalar(const CatalogErrors& errors, const YAML::Node& node,
                                       absl::string_view field) {
  if (!node.IsScalar()) return errors.At(node, field, "must be a string");
  return node.Scalar();
}

absl::StatusOr<CatalogArtifact> ParseArtifact(const CatalogErrors& errors, const YAML::Node& node,
                                              const std::string& field) {
  if (!node.IsMap()) return errors.At(node, field, "must be a mapping with uri, sha256, size_bytes");
  CatalogArtifact artifact;
  bool has_uri = false, has_sha256 = false, has_size = false;
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    const std::string key_field = absl::StrCat(field, ".", key);
    const YAML::Node& value = entry.second;
    if (key == "uri") {
      ASSIGN_OR_RETURN(artifact.uri, ReadScalar(errors, value, key_field));
      if (!HasSupportedScheme(artifact.uri)) {
        return errors.At(value, key_field,
                         absl::StrCat("\"", artifact.uri,
                                      "\" must start with https://, http:// or file://"));
      }
      has_uri = true;
    } else if (key == "sha256") {
      ASSIGN_OR_RETURN(artifact.sha256, ReadScalar(errors, value, key_field));
      if (!IsLowercaseHexSha256(artifact.sha256)) {
        return errors.At(value, key_field, "must be 64 lowercase hex digits");
      }
      has_sha256 = true;
    } else if (key == "size_bytes") {
      ASSIGN_OR_RETURN(const std::string text, ReadScalar(errors, value, key_field));
      if (!absl::SimpleAtoi(text, &artifact.size_bytes) || artifact.size_bytes == 0) {
        return errors.At(value, key_field,
                         absl::StrCat("\"", text, "\" must be a positive whole number of bytes"));
      }
      has_size = true;
    } else if (key == "version") {
      ASSIGN_OR_RETURN(artifact.version, ReadScalar(errors, value, key_field));
    } else if (key == "target_path") {
      ASSIGN_OR_RETURN(artifact.target_path, ReadScalar(errors, value, key_field));
      if (absl::Status valid = CheckTargetPath(artifact.target_path); !valid.ok()) {
        return errors.At(value, key_field,
                         absl::StrCat("\"", artifact.target_path, "\": ", valid.message()));
      }
    } else {
      return errors.At(entry.first, key_field,
                       "unknown key (expected uri, sha256, size_bytes, version, target_path)");
    }
  }
  if (!has_uri) return errors.At(node, absl::StrCat(field, ".uri"), "is missing");
  if (!has_sha256) return errors.At(node, absl::StrCat(field, ".sha256"), "is missing");
  if (!has_size) return errors.At(node, absl::StrCat(field, ".size_bytes"), "is missing");
  return artifact;
}

absl::StatusOr<std::shared_ptr<const Catalog>> ParseCatalog(const CatalogErrors& errors,
                                                            const YAML::Node& root,
                                                            absl::string_view yaml_text,
                                                            absl::string_view source_name,
                                                            const policy::Policy& policy) {
  if (!root.IsMap()) return errors.Whole("the catalog must be a mapping with default_model and models");
  std::string default_model;
  // A default-constructed YAML::Node counts as defined, so presence is kept
  // apart from the nodes.
  YAML::Node default_model_node;
  YAML::Node models_node;
  bool has_default_model = false;
  bool has_models = false;
  for (const auto& entry : root) {
    const std::string key = entry.first.Scalar();
    if (key == "default_model") {
      ASSIGN_OR_RETURN(default_model, ReadScalar(errors, entry.second, key));
      default_model_node = entry.second;
      has_default_model = true;
    } else if (key == "models") {
      models_node = entry.second;
      has_models = true;
    } else {
      return errors.At(entry.first, key, "unknown key (expected default_model, models)");
    }
  }
  if (!has_models) return errors.Whole("models: is missing");
  if (!models_node.IsMap() || models_node.size() == 0) {
    return errors.At(models_node, "models", "must map at least one model name to its artifacts");
  }

  std::map<std::string, Catalog::ModelArtifacts, std::less<>> models;
  const std::vector<std::string> reachable_paths = policy.ReachablePathNames();
  for (const auto& model_entry : models_node) {
    const std::string model = model_entry.first.Scalar();
    const std::string model_field = absl::StrCat("models.", model);
    if (model.empty()) return errors.At(model_entry.first, model_field, "model name is empty");
    if (!model_entry.second.IsMap()) {
      return errors.At(model_entry.second, model_field, "must map path names to artifacts");
    }
    Catalog::ModelArtifacts artifacts;
    for (const auto& path_entry : model_entry.second) {
      const std::string path_name = path_entry.first.Scalar();
      const std::string path_field = absl::StrCat(model_field, ".", path_name);
      ASSIGN_OR_RETURN(CatalogArtifact artifact, ParseArtifact(errors, path_entry.second, path_field));
      artifacts.emplace(path_name, std::move(artifact));
    }
    // The policy can hand any of these names to a device: a missing one would
    // only surface as a failed resolve on some device much later.
    for (const std::string& reachable : reachable_paths) {
      if (artifacts.find(reachable) == artifacts.end()) {
        return errors.At(model_entry.second, absl::StrCat(model_field, ".", reachable),
                         absl::StrCat("is missing: policy ", policy.version(),
                                      " can return path \"", reachable, "\""));
      }
    }
    models.emplace(model, std::move(artifacts));
  }

  if (default_model.empty()) {
    return has_default_model
               ? errors.At(default_model_node, "default_model", "is empty")
               : errors.Whole("default_model: is missing");
  }
  if (models.find(default_model) == models.end()) {
    return errors.At(default_model_node, "default_model",
                     absl::StrCat("\"", default_model, "\" is not one of the models"));
  }
  return std::make_shared<const Catalog>(std::move(default_model), std::move(models),
                                         ShortContentVersion(yaml_text), std::string(source_name));
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
  const CatalogErrors errors(source_name);
  yaml::Limits limits;
  limits.max_bytes = kMaxCatalogBytes;
  limits.max_nodes = kMaxCatalogNodes;
  limits.cancel = cancel;
  ASSIGN_OR_RETURN(const YAML::Node root, yaml::LoadBounded(yaml_text, source_name, limits));
  try {
    return ParseCatalog(errors, root, yaml_text, source_name, policy);
  } catch (const YAML::Exception& e) {
    // A conversion yaml-cpp refuses while the tree is read.
    return absl::InvalidArgumentError(absl::StrCat(yaml::Place(source_name, e.mark),
                                                   ": invalid YAML: ", ControlEscaped(e.msg)));
  }
}

}  // namespace weightpath::server
