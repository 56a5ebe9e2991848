#include "server/config/signed_catalog.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/control_characters.h"
#include "common/status_macros.h"
#include "policy/hardware_class.h"
#include "server/config/content_hash.h"
#include "server/config/file_fingerprint.h"
#include "trust/json.h"

namespace weightpath::server {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool Exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

std::string StripTrailingSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

absl::Status ErrnoError(const std::string& what, const std::string& path) {
  const int error = errno;
  return absl::UnavailableError(absl::StrCat(path, ": ", what, ": ", std::strerror(error)));
}

bool IsLowercaseSha256(absl::string_view text) {
  if (text.size() != 64) return false;
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

bool IsCatalogRepository(const std::string& path) { return !path.empty() && IsDirectory(path); }

std::string CatalogMetadataDirectory(const std::string& repository) {
  const std::string root = StripTrailingSlashes(repository);
  const std::string metadata = root + "/metadata";
  return IsDirectory(metadata) ? metadata : root;
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& bytes, unsigned mode) {
  const std::string temporary = absl::StrCat(path, ".tmp.", ::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                        static_cast<mode_t>(mode));
  if (fd < 0) return ErrnoError("cannot create", temporary);
  size_t written = 0;
  absl::Status status;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      status = ErrnoError("write", temporary);
      break;
    }
    written += static_cast<size_t>(n);
  }
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoError("fsync", temporary);
  ::close(fd);
  if (status.ok() && ::rename(temporary.c_str(), path.c_str()) != 0) {
    status = ErrnoError("cannot rename into place", path);
  }
  if (!status.ok()) {
    ::unlink(temporary.c_str());
    return status;
  }
  const int directory = ::open(DirectoryOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory >= 0) {
    ::fsync(directory);
    ::close(directory);
  }
  return absl::OkStatus();
}

trust::MetadataFetcher DirectoryMetadataFetcher(std::string directory,
                                                const std::map<std::string, std::string>* overlay,
                                                const std::atomic<bool>* cancel) {
  return [directory = std::move(directory), overlay,
          cancel](const trust::MetadataRequest& request) -> absl::StatusOr<std::string> {
    if (cancel != nullptr && cancel->load()) {
      return absl::CancelledError("the server is shutting down");
    }
    // Names come from trust::MetadataFileName, which percent-encodes '/'.
    if (request.file_name.empty() || request.file_name.find('/') != std::string::npos ||
        request.file_name.front() == '.') {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", ControlEscaped(request.file_name), "\" is not a metadata file name"));
    }
    if (overlay != nullptr) {
      auto it = overlay->find(request.file_name);
      if (it != overlay->end()) {
        if (static_cast<int64_t>(it->second.size()) > request.max_bytes) {
          return absl::ResourceExhaustedError(absl::StrCat(
              request.file_name, ": more than the ", request.max_bytes, " bytes allowed"));
        }
        return it->second;
      }
    }
    const std::string path = absl::StrCat(directory, "/", request.file_name);
    absl::StatusOr<std::string> bytes =
        ReadWholeFile(path, static_cast<size_t>(std::max<int64_t>(request.max_bytes, 0)));
    // ReadWholeFile refuses an oversized file as INVALID_ARGUMENT; to the
    // client workflow it is the endless-data attack.
    if (!bytes.ok() && bytes.status().code() == absl::StatusCode::kInvalidArgument &&
        (absl::StrContains(bytes.status().message(), " are accepted") ||
         absl::StrContains(bytes.status().message(), "grew past"))) {
      return absl::ResourceExhaustedError(absl::StrCat(
          bytes.status().message(), " (", request.role, " metadata is limited to ",
          request.max_bytes, " bytes)"));
    }
    return bytes;
  };
}

SignedCatalogSource::SignedCatalogSource(SignedCatalogOptions options)
    : options_(std::move(options)), metadata_dir_(CatalogMetadataDirectory(options_.repository)) {}

