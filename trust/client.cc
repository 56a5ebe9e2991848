#include "trust/client.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace weightpath::trust {
namespace {

absl::StatusOr<std::string> Fetch(const MetadataFetcher& fetch, const MetadataRequest& request,
                                  RefreshReport* report) {
  absl::StatusOr<std::string> bytes = fetch(request);
  if (!bytes.ok()) {
    return absl::Status(bytes.status().code(),
                        absl::StrCat(request.file_name, ": ", bytes.status().message()));
  }
  if (report != nullptr) report->downloaded.push_back(request.file_name);
  return bytes;
}

// A targets role, trusted already, from its persisted copy, or downloaded.
absl::Status LoadTargetsRole(TrustedMetadataSet& set, const std::string& role,
                             const std::string& delegator, const MetadataFetcher* fetch,
                             RefreshReport* report) {
  if (set.targets(role) != nullptr) return absl::OkStatus();
  absl::Status persisted = set.LoadPersistedTargets(role, delegator);
  if (persisted.ok()) return persisted;
  ASSIGN_OR_RETURN(MetadataRequest request, set.TargetsRequest(role));
  if (fetch == nullptr || !*fetch) {
    return absl::FailedPreconditionError(
        absl::StrCat(request.file_name, ": ", role, " is not loaded and there is no fetcher"));
  }
  ASSIGN_OR_RETURN(std::string bytes, Fetch(*fetch, request, report));
  return set.UpdateDelegatedTargets(bytes, role, delegator);
}

}  // namespace

absl::StatusOr<RefreshReport> RefreshMetadata(TrustedMetadataSet& set,
                                              const MetadataFetcher& fetch,
                                              const RefreshOptions& options) {
  RefreshReport report;
  report.root_version_before = set.root().signed_part.version;
  // 5.3: every newer root in turn, until the repository has none.
  for (int i = 0; i < options.max_root_rotations; ++i) {
    const MetadataRequest request = set.NextRootRequest();
    absl::StatusOr<std::string> bytes = fetch(request);
    if (absl::IsNotFound(bytes.status())) break;
    if (!bytes.ok()) {
      return absl::Status(bytes.status().code(),
                          absl::StrCat(request.file_name, ": ", bytes.status().message()));
    }
    report.downloaded.push_back(request.file_name);
    RETURN_IF_ERROR(set.UpdateRoot(*bytes));
  }
  report.root_version = set.root().signed_part.version;

  // 5.4: always downloaded; it is what tells the client anything changed.
  ASSIGN_OR_RETURN(std::string timestamp, Fetch(fetch, set.TimestampRequest(), &report));
  ASSIGN_OR_RETURN(TimestampUpdate update, set.UpdateTimestamp(timestamp));
  report.timestamp_unchanged = update == TimestampUpdate::kUnchanged;

  // 5.5: the persisted snapshot when the timestamp still names it.
  if (!set.LoadPersistedSnapshot().ok()) {
    ASSIGN_OR_RETURN(MetadataRequest request, set.SnapshotRequest());
    ASSIGN_OR_RETURN(std::string snapshot, Fetch(fetch, request, &report));
    RETURN_IF_ERROR(set.UpdateSnapshot(snapshot));
  }

  // 5.6: top-level targets likewise; delegated roles wait for a lookup.
  RETURN_IF_ERROR(LoadTargetsRole(set, "targets", "root", &fetch, &report));
  return report;
}

absl::StatusOr<TargetInfo> FindTarget(TrustedMetadataSet& set, absl::string_view target_path,
                                      const MetadataFetcher* fetch, const LookupOptions& options) {
  struct Visit {
    std::string role;
    std::string delegator;
  };
  std::vector<Visit> to_visit = {{"targets", "root"}};
  std::set<std::string> visited;
  while (!to_visit.empty() && static_cast<int>(visited.size()) < options.max_delegations) {
    Visit visit = std::move(to_visit.back());
    to_visit.pop_back();
    if (visited.count(visit.role) != 0) continue;  // a cycle of delegations
    // A role that cannot be loaded ends the lookup: skipping it could let a
    // less trusted role answer for a path a more trusted one owns.
    RETURN_IF_ERROR(LoadTargetsRole(set, visit.role, visit.delegator, fetch, nullptr));
    const Targets& targets = set.targets(visit.role)->signed_part;
    if (auto it = targets.targets.find(target_path); it != targets.targets.end()) {
      TargetInfo info{std::string(target_path), it->second, visit.role, ""};
      if (auto sha256 = it->second.hashes.find("sha256"); sha256 != it->second.hashes.end()) {
        info.sha256 = sha256->second;
      }
      return info;
    }
    visited.insert(visit.role);
    if (!targets.delegations) continue;
    std::vector<Visit> children;
    for (const DelegatedRole& role : targets.delegations->roles) {
      if (!role.IsDelegatedPath(target_path)) continue;
      children.push_back({role.name, visit.role});
      if (role.terminating) {
        // Nothing after a terminating delegation is consulted, not even
        // the siblings still waiting from higher up.
        to_visit.clear();
        break;
      }
    }
    // Pushed in reverse so the first listed (most trusted) is popped first.
    std::reverse(children.begin(), children.end());
    for (Visit& child : children) to_visit.push_back(std::move(child));
  }
  return absl::NotFoundError(absl::StrCat("target \"", target_path,
                                          "\" is not listed by the trusted targets metadata"));
}

