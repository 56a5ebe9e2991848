#include "agent/signed/trust_status.h"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/signed/trust_client.h"
#include "common/status_macros.h"
#include "trust/metadata.h"
#include "trust/trusted_metadata_set.h"

namespace weightpath::agent {
namespace {

using trust::Json;

Json StringArray(const std::vector<std::string>& values) {
  Json array = Json::MakeArray();
  for (const std::string& value : values) array.array().push_back(Json::String(value));
  return array;
}

// Version and expiry of one metadata file. `verified`: its signatures and
// the workflow's checks passed now (expiry aside, which `expired` says);
// otherwise it is the persisted copy as written, and `why` says what failed.
Json FileEntry(const trust::SignedCommon& common, absl::Time now, bool verified,
               const std::string& why = "") {
  Json entry = Json::MakeObject();
  entry.Set("version", Json::Int(common.version));
  entry.Set("expires", Json::String(trust::FormatExpires(common.expires)));
  entry.Set("expired", Json::Bool(common.expires <= now));
  entry.Set("verified", Json::Bool(verified));
  if (!verified) entry.Set("not_verified", Json::String(why));
  return entry;
}

void AddKeys(const trust::RoleKeys& keys, Json& entry) {
  entry.Set("threshold", Json::Int(keys.threshold));
  entry.Set("keyids", StringArray(keys.keyids));
}

// The persisted copies as the state file holds them, to show what the
// device keeps even where it no longer verifies (an expired timestamp
// stops the snapshot and targets from being checked).
struct PersistedCopies {
  std::optional<std::string> timestamp;
  std::optional<std::string> snapshot;
  std::map<std::string, std::string> targets;
};

PersistedCopies ReadCopies(const std::string& state_bytes) {
  PersistedCopies copies;
  absl::StatusOr<Json> state = trust::ParseJson(state_bytes, "trust state");
  if (!state.ok()) return copies;
  if (const Json* timestamp = state->Find("timestamp"); timestamp && timestamp->is_string()) {
    copies.timestamp = timestamp->string_value();
  }
  if (const Json* snapshot = state->Find("snapshot"); snapshot && snapshot->is_string()) {
    copies.snapshot = snapshot->string_value();
  }
  if (const Json* targets = state->Find("targets"); targets && targets->is_object()) {
    for (const auto& [role, bytes] : targets->object()) {
      if (bytes.is_string()) copies.targets.emplace(role, bytes.string_value());
    }
  }
  return copies;
}

// A role as trusted now, else as persisted (parsed, not verified), else null.
// `shown` is set to what the entry describes; `parsed` holds a persisted
// copy's parse for as long as the caller uses `shown`.
template <typename T, typename Parse>
Json RoleEntry(const trust::Metadata<T>* trusted, const std::optional<std::string>& copy,
               Parse parse, absl::string_view label, const absl::Status& why_not, absl::Time now,
               std::optional<trust::Metadata<T>>& parsed, const T** shown) {
  *shown = nullptr;
  if (trusted != nullptr) {
    *shown = &trusted->signed_part;
    return FileEntry(trusted->signed_part, now, true);
  }
  if (copy) {
    absl::StatusOr<trust::Metadata<T>> metadata = parse(*copy, label);
    if (metadata.ok()) {
      parsed = *std::move(metadata);
      *shown = &parsed->signed_part;
      return FileEntry(parsed->signed_part, now, false, std::string(why_not.message()));
    }
  }
  return Json::Null();
}

std::string RolePad(absl::string_view name, size_t width = 11) {
  return std::string(name.size() < width ? width - name.size() : 1, ' ');
}

}  // namespace

absl::StatusOr<Json> TrustStatus(const TrustConfig& config, const std::string& state_dir,
                                 absl::Time now) {
  ASSIGN_OR_RETURN(LoadedTrust loaded, LoadTrustedState(config, state_dir, now));
  trust::TrustedMetadataSet& set = loaded.set;
  std::vector<std::string> notes;
  if (loaded.note) notes.push_back(*loaded.note);
  const bool from_state = !loaded.note && !loaded.state_bytes.empty();
  if (loaded.state_bytes.empty()) {
    notes.push_back(absl::StrCat("no trusted state yet (", TrustStatePath(state_dir),
                                 "): nothing has been fetched; the device trusts ", config.root,
                                 " only"));
  }
  const PersistedCopies copies = from_state ? ReadCopies(loaded.state_bytes) : PersistedCopies{};

  Json out = Json::MakeObject();
  out.Set("source", Json::String(loaded.source));
  out.Set("metadata_url", Json::String(config.metadata_url));
  out.Set("reference_time", Json::String(trust::FormatExpires(now)));

  const trust::Root& root = set.root().signed_part;
  Json roles = Json::MakeObject();
  Json root_entry = FileEntry(root, now, true);
  root_entry.Set("consistent_snapshot", Json::Bool(root.consistent_snapshot));
  AddKeys(root.roles.at("root"), root_entry);
  roles.Set("root", std::move(root_entry));
  if (root.expires <= now) {
    notes.push_back(absl::StrCat("root v", root.version, " expired at ",
                                 trust::FormatExpires(root.expires),
                                 ": the next update must find a newer root"));
  }

  const absl::Status timestamp_status = set.LoadPersistedTimestamp();
  std::optional<trust::Metadata<trust::Timestamp>> timestamp_copy;
  const trust::Timestamp* timestamp = nullptr;
  Json timestamp_entry =
      RoleEntry(set.timestamp(), copies.timestamp, trust::ParseTimestamp,
                "persisted timestamp.json", timestamp_status, now, timestamp_copy, &timestamp);
  const absl::Status snapshot_status =
      timestamp_status.ok() ? set.LoadPersistedSnapshot() : timestamp_status;
  std::optional<trust::Metadata<trust::Snapshot>> snapshot_copy;
  const trust::Snapshot* snapshot = nullptr;
  Json snapshot_entry =
      RoleEntry(set.snapshot(), copies.snapshot, trust::ParseSnapshot, "persisted snapshot.json",
                snapshot_status, now, snapshot_copy, &snapshot);
  const absl::Status targets_status =
      snapshot_status.ok() ? set.LoadPersistedTargets("targets", "root") : snapshot_status;
  std::optional<std::string> targets_copy;
  if (auto it = copies.targets.find("targets"); it != copies.targets.end())
    targets_copy = it->second;
  std::optional<trust::Metadata<trust::Targets>> targets_parsed;
  const trust::Targets* targets = nullptr;
  Json targets_entry =
      RoleEntry(set.targets(), targets_copy, trust::ParseTargets, "persisted targets.json",
                targets_status, now, targets_parsed, &targets);
  if (timestamp != nullptr && timestamp->expires <= now) {
    notes.push_back(absl::StrCat(
        "timestamp v", timestamp->version, " expired at ", trust::FormatExpires(timestamp->expires),
        ": no new artifact is installed until a fresh one is fetched (the installed one still "
        "boots)"));
  }
  for (auto [name, entry] : {std::pair<const char*, Json*>{"timestamp", &timestamp_entry},
                             {"snapshot", &snapshot_entry},
                             {"targets", &targets_entry}}) {
    if (entry->is_object()) AddKeys(root.roles.at(name), *entry);
  }
  if (targets != nullptr && targets_entry.is_object()) {
    targets_entry.Set("target_count", Json::Int(static_cast<int64_t>(targets->targets.size())));
  }
  roles.Set("timestamp", std::move(timestamp_entry));
  roles.Set("snapshot", std::move(snapshot_entry));
  roles.Set("targets", std::move(targets_entry));
  out.Set("roles", std::move(roles));

  // Delegated roles one level below the top-level targets.
  Json delegations = Json::MakeArray();
  if (targets != nullptr && targets->delegations) {
    const bool targets_verified = set.targets() != nullptr;
    for (const trust::DelegatedRole& role : targets->delegations->roles) {
      Json entry = Json::MakeObject();
      entry.Set("role", Json::String(role.name));
      entry.Set("threshold", Json::Int(role.threshold));
      entry.Set("keyids", StringArray(role.keyids));
      if (role.paths) entry.Set("paths", StringArray(*role.paths));
      if (role.path_hash_prefixes) {
        entry.Set("path_hash_prefixes", StringArray(*role.path_hash_prefixes));
      }
      entry.Set("terminating", Json::Bool(role.terminating));
      const absl::Status loaded_role =
          targets_verified ? set.LoadPersistedTargets(role.name, "targets") : targets_status;
      std::optional<std::string> copy;
      if (auto it = copies.targets.find(role.name); it != copies.targets.end()) copy = it->second;
      std::optional<trust::Metadata<trust::Targets>> role_parsed;
      const trust::Targets* shown = nullptr;
      Json file = RoleEntry(set.targets(role.name), copy, trust::ParseTargets,
                            absl::StrCat("persisted ", role.name, ".json"), loaded_role, now,
                            role_parsed, &shown);
      if (file.is_object()) {
        for (const auto& [key, value] : file.object()) entry.Set(key, value);
      } else {
        entry.Set("version", Json::Null());  // not fetched yet: loaded on a lookup
      }
      delegations.array().push_back(std::move(entry));
    }
  }
  out.Set("delegations", std::move(delegations));
  for (const std::string& note : set.notes()) notes.push_back(note);
  out.Set("notes", StringArray(notes));
  return out;
}

std::string TrustStatusText(const Json& status) {
  std::string text = absl::StrCat("trust: ", status.Find("source")->string_value(),
                                  ", metadata from ", status.Find("metadata_url")->string_value(),
                                  ", at ", status.Find("reference_time")->string_value(), "\n");
  const Json& roles = *status.Find("roles");
  const auto keys = [](const Json& entry) {
    std::vector<std::string> ids;
    for (const Json& id : entry.Find("keyids")->array()) ids.push_back(id.string_value());
    return absl::StrCat(entry.Find("threshold")->int_value(), " of ",
                        ids.empty() ? "none" : absl::StrJoin(ids, ", "));
  };
  const auto file = [](const Json& entry) {
    std::string line = absl::StrCat("v", entry.Find("version")->int_value(), "  expires ",
                                    entry.Find("expires")->string_value());
    if (entry.Find("expired")->bool_value()) absl::StrAppend(&line, "  EXPIRED");
    if (!entry.Find("verified")->bool_value()) {
      absl::StrAppend(&line, "  (persisted copy, not verified now: ",
                      entry.Find("not_verified")->string_value(), ")");
    }
    return line;
  };
  for (const char* name : {"root", "timestamp", "snapshot", "targets"}) {
    const Json* entry = roles.Find(name);
    if (entry == nullptr || !entry->is_object()) {
      absl::StrAppend(&text, "  ", name, RolePad(name), "none trusted yet\n");
      continue;
    }
    absl::StrAppend(&text, "  ", name, RolePad(name), file(*entry));
    if (const Json* count = entry->Find("target_count")) {
      absl::StrAppend(&text, "  ", count->int_value(), " target(s)");
    }
    absl::StrAppend(&text, "\n  ", std::string(11, ' '), "  keys ", keys(*entry), "\n");
  }
  for (const Json& role : status.Find("delegations")->array()) {
    const std::string& name = role.Find("role")->string_value();
    absl::StrAppend(&text, "  delegated ", name, ": ");
    if (role.Find("version")->is_null()) {
      absl::StrAppend(&text, "not fetched yet");
    } else {
      absl::StrAppend(&text, file(role));
    }
    absl::StrAppend(&text, "; keys ", keys(role));
    if (const Json* paths = role.Find("paths")) {
      std::vector<std::string> patterns;
      for (const Json& path : paths->array()) patterns.push_back(path.string_value());
      absl::StrAppend(&text, "; paths ", absl::StrJoin(patterns, ", "));
    }
    absl::StrAppend(&text, "\n");
  }
  const Json::Array& notes = status.Find("notes")->array();
  if (!notes.empty()) {
    absl::StrAppend(&text, "notes:\n");
    for (const Json& note : notes) absl::StrAppend(&text, "  - ", note.string_value(), "\n");
  }
  return text;
}

}  // namespace weightpath::agent