absl::StatusOr<std::shared_ptr<SignedCatalogSource>> SignedCatalogSource::Create(
    SignedCatalogOptions options) {
  if (!IsCatalogRepository(options.repository)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--catalog=", options.repository, ": not a directory"));
  }
  if (options.trusted_root_path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--catalog=", options.repository,
        " is a TUF repository: --catalog_root must name the trusted root.json to verify it from "
        "(e.g. REPO/metadata/1.root.json, as provisioned on devices)"));
  }
  if (!Exists(options.trusted_root_path)) {
    return absl::NotFoundError(
        absl::StrCat("--catalog_root=", options.trusted_root_path, ": no such file"));
  }
  const std::string& url = options.artifact_base_url;
  if (url.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--catalog=", options.repository,
        " is a TUF repository: --catalog_artifact_url must say where the artifacts are served "
        "(an artifact's uri is URL/TARGET_PATH)"));
  }
  bool scheme = false;
  for (absl::string_view prefix : {"https://", "http://", "file://"}) {
    scheme = scheme || (absl::StartsWith(url, prefix) && url.size() > prefix.size());
  }
  if (!scheme) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--catalog_artifact_url=", url, ": must start with https://, http:// or file://"));
  }
  if (options.state_dir.empty()) {
    return absl::InvalidArgumentError(
        "--catalog_state_dir is required with a TUF repository catalog when --store is not "
        "sqlite:FILE (the trusted metadata must outlive a restart)");
  }
  if (::mkdir(options.state_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoError("--catalog_state_dir: cannot create", options.state_dir);
  }
  if (!IsDirectory(options.state_dir)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--catalog_state_dir=", options.state_dir, ": not a directory"));
  }
  options.artifact_base_url = StripTrailingSlashes(options.artifact_base_url);
  return std::shared_ptr<SignedCatalogSource>(new SignedCatalogSource(std::move(options)));
}

std::string SignedCatalogSource::state_path() const {
  return absl::StrCat(StripTrailingSlashes(options_.state_dir), "/", kCatalogTrustStateFile);
}

std::string SignedCatalogSource::lock_path() const {
  const std::string root = StripTrailingSlashes(options_.repository);
  return metadata_dir_ == root ? std::string() : root + "/.lock";
}

absl::StatusOr<trust::TrustedMetadataSet> SignedCatalogSource::StartSet(absl::Time now) {
  if (!state_.has_value() && Exists(state_path())) {
    ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(state_path(), kMaxTrustStateBytes));
    state_ = std::move(bytes);
  }
  if (state_.has_value()) {
    absl::StatusOr<trust::TrustedMetadataSet> set = trust::TrustedMetadataSet::Restore(*state_, now);
    if (!set.ok()) {
      return absl::Status(set.status().code(),
                          absl::StrCat(state_path(), " (the trusted state of an earlier start): ",
                                       set.status().message()));
    }
    return set;
  }
  ASSIGN_OR_RETURN(std::string root, ReadWholeFile(options_.trusted_root_path,
                                                   static_cast<size_t>(trust::MetadataLimits{}.root_max_bytes)));
  absl::StatusOr<trust::TrustedMetadataSet> set = trust::TrustedMetadataSet::Create(root, now);
  if (!set.ok()) {
    return absl::Status(set.status().code(), absl::StrCat("--catalog_root=", options_.trusted_root_path,
                                                          ": ", set.status().message()));
  }
  return set;
}

absl::StatusOr<std::shared_ptr<const Catalog>> SignedCatalogSource::Load(
    const policy::Policy& policy, const std::atomic<bool>* cancel) {
  const absl::Time now = absl::Now();  // the workflow's one start time
  absl::MutexLock lock(&mutex_);
  ASSIGN_OR_RETURN(trust::TrustedMetadataSet set, StartSet(now));
  const trust::MetadataFetcher fetch = DirectoryMetadataFetcher(metadata_dir_, nullptr, cancel);
  const auto refused = [&](const absl::Status& status) {
    if (status.code() == absl::StatusCode::kCancelled) return status;
    return absl::Status(status.code(), absl::StrCat(metadata_dir_, ": repository refused: ",
                                                    status.message()));
  };
  absl::StatusOr<trust::RefreshReport> report = trust::RefreshMetadata(set, fetch);
  if (!report.ok()) return refused(report.status());
  absl::StatusOr<std::vector<trust::TargetInfo>> targets = trust::ListTargets(set, &fetch);
  if (!targets.ok()) return refused(targets.status());
  // Trusted state first: what was verified can never be rolled back, even
  // if the catalog below is refused (a newer signed version stays newer).
  std::string serialized = set.SerializeTrusted();
  if (!state_.has_value() || *state_ != serialized) {
    RETURN_IF_ERROR(WriteFileAtomically(state_path(), serialized, 0600));
    state_ = std::move(serialized);
  }
  return BuildSignedCatalog(*targets, set, options_, metadata_dir_, policy);
}

absl::StatusOr<trust::TrustedMetadataSet> SignedCatalogSource::VerifyWithOverlay(
    const std::map<std::string, std::string>& overlay, absl::Time now) {
  absl::MutexLock lock(&mutex_);
  ASSIGN_OR_RETURN(trust::TrustedMetadataSet set, StartSet(now));
  const trust::MetadataFetcher fetch = DirectoryMetadataFetcher(metadata_dir_, &overlay, nullptr);
  RETURN_IF_ERROR(trust::RefreshMetadata(set, fetch).status());
  RETURN_IF_ERROR(trust::ListTargets(set, &fetch).status());
  return set;
}