absl::StatusOr<std::vector<TargetInfo>> ListTargets(TrustedMetadataSet& set,
                                                    const MetadataFetcher* fetch,
                                                    const LookupOptions& options) {
  // Every path any reachable role lists, then each resolved as a lookup
  // would: that keeps delegation precedence and path restrictions exact.
  std::set<std::string> paths;
  std::vector<std::pair<std::string, std::string>> to_visit = {{"targets", "root"}};
  std::set<std::string> visited;
  while (!to_visit.empty() && static_cast<int>(visited.size()) < options.max_delegations) {
    auto [role, delegator] = std::move(to_visit.back());
    to_visit.pop_back();
    if (!visited.insert(role).second) continue;
    RETURN_IF_ERROR(LoadTargetsRole(set, role, delegator, fetch, nullptr));
    const Targets& targets = set.targets(role)->signed_part;
    for (const auto& [path, unused] : targets.targets) paths.insert(path);
    if (targets.delegations) {
      for (const DelegatedRole& child : targets.delegations->roles) {
        to_visit.emplace_back(child.name, role);
      }
    }
  }
  std::vector<TargetInfo> listed;
  for (const std::string& path : paths) {
    absl::StatusOr<TargetInfo> info = FindTarget(set, path, fetch, options);
    if (absl::IsNotFound(info.status())) continue;  // listed only where it is not delegated
    if (!info.ok()) return info.status();
    listed.push_back(*std::move(info));
  }
  return listed;
}

absl::StatusOr<WeightpathTarget> ParseWeightpathTarget(const TargetInfo& target) {
  const auto error = [&](absl::string_view field, absl::string_view reason) {
    return absl::InvalidArgumentError(absl::StrCat("target \"", target.path, "\" (", target.role,
                                                   ".json): custom.", field, ": ", reason));
  };
  if (!target.file.custom.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target \"", target.path, "\" (", target.role,
        ".json): has no custom object (model, weight_path, version, hardware_classes)"));
  }
  WeightpathTarget custom;
  for (auto [field, out] : {std::pair<absl::string_view, std::string*>{"model", &custom.model},
                            {"weight_path", &custom.weight_path},
                            {"version", &custom.version}}) {
    const Json* value = target.file.custom.Find(field);
    if (value == nullptr) return error(field, "missing");
    if (!value->is_string() || value->string_value().empty()) {
      return error(field, "must be a non-empty string");
    }
    *out = value->string_value();
  }
  const Json* classes = target.file.custom.Find("hardware_classes");
  if (classes == nullptr) return error("hardware_classes", "missing");
  if (!classes->is_array() || classes->array().empty()) {
    return error("hardware_classes", "must be a non-empty array of strings");
  }
  for (const Json& value : classes->array()) {
    if (!value.is_string() || value.string_value().empty()) {
      return error("hardware_classes", "must be a non-empty array of strings");
    }
    custom.hardware_classes.push_back(value.string_value());
  }
  if (const Json* canary = target.file.custom.Find("canary"); canary != nullptr) {
    if (!canary->is_bool()) return error("canary", "must be true or false");
    custom.canary = canary->bool_value();
  }
  // Optional: a single-file build has none. Bounded before any entry is read.
  if (const Json* files = target.file.custom.Find("files"); files != nullptr) {
    absl::StatusOr<std::vector<BuildManifestFile>> parsed = BuildFilesFromJson(
        *files, absl::StrCat("target \"", target.path, "\" (", target.role, ".json): custom"));
    if (!parsed.ok()) return parsed.status();
    custom.files = *std::move(parsed);
  }
  return custom;
}

Json WeightpathTargetToJson(const WeightpathTarget& custom) {
  Json out = Json::MakeObject();
  out.Set("model", Json::String(custom.model));
  out.Set("weight_path", Json::String(custom.weight_path));
  out.Set("version", Json::String(custom.version));
  Json classes = Json::MakeArray();
  for (const std::string& name : custom.hardware_classes) classes.array().push_back(Json::String(name));
  out.Set("hardware_classes", std::move(classes));
  if (!custom.files.empty()) out.Set("files", BuildFilesToJson(custom.files));
  // Only when set: a default build's custom stays as it always was.
  if (custom.canary) out.Set("canary", Json::Bool(true));
  return out;
}

absl::Status CheckArtifactAgainstTarget(const TargetInfo& target, int64_t length,
                                        absl::string_view sha256,
                                        absl::string_view hardware_class,
                                        bool directory_build) {
  const std::string where = absl::StrCat("target \"", target.path, "\" (", target.role, ".json)");
  if (target.sha256.empty()) {
    return absl::PermissionDeniedError(absl::StrCat(where, ": the signed metadata gives no sha256"));
  }
  if (target.file.length != length) {
    return absl::PermissionDeniedError(absl::StrCat(where, ": signed length ", target.file.length,
                                                    ", the decision says ", length));
  }
  if (target.sha256 != sha256) {
    return absl::PermissionDeniedError(absl::StrCat(where, ": signed sha256 ", target.sha256,
                                                    ", the decision says ", sha256));
  }
  ASSIGN_OR_RETURN(WeightpathTarget custom, ParseWeightpathTarget(target));
  if (std::find(custom.hardware_classes.begin(), custom.hardware_classes.end(), hardware_class) ==
      custom.hardware_classes.end()) {
    return absl::PermissionDeniedError(absl::StrCat(
        where, ": signed for hardware classes ", absl::StrJoin(custom.hardware_classes, ", "),
        ", not ", hardware_class));
  }
  // The digest of a manifest is no file's to match, nor a file's digest a
  // manifest's: the shapes must agree before either is fetched.
  if (directory_build != !custom.files.empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        where, custom.files.empty() ? ": signed as a single file, the decision lists files"
                                    : ": signed as a directory build, the decision names one file"));
  }
  return absl::OkStatus();
}

}  // namespace weightpath::trust