absl::StatusOr<trust::Root> SignedCatalogSource::TrustedRoot(absl::Time now) {
  absl::MutexLock lock(&mutex_);
  ASSIGN_OR_RETURN(trust::TrustedMetadataSet set, StartSet(now));
  return set.root().signed_part;
}

absl::StatusOr<std::shared_ptr<const Catalog>> BuildSignedCatalog(
    const std::vector<trust::TargetInfo>& targets, const trust::TrustedMetadataSet& set,
    const SignedCatalogOptions& options, const std::string& source_name,
    const policy::Policy& policy) {
  const auto refuse = [&](const std::string& problem) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": catalog refused: ", ControlEscaped(problem)));
  };
  std::map<std::string, Catalog::ModelArtifacts, std::less<>> models;
  std::map<std::string, SignedBuild, std::less<>> signed_builds;
  // (model, weight path) -> the hardware classes its target is built for.
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> built_for;
  trust::Json description = trust::Json::MakeArray();
  for (const trust::TargetInfo& target : targets) {
    // Targets that are not weightpath artifacts (no custom.model: an agent
    // build, a document) may share the repository.
    const trust::Json* model_field =
        target.file.custom.is_object() ? target.file.custom.Find("model") : nullptr;
    if (model_field == nullptr) continue;
    absl::StatusOr<trust::WeightpathTarget> custom = trust::ParseWeightpathTarget(target);
    if (!custom.ok()) return refuse(std::string(custom.status().message()));
    const std::string where = absl::StrCat("target \"", target.path, "\" (", target.role, ".json)");
    if (absl::Status path_ok = CheckTargetPath(target.path); !path_ok.ok()) {
      return refuse(absl::StrCat(where, ": ", path_ok.message()));
    }
    if (!IsLowercaseSha256(target.sha256)) {
      return refuse(absl::StrCat(where, ": has no sha256 of 64 lowercase hex digits"));
    }
    if (target.file.length <= 0) return refuse(absl::StrCat(where, ": length must be positive"));
    CatalogArtifact artifact;
    if (custom->files.empty()) {
      artifact.uri = JoinUrl(options.artifact_base_url, target.path);
    } else {
      // The list is the signer's word only once it is what was signed: its
      // manifest is the target's bytes.
      const trust::BuildManifestDigest manifest = trust::DigestBuildManifest(custom->files);
      if (manifest.sha256 != target.sha256 ||
          manifest.size_bytes != static_cast<uint64_t>(target.file.length)) {
        return refuse(absl::StrCat(
            where, ": custom.files make a manifest of ", manifest.size_bytes, " bytes, sha256 ",
            manifest.sha256, ", but the target is signed as ", target.file.length,
            " bytes, sha256 ", target.sha256,
            " (sign the directory again with weightpathctl repo add-target --dir)"));
      }
      for (const trust::BuildManifestFile& file : custom->files) {
        artifact.files.push_back({file.path, file.sha256, file.size_bytes,
                                  JoinUrl(options.artifact_base_url,
                                          absl::StrCat(target.path, "/", file.path))});
      }
      std::sort(artifact.files.begin(), artifact.files.end(),
                [](const CatalogBuildFile& x, const CatalogBuildFile& y) { return x.path < y.path; });
    }
    artifact.sha256 = target.sha256;
    artifact.size_bytes = static_cast<uint64_t>(target.file.length);
    artifact.version = custom->version;
    artifact.target_path = target.path;
    artifact.signed_target = true;
    signed_builds[target.path] = {custom->model, custom->weight_path, custom->canary, artifact};
    if (!custom->canary) {
      Catalog::ModelArtifacts& artifacts = models[custom->model];
      auto [it, inserted] = artifacts.emplace(custom->weight_path, artifact);
      if (!inserted) {
        return refuse(absl::StrCat(
            "targets \"", it->second.target_path, "\" and \"", target.path,
            "\" are both model \"", custom->model, "\" weight path \"", custom->weight_path,
            "\"; the catalog serves exactly one build of each to every device: sign the other "
            "as a canary (weightpathctl repo add-target --canary), which only a rollout's "
            "pin_artifact serves, or remove one with weightpathctl repo remove-target"));
      }
      built_for[{custom->model, custom->weight_path}] = custom->hardware_classes;
    }
    trust::Json entry = trust::Json::MakeArray();
    // The target's URL stands for its files' too (they lie under it), and
    // its sha256 for their digests (it is their manifest's).
    for (const std::string& text :
         {custom->model, custom->weight_path, target.path, target.sha256,
          JoinUrl(options.artifact_base_url, target.path), custom->version}) {
      entry.array().push_back(trust::Json::String(text));
    }
    entry.array().push_back(trust::Json::Int(target.file.length));
    // Only a canary's entry says so, so the versions of catalogs without
    // one stay what they were.
    if (custom->canary) entry.array().push_back(trust::Json::String("canary"));
    description.array().push_back(std::move(entry));
  }
  if (models.empty()) {
    return refuse(absl::StrCat("the verified targets (", targets.size(),
                               ") list no weightpath artifact (custom.model, weight_path, version, "
                               "hardware_classes)"));
  }
  std::vector<std::string> names;
  for (const auto& [name, artifacts] : models) names.push_back(name);
  std::string default_model = options.default_model;
  if (default_model.empty()) {
    if (models.size() != 1) {
      return refuse(absl::StrCat("the targets list several models (", absl::StrJoin(names, ", "),
                                 "): name the default with --catalog_default_model"));
    }
    default_model = models.begin()->first;
  } else if (models.find(default_model) == models.end()) {
    return refuse(absl::StrCat("--catalog_default_model=", default_model,
                               " is not a model of the targets (", absl::StrJoin(names, ", "), ")"));
  }
  const std::vector<std::string> reachable = policy.ReachablePathNames();
  for (const auto& [model, artifacts] : models) {
    for (const std::string& path : reachable) {
      if (artifacts.find(path) == artifacts.end()) {
        return refuse(absl::StrCat("model \"", model, "\" has no target for weight path \"", path,
                                   "\": policy ", policy.version(), " can return path \"", path,
                                   "\""));
      }
    }
  }

  CatalogTrust trust;
  trust.signed_catalog = true;
  trust.signed_builds = std::move(signed_builds);
  for (const trust::TargetInfo& target : targets) {
    if (target.file.length > 0 && !target.sha256.empty()) {
      trust.verified_targets[target.path] = {static_cast<uint64_t>(target.file.length),
                                             target.sha256};
    }
  }
  // Warned about, not refused: the repository is signed offline and the
  // policy published on its own, and refusing would stop the server from
  // starting (or keep an older catalog) for every class over one class's
  // missing build, while the devices of that class stay safe on their last
  // good build either way.
  for (const auto& [model, artifacts] : models) {
    for (const std::string& path : reachable) {
      const std::vector<std::string>& classes = built_for.at({model, path});
      for (policy::HardwareClass routed : policy.HardwareClassesRoutedTo(path)) {
        const std::string name(policy::HardwareClassName(routed));
        if (std::find(classes.begin(), classes.end(), name) == classes.end()) {
          trust.uncovered_routes.push_back(
              {model, path, name, artifacts.find(path)->second.target_path});
        }
      }
    }
  }
  const trust::Root& root = set.root().signed_part;
  const trust::Timestamp& timestamp = set.timestamp()->signed_part;
  const trust::Snapshot& snapshot = set.snapshot()->signed_part;
  const trust::Targets& top = set.targets()->signed_part;
  trust.metadata_expires =
      std::min({root.expires, timestamp.expires, snapshot.expires, top.expires});
  trust.summary = absl::StrCat("signed: root v", root.version, ", targets v", top.version,
                               ", snapshot v", snapshot.version, ", timestamp v", timestamp.version,
                               "; expires ", trust::FormatExpires(trust.metadata_expires));
  if (!trust.uncovered_routes.empty()) {
    std::vector<std::string> routes;
    for (const UncoveredRoute& route : trust.uncovered_routes) {
      routes.push_back(absl::StrCat(route.hardware_class, " -> ", route.model, " ",
                                    route.weight_path, " (", route.target_path, ")"));
    }
    trust.coverage_warning = absl::StrCat(
        "policy ", policy.version(), " routes ", trust.uncovered_routes.size(),
        " hardware class/weight path pair(s) to a signed target not built for that class; "
        "those devices refuse every such decision and keep their last good build (sign a build "
        "for the class, or route it elsewhere): ",
        ControlEscaped(absl::StrJoin(routes, ", ")));
  }
  description.array().push_back(trust::Json::String(default_model));
  const std::string version =
      absl::StrCat("targets-v", top.version, ":", ShortContentVersion(trust::CanonicalJson(description)));
  return std::make_shared<const Catalog>(std::move(default_model), std::move(models), version,
                                         source_name, std::move(trust));
}

}  // namespace weightpath::server
