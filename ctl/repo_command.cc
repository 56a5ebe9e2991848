#include "ctl/repo_command.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/command_line.h"
#include "common/control_characters.h"
#include "common/status_macros.h"
#include "ctl/command_error.h"
#include "ctl/repo_files.h"
#include "ctl/view_output.h"
#include "trust/build_manifest.h"
#include "trust/client.h"
#include "trust/crypto.h"
#include "trust/json.h"
#include "trust/metadata.h"
#include "trust/repository.h"
#include "trust/trusted_metadata_set.h"

namespace weightpath::ctl {
namespace {

using trust::Json;
using trust::Metadata;
using trust::Root;
using trust::Snapshot;
using trust::Targets;
using trust::Timestamp;

constexpr absl::string_view kCommand = "repo";

// Default lifetimes: the offline roles long, the online ones short, so a
// stolen online key or a frozen mirror is only good for a day.
constexpr absl::Duration kRootLifetime = absl::Hours(24 * 365);
constexpr absl::Duration kTargetsLifetime = absl::Hours(24 * 90);
constexpr absl::Duration kSnapshotLifetime = absl::Hours(24 * 7);
constexpr absl::Duration kTimestampLifetime = absl::Hours(24);

const trust::MetadataLimits kLimits;

enum class Action { kInit, kAddTarget, kRemoveTarget, kSign, kTimestamp, kRotateRoot, kVerify };

struct ActionSpec {
  absl::string_view name;
  Action action;
  absl::string_view summary;
};

constexpr ActionSpec kActions[] = {
    {"init", Action::kInit, "create a repository: root, targets, snapshot and timestamp v1"},
    {"add-target", Action::kAddTarget, "stage an artifact in the next targets version"},
    {"remove-target", Action::kRemoveTarget, "stage the removal of an artifact"},
    {"sign", Action::kSign, "sign the staged root or targets (one or more keys at a time)"},
    {"timestamp", Action::kTimestamp,
     "publish what is fully signed, with a new snapshot and timestamp"},
    {"rotate-root", Action::kRotateRoot, "stage a root that gives a role new keys or threshold"},
    {"verify", Action::kVerify, "check a repository as a device would, from a trusted root"},
};

FlagSpec RepoFlag() { return {"repo", '\0', true, "repository directory (metadata/ is what is served)"}; }
FlagSpec HelpFlag() { return {"help", 'h', false, "show this help"}; }

std::vector<FlagSpec> FlagsFor(Action action) {
  switch (action) {
    case Action::kInit:
      return {RepoFlag(),
              {"generate-keys", '\0', true,
               "write new ed25519 keys (0600 PEM) for every role into this directory"},
              {"root-key", '\0', true, "root key file(s), comma-separated"},
              {"targets-key", '\0', true, "targets key file(s), comma-separated"},
              {"snapshot-key", '\0', true, "snapshot key file"},
              {"timestamp-key", '\0', true, "timestamp key file"},
              {"root-threshold", '\0', true, "root signatures required (default 1)"},
              {"targets-threshold", '\0', true, "targets signatures required (default 1)"},
              {"no-consistent-snapshot", '\0', false,
               "plain snapshot.json/targets.json names instead of VERSION.*.json"},
              {"root-expires", '\0', true, "root lifetime (default 365d)"},
              {"targets-expires", '\0', true, "targets lifetime (default 90d)"},
              {"snapshot-expires", '\0', true, "snapshot lifetime (default 7d)"},
              {"timestamp-expires", '\0', true, "timestamp lifetime (default 1d)"},
              HelpFlag()};
    case Action::kAddTarget:
      return {RepoFlag(),
              {"path", '\0', true, "target path, relative to the artifact mirror (required)"},
              {"file", '\0', true, "the artifact: its length and SHA-256 are computed"},
              {"dir", '\0', true,
               "a directory build: every regular file of this model directory, hashed; the "
               "target is their manifest (needs the custom flags)"},
              {"manifest-out", '\0', true,
               "with --dir: write the build's manifest here (default REPO/manifests/SHA256.json)"},
              {"length", '\0', true, "the artifact's length in bytes (without --file)"},
              {"sha256", '\0', true, "the artifact's SHA-256, lowercase hex (without --file)"},
              {"weight-path", '\0', true,
               "custom.weight_path (e.g. w4a8-amx); with --version and --hardware-classes it "
               "makes the target a weightpath build (required for one: devices install nothing "
               "else)"},
              {"version", '\0', true, "custom.version of the build"},
              {"hardware-classes", '\0', true, "custom.hardware_classes, comma-separated"},
              {"model", '\0', true,
               "custom.model (default: the one model the targets already list; required for "
               "the first build, or when they list several)"},
              {"canary", '\0', false,
               "a second build of a model's weight path that only a rollout's pin_artifact "
               "serves (custom.canary); the catalog keeps serving the path's other build to "
               "everyone else"},
              {"replace", '\0', false, "replace an entry with the same path"},
              {"expires", '\0', true, "lifetime of the staged targets (default 90d)"},
              HelpFlag()};
    case Action::kRemoveTarget:
      return {RepoFlag(), {"path", '\0', true, "target path (required)"},
              {"expires", '\0', true, "lifetime of the staged targets (default 90d)"}, HelpFlag()};
    case Action::kSign:
      return {RepoFlag(), {"role", '\0', true, "root or targets (required)"},
              {"key", '\0', true, "private key file(s), comma-separated (required)"},
              {"expires", '\0', true,
               "new lifetime (90d, 12h) or time (2030-01-01T00:00:00Z); drops earlier signatures; "
               "with nothing staged, renews the published version as the next one"},
              {"allow-empty", '\0', false,
               "sign staged targets that list no target at all (devices would find no build)"},
              HelpFlag()};
    case Action::kTimestamp:
      return {RepoFlag(),
              {"key", '\0', true, "timestamp private key file(s), comma-separated (required)"},
              {"snapshot-key", '\0', true,
               "snapshot private key file(s); needed when targets or snapshot keys change, or to "
               "renew the snapshot"},
              {"expires", '\0', true, "timestamp lifetime (default 1d)"},
              {"snapshot-expires", '\0', true, "snapshot lifetime (default 7d)"},
              HelpFlag()};
    case Action::kRotateRoot:
      return {RepoFlag(),
              {"role", '\0', true, "root, targets, snapshot or timestamp (required)"},
              {"keys", '\0', true, "the role's new key file(s), public or private (required)"},
              {"threshold", '\0', true, "signatures the role will require (default 1)"},
              {"expires", '\0', true, "lifetime of the staged root (default 365d)"},
              HelpFlag()};
    case Action::kVerify:
      return {RepoFlag(),
              {"metadata-dir", '\0', true, "a directory of metadata files instead of --repo"},
              {"root", '\0', true, "the trusted root a device holds (default METADATA/1.root.json)"},
              {"target", '\0', true, "also look up this target path and print it"},
              {"dir", '\0', true,
               "with --target, a directory build: check this directory holds exactly its files"},
              {"at", '\0', true, "verify at this time (2030-01-01T00:00:00Z) instead of now"},
              {"output", 'o', true, "table (default), json or yaml"},
              HelpFlag()};
  }
  return {};
}

void WriteHelp(std::ostream& out) {
  out << "usage: weightpathctl repo <action> --repo DIR [flags]\n\nactions:\n";
  for (const ActionSpec& spec : kActions) {
    out << "  " << spec.name << std::string(16 - spec.name.size(), ' ') << spec.summary << "\n";
  }
  out << "\nTypical use (see README, \"Signed artifacts (TUF)\"):\n"
         "  weightpathctl repo init --repo R --generate-keys K\n"
         "  weightpathctl repo add-target --repo R --path P --file F --model M --weight-path W "
         "--version V --hardware-classes C\n"
         "  weightpathctl repo add-target --repo R --path P --dir MODEL_DIR --model M ... "
         "(a directory build)\n"
         "  weightpathctl repo sign --repo R --role targets --key K/targets.pem\n"
         "  weightpathctl repo timestamp --repo R --key K/timestamp.pem --snapshot-key "
         "K/snapshot.pem\n"
         "  weightpathctl repo verify --repo R --target P\n\n"
         "Run 'weightpathctl repo <action> --help' for its flags. Private keys are read, never\n"
         "printed; a key file is an ed25519 PEM (openssl genpkey -algorithm ed25519).\n";
}

// --- small parsers -------------------------------------------------------

absl::StatusOr<absl::Time> ParseExpiry(const std::string& flag, const std::string& text,
                                       absl::Time now) {
  if (text.find('T') != std::string::npos) {
    absl::StatusOr<absl::Time> at = trust::ParseExpires(text);
    if (!at.ok()) return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", at.status().message()));
    return *at;
  }
  absl::Duration lifetime;
  int64_t days = 0;
  if (!text.empty() && text.back() == 'd' &&
      absl::SimpleAtoi(absl::string_view(text).substr(0, text.size() - 1), &days)) {
    lifetime = absl::Hours(24) * days;
  } else if (!absl::ParseDuration(text, &lifetime)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": '", text, "' is neither a lifetime (90d, 12h, 30m) nor a time "
        "(2030-01-01T00:00:00Z)"));
  }
  // Whole seconds: TUF's expiry has no fractions.
  return absl::FromUnixSeconds(absl::ToUnixSeconds(now + lifetime));
}

absl::StatusOr<absl::Time> ExpiryFlag(const ParsedArguments& args, const std::string& flag,
                                      absl::Duration default_lifetime, absl::Time now) {
  std::optional<std::string> text = args.Value(flag);
  if (!text) return absl::FromUnixSeconds(absl::ToUnixSeconds(now + default_lifetime));
  return ParseExpiry(flag, *text, now);
}

absl::StatusOr<int64_t> PositiveFlag(const ParsedArguments& args, const std::string& flag,
                                     int64_t default_value) {
  std::optional<std::string> text = args.Value(flag);
  if (!text) return default_value;
  int64_t value = 0;
  if (!absl::SimpleAtoi(*text, &value) || value < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", *text, "' is not a positive integer"));
  }
  return value;
}

absl::StatusOr<std::string> RequiredFlag(const ParsedArguments& args, const std::string& flag) {
  std::optional<std::string> value = args.Value(flag);
  if (!value || value->empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is required"));
  return *value;
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (!item.empty()) items.emplace_back(item);
  }
  return items;
}

// A target path must name a file below the mirror's base URL and nothing
// else: no way out of it ("..", a leading "/"), no ambiguity ("//", "\"),
// nothing invisible.
absl::Status CheckTargetPath(const std::string& path) {
  const auto refuse = [&](absl::string_view reason) {
    return absl::InvalidArgumentError(absl::StrCat("--path '", path, "': ", reason));
  };
  if (path.empty()) return refuse("empty");
  if (path.front() == '/') return refuse("must be relative (no leading '/')");
  for (char c : path) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return refuse("control character");
    if (c == '\\') return refuse("backslash");
  }
  for (absl::string_view component : absl::StrSplit(path, '/')) {
    if (component.empty()) return refuse("empty path component");
    if (component == "." || component == "..") return refuse("'.' or '..' component");
  }
  return absl::OkStatus();
}

std::string ShortIds(const std::vector<std::string>& keyids) {
  std::vector<std::string> ids;
  for (const std::string& keyid : keyids) ids.push_back(trust::ShortKeyId(keyid));
  return ids.empty() ? "none" : absl::StrJoin(ids, ", ");
}

// --- repository files ----------------------------------------------------

template <typename T>
struct File {
  Metadata<T> metadata;
  std::string bytes;
};

int64_t LimitFor(absl::string_view role) {
  if (role == "root") return kLimits.root_max_bytes;
  if (role == "timestamp") return kLimits.timestamp_max_bytes;
  if (role == "snapshot") return kLimits.snapshot_max_bytes;
  return kLimits.targets_max_bytes;
}

template <typename T, typename Parse>
absl::StatusOr<File<T>> ReadMetadata(const std::string& path, absl::string_view role, Parse parse) {
  ASSIGN_OR_RETURN(std::string bytes, ReadBoundedFile(path, LimitFor(role)));
  ASSIGN_OR_RETURN(Metadata<T> metadata, parse(bytes, path));
  return File<T>{std::move(metadata), std::move(bytes)};
}

absl::StatusOr<File<Root>> ReadRoot(const std::string& path) {
  return ReadMetadata<Root>(path, "root", trust::ParseRoot);
}
absl::StatusOr<File<Targets>> ReadTargets(const std::string& path) {
  return ReadMetadata<Targets>(path, "targets", trust::ParseTargets);
}

template <typename T, typename Read>
absl::StatusOr<std::optional<File<T>>> ReadIfPresent(const std::string& path, Read read) {
  if (!FileExists(path)) return std::optional<File<T>>();
  ASSIGN_OR_RETURN(File<T> file, read(path));
  return std::optional<File<T>>(std::move(file));
}

struct Published {
  File<Root> root;
  File<Targets> targets;
  File<Snapshot> snapshot;
  File<Timestamp> timestamp;
};

absl::StatusOr<Published> LoadPublished(const RepositoryLayout& layout) {
  if (!FileExists(layout.MetadataFile("root.json"))) {
    return absl::NotFoundError(absl::StrCat(layout.metadata,
                                            ": no root.json; create the repository with "
                                            "`weightpathctl repo init --repo ",
                                            layout.root, "`"));
  }
  Published published;
  ASSIGN_OR_RETURN(published.root, ReadRoot(layout.MetadataFile("root.json")));
  ASSIGN_OR_RETURN(published.targets, ReadTargets(layout.MetadataFile("targets.json")));
  ASSIGN_OR_RETURN(published.snapshot,
                   ReadMetadata<Snapshot>(layout.MetadataFile("snapshot.json"), "snapshot",
                                          trust::ParseSnapshot));
  ASSIGN_OR_RETURN(published.timestamp,
                   ReadMetadata<Timestamp>(layout.MetadataFile("timestamp.json"), "timestamp",
                                           trust::ParseTimestamp));
  return published;
}

std::string PublishedName(const Root& root, const std::string& role, int64_t version) {
  return trust::MetadataFileName(role, root.consistent_snapshot ? std::optional<int64_t>(version)
                                                                : std::nullopt);
}

// The files a role's new version is published as: its versioned name (a
// consistent snapshot's, or N.root.json) and the plain name operators and
// non-consistent clients read.
std::vector<std::string> NamesFor(const Root& root, const std::string& role, int64_t version) {
  std::vector<std::string> names;
  if (role == "root") {
    names.push_back(absl::StrCat(version, ".root.json"));
  } else if (root.consistent_snapshot) {
    names.push_back(PublishedName(root, role, version));
  }
  names.push_back(absl::StrCat(role, ".json"));
  return names;
}

template <typename T>
std::string Encode(const T& signed_part, const std::vector<trust::Signature>& signatures) {
  return trust::EncodeMetadataFile(trust::SignedToJson(signed_part), signatures);
}

// Reads metadata the way a device does: `overlay` first (files about to be
// published), then the directory, each file bounded by the request's limit.
trust::MetadataFetcher DirectoryFetcher(const std::string& directory,
                                        const std::map<std::string, std::string>* overlay) {
  return [directory, overlay](const trust::MetadataRequest& request)
             -> absl::StatusOr<std::string> {
    // Names come from MetadataFileName, which percent-encodes '/'; this
    // only guards against a future caller handing in a path.
    if (request.file_name.find('/') != std::string::npos || request.file_name.front() == '.') {
      return absl::InvalidArgumentError("not a metadata file name");
    }
    if (overlay != nullptr) {
      auto it = overlay->find(request.file_name);
      if (it != overlay->end()) {
        if (static_cast<int64_t>(it->second.size()) > request.max_bytes) {
          return absl::ResourceExhaustedError(
              absl::StrCat("more than the ", request.max_bytes, " bytes allowed"));
        }
        return it->second;
      }
    }
    return ReadBoundedFile(directory + "/" + request.file_name, request.max_bytes);
  };
}

// A device that trusts `root_bytes`, refreshing against the directory.
absl::StatusOr<trust::TrustedMetadataSet> RefreshAsDevice(
    const std::string& directory, const std::string& root_bytes, absl::Time at,
    const std::map<std::string, std::string>* overlay, trust::RefreshReport* report) {
  ASSIGN_OR_RETURN(trust::TrustedMetadataSet set,
                   trust::TrustedMetadataSet::Create(root_bytes, at, kLimits));
  ASSIGN_OR_RETURN(trust::RefreshReport refreshed,
                   trust::RefreshMetadata(set, DirectoryFetcher(directory, overlay)));
  if (report != nullptr) *report = std::move(refreshed);
  return set;
}

void PrintWarnings(const std::vector<std::string>& warnings, std::ostream& err) {
  for (const std::string& warning : warnings) err << "weightpathctl repo: warning: " << warning << "\n";
}

// --- staged versions -----------------------------------------------------

// The staged next version of a role, or a new one from the published
// version (version + 1, a fresh expiry, no signatures).
template <typename T>
struct Staged {
  T signed_part;
  std::vector<trust::Signature> signatures;
  std::string canonical;  // what the signatures so far cover; "" for new
  bool existed = false;
};

template <typename T, typename Read>
absl::StatusOr<Staged<T>> LoadOrStartStaged(const std::string& path, const T& published,
                                            absl::Time expires, Read read) {
  ASSIGN_OR_RETURN(std::optional<File<T>> staged, (ReadIfPresent<T>(path, read)));
  Staged<T> result;
  if (staged) {
    result.signed_part = std::move(staged->metadata.signed_part);
    result.signatures = std::move(staged->metadata.signatures);
    result.canonical = std::move(staged->metadata.canonical_signed);
    result.existed = true;
    if (result.signed_part.version <= published.version) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, ": staged version ", result.signed_part.version, " is not above the published ",
          published.version, "; remove the stale staged file"));
    }
    return result;
  }
  result.signed_part = published;
  result.signed_part.version = published.version + 1;
  result.signed_part.expires = expires;
  return result;
}

// `repo sign` with nothing staged would sign a copy of the published
// version as the next one: what an operator wants only to renew its expiry
// (--expires), never by a slip of the command line.
template <typename T>
absl::Status RequireSomethingToSign(const Staged<T>& staged, const std::string& role,
                                    absl::string_view stage_with, const ParsedArguments& args) {
  if (staged.existed || args.Has("expires")) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "nothing is staged for ", role, " v", staged.signed_part.version, ": stage a change with `",
      "weightpathctl repo ", stage_with, "` first, or renew the published ", role,
      " as is with --expires"));
}

// After an edit: earlier signatures cover other bytes and are dropped.
template <typename T>
void DropStaleSignatures(Staged<T>& staged, const std::string& role, std::ostream& out) {
  if (staged.signatures.empty()) return;
  if (trust::CanonicalJson(trust::SignedToJson(staged.signed_part)) == staged.canonical) return;
  out << "note: the staged " << role << " changed; its " << staged.signatures.size()
      << " earlier signature(s) no longer apply and were dropped\n";
  staged.signatures.clear();
}

absl::StatusOr<Staged<Targets>> StageTargetsEdit(const RepositoryLayout& layout,
                                                 const ParsedArguments& args, absl::Time now,
                                                 const Published& published) {
  ASSIGN_OR_RETURN(absl::Time expires, ExpiryFlag(args, "expires", kTargetsLifetime, now));
  ASSIGN_OR_RETURN(Staged<Targets> staged,
                   LoadOrStartStaged(layout.StagedFile("targets.json"),
                                     published.targets.metadata.signed_part, expires, ReadTargets));
  if (args.Has("expires")) staged.signed_part.expires = expires;
  return staged;
}

absl::Status WriteStaged(const RepositoryLayout& layout, const std::string& role,
                         const std::string& bytes) {
  RETURN_IF_ERROR(EnsureDirectory(layout.staged, 0755));
  return WriteFileAtomically(layout.StagedFile(role + ".json"), bytes);
}

// --- actions -------------------------------------------------------------

absl::Status RunInit(const ParsedArguments& args, absl::Time now, CommandIo io) {
  ASSIGN_OR_RETURN(std::string repo, RequiredFlag(args, "repo"));
  const RepositoryLayout layout = LayoutOf(repo);
  RETURN_IF_ERROR(EnsureDirectory(layout.root, 0755));
  ASSIGN_OR_RETURN(RepositoryLock lock, RepositoryLock::Acquire(layout));
  if (FileExists(layout.MetadataFile("root.json"))) {
    return absl::AlreadyExistsError(absl::StrCat(layout.metadata, "/root.json exists: ", repo,
                                                 " is already a repository"));
  }
  trust::NewRepositoryOptions options;
  options.now = absl::FromUnixSeconds(absl::ToUnixSeconds(now));
  ASSIGN_OR_RETURN(options.root_threshold, PositiveFlag(args, "root-threshold", 1));
  ASSIGN_OR_RETURN(options.targets_threshold, PositiveFlag(args, "targets-threshold", 1));
  options.consistent_snapshot = !args.Has("no-consistent-snapshot");
  for (auto [flag, lifetime, out] :
       {std::tuple<const char*, absl::Duration, absl::Duration*>{"root-expires", kRootLifetime,
                                                                 &options.root_lifetime},
        {"targets-expires", kTargetsLifetime, &options.targets_lifetime},
        {"snapshot-expires", kSnapshotLifetime, &options.snapshot_lifetime},
        {"timestamp-expires", kTimestampLifetime, &options.timestamp_lifetime}}) {
    ASSIGN_OR_RETURN(absl::Time expires, ExpiryFlag(args, flag, lifetime, options.now));
    if (expires <= options.now) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": refusing metadata that expires at ",
                                                     trust::FormatExpires(expires),
                                                     ", which is not in the future"));
    }
    *out = expires - options.now;
  }

  trust::NewRepositoryKeys keys;
  std::vector<std::string> warnings;
  std::vector<std::string> written_keys;
  const char* roles[] = {"root", "targets", "snapshot", "timestamp"};
  std::vector<trust::Key>* role_keys[] = {&keys.root, &keys.targets, &keys.snapshot, &keys.timestamp};
  if (std::optional<std::string> key_dir = args.Value("generate-keys")) {
    for (const char* role : roles) {
      if (args.Has(absl::StrCat(role, "-key"))) {
        return absl::InvalidArgumentError(
            absl::StrCat("--generate-keys and --", role, "-key: give one or the other"));
      }
      if (FileExists(absl::StrCat(*key_dir, "/", role, ".pem"))) {
        return absl::AlreadyExistsError(
            absl::StrCat(*key_dir, "/", role, ".pem exists; refusing to overwrite a key"));
      }
    }
    if (options.root_threshold > 1 || options.targets_threshold > 1) {
      return absl::InvalidArgumentError(
          "--generate-keys writes one key per role; a threshold above 1 needs --root-key / "
          "--targets-key with that many keys");
    }
    RETURN_IF_ERROR(EnsureDirectory(*key_dir, 0700));
    for (size_t i = 0; i < 4; ++i) {
      ASSIGN_OR_RETURN(trust::Ed25519PrivateKey key, trust::Ed25519PrivateKey::Generate());
      ASSIGN_OR_RETURN(std::string pem, key.ToPem());
      const std::string path = absl::StrCat(*key_dir, "/", roles[i], ".pem");
      absl::Status created = CreateSecretFile(path, pem);
      trust::WipeSecret(pem);
      RETURN_IF_ERROR(created);
      written_keys.push_back(path);
      trust::SigningKey signer = trust::MakeSigningKey(path, std::move(key));
      role_keys[i]->push_back(signer.key);
      keys.signers.push_back(std::move(signer));
    }
  } else {
    for (size_t i = 0; i < 4; ++i) {
      const std::string flag = absl::StrCat(roles[i], "-key");
      ASSIGN_OR_RETURN(std::string files, RequiredFlag(args, flag));
      absl::StatusOr<std::vector<LoadedKey>> loaded = LoadKeyFiles(files, warnings);
      if (!loaded.ok()) {
        return absl::Status(loaded.status().code(),
                            absl::StrCat("--", flag, ": ", loaded.status().message()));
      }
      for (LoadedKey& key : *loaded) {
        role_keys[i]->push_back(key.key);
        if (key.signer) keys.signers.push_back(*std::move(key.signer));
      }
    }
  }
  PrintWarnings(warnings, io.err);
  ASSIGN_OR_RETURN(trust::RepositoryFiles files, trust::CreateRepository(keys, options));
  ASSIGN_OR_RETURN(Metadata<Root> root, trust::ParseRoot(files.root, "root.json"));

  RETURN_IF_ERROR(EnsureDirectory(layout.metadata, 0755));
  RETURN_IF_ERROR(EnsureDirectory(layout.staged, 0755));
  // The timestamp last: until it exists, no client can start an update.
  for (const auto& [role, bytes] : {std::pair<std::string, const std::string*>{"root", &files.root},
                                    {"targets", &files.targets},
                                    {"snapshot", &files.snapshot}}) {
    for (const std::string& name : NamesFor(root.signed_part, role, 1)) {
      RETURN_IF_ERROR(WriteFileAtomically(layout.MetadataFile(name), *bytes));
    }
  }
  RETURN_IF_ERROR(WriteFileAtomically(layout.MetadataFile("timestamp.json"), files.timestamp));

  io.out << "initialised " << layout.root << " (consistent snapshots: "
         << (options.consistent_snapshot ? "yes" : "no") << ")\n";
  for (const char* role : roles) {
    const trust::RoleKeys& role_entry = root.signed_part.roles.at(role);
    io.out << "  " << role << std::string(10 - absl::string_view(role).size(), ' ') << "threshold "
           << role_entry.threshold << " of " << ShortIds(role_entry.keyids) << "\n";
  }
  for (const std::string& path : written_keys) io.out << "  wrote key " << path << " (0600)\n";
  io.out << "serve " << layout.metadata << "/ over HTTP (trust.metadata_url) and provision devices "
         << "with " << layout.MetadataFile("1.root.json") << " (trust.root)\n";
  return absl::OkStatus();
}

// custom.model, custom.weight_path and custom.canary of a listed target;
// nullopt for a target that is not a weightpath build.
struct ListedBuild {
  std::string model;
  std::string weight_path;
  bool canary = false;
};
std::optional<ListedBuild> BuildOf(const trust::TargetFile& file) {
  if (!file.custom.is_object()) return std::nullopt;
  const Json* model = file.custom.Find("model");
  const Json* weight_path = file.custom.Find("weight_path");
  if (model == nullptr || !model->is_string() || weight_path == nullptr ||
      !weight_path->is_string()) {
    return std::nullopt;
  }
  const Json* canary = file.custom.Find("canary");
  return ListedBuild{model->string_value(), weight_path->string_value(),
                     canary != nullptr && canary->is_bool() && canary->bool_value()};
}

// The model a build added without --model is of: the one the other targets
// (all but `path`, which it may replace) list. A guess among several, or
// from none, would sign a build devices of another model could be sent.
absl::StatusOr<std::string> OnlyModel(const Targets& targets, const std::string& path) {
  std::set<std::string> models;
  for (const auto& [listed, file] : targets.targets) {
    if (listed == path) continue;
    if (std::optional<ListedBuild> build = BuildOf(file)) models.insert(build->model);
  }
  if (models.size() == 1) return *models.begin();
  if (models.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model is required: targets v", targets.version,
        " list no weightpath build yet to take the model from"));
  }
  return absl::InvalidArgumentError(absl::StrCat("--model is required: targets v", targets.version,
                                                 " list several models (",
                                                 absl::StrJoin(models, ", "), ")"));
}

// The server's catalog serves one build of each model's weight path to every
// device; a second is refused there, so it is refused here first unless one
// of the two is a canary (served only where a rollout pins it).
absl::Status CheckOneDefaultBuild(const Targets& targets, const std::string& path,
                                  const trust::WeightpathTarget& custom) {
  if (custom.canary) return absl::OkStatus();
  for (const auto& [listed, file] : targets.targets) {
    if (listed == path) continue;
    std::optional<ListedBuild> build = BuildOf(file);
    if (!build || build->canary || build->model != custom.model ||
        build->weight_path != custom.weight_path) {
      continue;
    }
    return absl::AlreadyExistsError(absl::StrCat(
        "target '", listed, "' is already the ", custom.model, " ", custom.weight_path,
        " build every device is served; add this one with --canary to serve it only where a "
        "rollout pins it (pin_artifact.artifact.target_path: ", path, "), or change that build "
        "with --path ", listed, " --replace"));
  }
  return absl::OkStatus();
}

absl::Status RunAddTarget(const ParsedArguments& args, absl::Time now, CommandIo io) {
  ASSIGN_OR_RETURN(std::string repo, RequiredFlag(args, "repo"));
  ASSIGN_OR_RETURN(std::string path, RequiredFlag(args, "path"));
  RETURN_IF_ERROR(CheckTargetPath(path));
  trust::TargetFile target;
  std::vector<trust::BuildManifestFile> build_files;
  if (std::optional<std::string> dir = args.Value("dir")) {
    if (args.Has("file") || args.Has("length") || args.Has("sha256")) {
      return absl::InvalidArgumentError(
          "--dir computes the build's length and sha256 (its manifest's); give --dir or "
          "--file or --length/--sha256");
    }
    if (!args.Has("weight-path")) {
      return absl::InvalidArgumentError(
          "--dir: a directory build's files are listed in custom: give --weight-path, "
          "--version and --hardware-classes (and --model unless the targets list one model)");
    }
    ASSIGN_OR_RETURN(build_files, DigestModelDirectory(*dir));
    const trust::BuildManifestDigest manifest = trust::DigestBuildManifest(build_files);
    target.length = static_cast<int64_t>(manifest.size_bytes);
    target.hashes["sha256"] = manifest.sha256;
  } else if (args.Has("manifest-out")) {
    return absl::InvalidArgumentError("--manifest-out goes with --dir");
  } else if (std::optional<std::string> file = args.Value("file")) {
    if (args.Has("length") || args.Has("sha256")) {
      return absl::InvalidArgumentError("--file computes length and sha256; give one or the other");
    }
    ASSIGN_OR_RETURN(FileDigest digest, DigestFile(*file));
    target.length = digest.length;
    target.hashes["sha256"] = digest.sha256;
  } else {
    ASSIGN_OR_RETURN(std::string length, RequiredFlag(args, "length"));
    ASSIGN_OR_RETURN(std::string sha256, RequiredFlag(args, "sha256"));
    if (!absl::SimpleAtoi(length, &target.length) || target.length < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--length: '", length, "' is not a byte count"));
    }
    if (sha256.size() != 64 || !trust::IsLowercaseHex(sha256)) {
      return absl::InvalidArgumentError("--sha256: 64 lowercase hex digits");
    }
    target.hashes["sha256"] = sha256;
  }
  const bool any_custom = args.Has("model") || args.Has("weight-path") || args.Has("version") ||
                          args.Has("hardware-classes") || args.Has("canary");
  std::optional<trust::WeightpathTarget> custom;
  if (any_custom) {
    // Devices install only targets that say what they are for, so the four
    // come together or not at all (the model may come from the targets).
    custom.emplace();
    for (const char* flag : {"weight-path", "version", "hardware-classes"}) {
      if (!args.Has(flag)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", flag, " is required: a weightpath build names its --weight-path, --version "
            "and --hardware-classes (and --model unless the targets list one model); without "
            "any of them the target is a plain file devices never install"));
      }
    }
    ASSIGN_OR_RETURN(custom->weight_path, RequiredFlag(args, "weight-path"));
    ASSIGN_OR_RETURN(custom->version, RequiredFlag(args, "version"));
    ASSIGN_OR_RETURN(std::string classes, RequiredFlag(args, "hardware-classes"));
    custom->hardware_classes = SplitList(classes);
    if (custom->hardware_classes.empty()) {
      return absl::InvalidArgumentError("--hardware-classes: at least one class");
    }
    if (args.Has("model")) {
      ASSIGN_OR_RETURN(custom->model, RequiredFlag(args, "model"));
    }
    custom->canary = args.Has("canary");
    custom->files = build_files;
  }

  const RepositoryLayout layout = LayoutOf(repo);
  ASSIGN_OR_RETURN(RepositoryLock lock, RepositoryLock::Acquire(layout));
  ASSIGN_OR_RETURN(Published published, LoadPublished(layout));
  ASSIGN_OR_RETURN(Staged<Targets> staged, StageTargetsEdit(layout, args, now, published));
  const bool exists = staged.signed_part.targets.count(path) != 0;
  if (exists && !args.Has("replace")) {
    return absl::AlreadyExistsError(
        absl::StrCat("target '", path, "' is already listed; --replace to change it"));
  }
  bool model_defaulted = false;
  if (custom) {
    if (custom->model.empty()) {
      ASSIGN_OR_RETURN(custom->model, OnlyModel(staged.signed_part, path));
      model_defaulted = true;
    }
    RETURN_IF_ERROR(CheckOneDefaultBuild(staged.signed_part, path, *custom));
    target.custom = trust::WeightpathTargetToJson(*custom);
  }
  staged.signed_part.targets[path] = target;
  DropStaleSignatures(staged, "targets", io.out);
  std::string manifest_path;
  if (!build_files.empty()) {
    // Not needed by a device (it rebuilds the manifest from the files a
    // decision lists) nor served: the record of exactly what was signed.
    manifest_path = args.Value("manifest-out").value_or("");
    if (manifest_path.empty()) {
      RETURN_IF_ERROR(EnsureDirectory(layout.root + "/manifests", 0755));
      manifest_path = absl::StrCat(layout.root, "/manifests/", target.hashes["sha256"], ".json");
    }
    RETURN_IF_ERROR(WriteFileAtomically(manifest_path, trust::CanonicalBuildManifest(build_files)));
  }
  RETURN_IF_ERROR(WriteStaged(layout, "targets", Encode(staged.signed_part, staged.signatures)));
  io.out << "staged targets v" << staged.signed_part.version << ": " << (exists ? "replaced " : "added ")
         << path << " (" << target.length << " bytes, sha256 " << target.hashes["sha256"] << ")\n";
  if (model_defaulted) {
    io.out << "  model " << custom->model << " (the one model the targets list; --model to name "
           << "another)\n";
  }
  if (custom && custom->canary) {
    io.out << "  a canary of " << custom->model << " " << custom->weight_path
           << ": the catalog keeps serving the path's other build; once published, a rollout "
           << "serves this one to its members with\n"
           << "    action:\n"
           << "      pin_artifact:\n"
           << "        path: " << custom->weight_path << "\n"
           << "        artifact: {target_path: " << path << "}\n";
  }
  if (!build_files.empty()) {
    uint64_t total = 0;
    for (const trust::BuildManifestFile& file : build_files) total += file.size_bytes;
    io.out << "  a directory build of " << build_files.size() << " file(s), " << total
           << " bytes; the target is their manifest, written to " << manifest_path << "\n"
           << "  publish the directory's files on the artifact mirror under " << path
           << "/ (each at URL/" << path << "/FILE, where URL is the server's "
           << "--catalog_artifact_url)\n";
  }
  io.out << "next: weightpathctl repo sign --repo " << repo << " --role targets --key KEY\n";
  return absl::OkStatus();
}

absl::Status RunRemoveTarget(const ParsedArguments& args, absl::Time now, CommandIo io) {
  ASSIGN_OR_RETURN(std::string repo, RequiredFlag(args, "repo"));
  ASSIGN_OR_RETURN(std::string path, RequiredFlag(args, "path"));
  const RepositoryLayout layout = LayoutOf(repo);
  ASSIGN_OR_RETURN(RepositoryLock lock, RepositoryLock::Acquire(layout));
  ASSIGN_OR_RETURN(Published published, LoadPublished(layout));
  ASSIGN_OR_RETURN(Staged<Targets> staged, StageTargetsEdit(layout, args, now, published));
  if (staged.signed_part.targets.erase(path) == 0) {
    return absl::NotFoundError(absl::StrCat("target '", path, "' is not listed in targets v",
                                            staged.signed_part.version));
  }
  DropStaleSignatures(staged, "targets", io.out);
  RETURN_IF_ERROR(WriteStaged(layout, "targets", Encode(staged.signed_part, staged.signatures)));
  io.out << "staged targets v" << staged.signed_part.version << ": removed " << path << "\n"
         << "next: weightpathctl repo sign --repo " << repo << " --role targets --key KEY\n";
  return absl::OkStatus();
}

// Which keys may sign the staged `role`, and how far its signatures go.
struct SignerCheck {
  std::string description;
  const std::map<std::string, trust::Key>* keys;
  const trust::RoleKeys* role;
};

std::string TallyLine(const std::string& canonical, const std::vector<trust::Signature>& signatures,
                      const SignerCheck& check, bool* met) {
  trust::SignatureTally tally = trust::TallySignatures(canonical, signatures, *check.keys,
                                                       check.role->keyids, check.role->threshold);
  if (met != nullptr) *met = tally.valid >= tally.threshold;
  return absl::StrCat(tally.valid, " of ", tally.threshold, " from ", check.description,
                      tally.unsigned_keyids.empty()
                          ? std::string()
                          : absl::StrCat(" (not yet signed by ", ShortIds(tally.unsigned_keyids), ")"));
}

absl::Status RunSign(const ParsedArguments& args, absl::Time now, CommandIo io) {
  ASSIGN_OR_RETURN(std::string repo, RequiredFlag(args, "repo"));
  ASSIGN_OR_RETURN(std::string role, RequiredFlag(args, "role"));
  if (role != "root" && role != "targets") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--role: '", role, "'; sign root or targets here (snapshot and timestamp are signed by "
        "`repo timestamp`)"));
  }
  ASSIGN_OR_RETURN(std::string key_files, RequiredFlag(args, "key"));
  std::vector<std::string> warnings;
  ASSIGN_OR_RETURN(std::vector<trust::SigningKey> signers, LoadSigningKeys(key_files, warnings));
  PrintWarnings(warnings, io.err);

  const RepositoryLayout layout = LayoutOf(repo);
  ASSIGN_OR_RETURN(RepositoryLock lock, RepositoryLock::Acquire(layout));
  ASSIGN_OR_RETURN(Published published, LoadPublished(layout));
  const Root& published_root = published.root.metadata.signed_part;
  const std::string staged_path = layout.StagedFile(role + ".json");

  if (role == "root") {
    ASSIGN_OR_RETURN(absl::Time expires, ExpiryFlag(args, "expires", kRootLifetime, now));
    ASSIGN_OR_RETURN(Staged<Root> staged,
                     LoadOrStartStaged(staged_path, published_root, expires, ReadRoot));
    RETURN_IF_ERROR(RequireSomethingToSign(staged, "root", "rotate-root", args));
    if (args.Has("expires")) staged.signed_part.expires = expires;
    DropStaleSignatures(staged, "root", io.out);
    RETURN_IF_ERROR(trust::CheckPublishable(staged_path, staged.signed_part, published_root.version, now));
    if (staged.signed_part.version != published_root.version + 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          staged_path, ": version ", staged.signed_part.version, "; the next root must be ",
          published_root.version + 1));
    }
    // A root key of either version may sign: the old ones let devices move
    // on, the new ones show the new holders accept the root.
    std::set<std::string> allowed(published_root.roles.at("root").keyids.begin(),
                                  published_root.roles.at("root").keyids.end());
    allowed.insert(staged.signed_part.roles.at("root").keyids.begin(),
                   staged.signed_part.roles.at("root").keyids.end());
    std::vector<const trust::SigningKey*> chosen;
    for (const trust::SigningKey& signer : signers) {
      if (allowed.count(signer.key.keyid) == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            signer.source, ": key ", trust::ShortKeyId(signer.key.keyid), " is a root key of neither v",
            published_root.version, " nor v", staged.signed_part.version));
      }
      chosen.push_back(&signer);
    }
    const Json signed_json = trust::SignedToJson(staged.signed_part);
    ASSIGN_OR_RETURN(std::string bytes, trust::SignMetadata(signed_json, chosen, staged.signatures));
    ASSIGN_OR_RETURN(Metadata<Root> signed_root, trust::ParseRoot(bytes, staged_path));
    RETURN_IF_ERROR(WriteStaged(layout, "root", bytes));
    bool old_met = false;
    bool new_met = false;
    const std::string old_line = TallyLine(
        signed_root.canonical_signed, signed_root.signatures,
        {absl::StrCat("the root keys of v", published_root.version), &published_root.keys,
         &published_root.roles.at("root")},
        &old_met);
    const std::string new_line = TallyLine(
        signed_root.canonical_signed, signed_root.signatures,
        {absl::StrCat("the root keys of v", staged.signed_part.version),
         &signed_root.signed_part.keys, &signed_root.signed_part.roles.at("root")},
        &new_met);
    io.out << "staged root v" << staged.signed_part.version << " signed by " << ShortIds([&] {
      std::vector<std::string> ids;
      for (const trust::SigningKey* signer : chosen) ids.push_back(signer->key.keyid);
      return ids;
    }()) << "\n  " << old_line << "\n  " << new_line << "\n"
           << (old_met && new_met ? "ready: publish it with `weightpathctl repo timestamp`\n"
                                  : "needs more signatures before it can be published\n");
    return absl::OkStatus();
  }

  ASSIGN_OR_RETURN(absl::Time expires, ExpiryFlag(args, "expires", kTargetsLifetime, now));
  ASSIGN_OR_RETURN(Staged<Targets> staged,
                   LoadOrStartStaged(staged_path, published.targets.metadata.signed_part, expires,
                                     ReadTargets));
  if (args.Has("expires")) staged.signed_part.expires = expires;
  DropStaleSignatures(staged, "targets", io.out);
  RETURN_IF_ERROR(trust::CheckPublishable(staged_path, staged.signed_part,
                                   published.targets.metadata.signed_part.version, now));
  // The root the targets will be checked against once published: a staged
  // root, if there is one, else the published root.
  ASSIGN_OR_RETURN(std::optional<File<Root>> staged_root,
                   (ReadIfPresent<Root>(layout.StagedFile("root.json"), ReadRoot)));
  const Root& effective_root = staged_root ? staged_root->metadata.signed_part : published_root;
  ASSIGN_OR_RETURN(std::vector<const trust::SigningKey*> chosen,
                   trust::KeysForRole(effective_root, "targets", signers));
  RETURN_IF_ERROR(RequireSomethingToSign(staged, "targets", "add-target or remove-target", args));
  // A staged edit that leaves nothing listed; renewing a published empty
  // targets (--expires, nothing staged) changes nothing devices see.
  if (staged.existed && staged.signed_part.targets.empty() && !args.Has("allow-empty")) {
    return absl::FailedPreconditionError(absl::StrCat(
        "targets v", staged.signed_part.version,
        " would list no target at all: devices and the server's catalog would find no build. "
        "Stage one with `weightpathctl repo add-target`, or pass --allow-empty to publish an "
        "empty targets on purpose"));
  }
  ASSIGN_OR_RETURN(std::string bytes, trust::SignMetadata(trust::SignedToJson(staged.signed_part),
                                                          chosen, staged.signatures));
  ASSIGN_OR_RETURN(Metadata<Targets> signed_targets, trust::ParseTargets(bytes, staged_path));
  RETURN_IF_ERROR(WriteStaged(layout, "targets", bytes));
  bool met = false;
  const std::string line =
      TallyLine(signed_targets.canonical_signed, signed_targets.signatures,
                {absl::StrCat("the targets keys of root v", effective_root.version),
                 &effective_root.keys, &effective_root.roles.at("targets")},
                &met);
  io.out << "staged targets v" << staged.signed_part.version << " ("
         << staged.signed_part.targets.size() << " targets, expires "
         << trust::FormatExpires(staged.signed_part.expires) << ")\n  " << line << "\n"
         << (met ? "ready: publish it with `weightpathctl repo timestamp`\n"
                 : "needs more signatures before it can be published\n");
  return absl::OkStatus();
}

absl::Status RunRotateRoot(const ParsedArguments& args, absl::Time now, CommandIo io) {
  ASSIGN_OR_RETURN(std::string repo, RequiredFlag(args, "repo"));
  ASSIGN_OR_RETURN(std::string role, RequiredFlag(args, "role"));
  if (!trust::IsTopLevelRoleName(role)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--role: '", role, "' is not root, targets, snapshot or timestamp"));
  }
  ASSIGN_OR_RETURN(std::string key_files, RequiredFlag(args, "keys"));
  ASSIGN_OR_RETURN(int64_t threshold, PositiveFlag(args, "threshold", 1));
  std::vector<std::string> warnings;
  ASSIGN_OR_RETURN(std::vector<LoadedKey> keys, LoadKeyFiles(key_files, warnings));
  PrintWarnings(warnings, io.err);
  if (threshold > static_cast<int64_t>(keys.size())) {
    return absl::InvalidArgumentError(absl::StrCat("--threshold ", threshold, " is more than the ",
                                                   keys.size(), " keys given"));
  }

  const RepositoryLayout layout = LayoutOf(repo);
  ASSIGN_OR_RETURN(RepositoryLock lock, RepositoryLock::Acquire(layout));
  ASSIGN_OR_RETURN(Published published, LoadPublished(layout));
  const Root& published_root = published.root.metadata.signed_part;
  ASSIGN_OR_RETURN(absl::Time expires, ExpiryFlag(args, "expires", kRootLifetime, now));
  ASSIGN_OR_RETURN(Staged<Root> staged, LoadOrStartStaged(layout.StagedFile("root.json"),
                                                          published_root, expires, ReadRoot));
  if (args.Has("expires")) staged.signed_part.expires = expires;
  trust::RoleKeys& role_keys = staged.signed_part.roles[role];
  role_keys.keyids.clear();
  for (const LoadedKey& key : keys) {
    role_keys.keyids.push_back(key.key.keyid);
    staged.signed_part.keys[key.key.keyid] = key.key;
  }
  role_keys.threshold = threshold;
  // Keys no role lists any more leave the root.
  std::set<std::string> used;
  for (const auto& [name, entry] : staged.signed_part.roles) used.insert(entry.keyids.begin(), entry.keyids.end());
  for (auto it = staged.signed_part.keys.begin(); it != staged.signed_part.keys.end();) {
    it = used.count(it->first) ? std::next(it) : staged.signed_part.keys.erase(it);
  }
  DropStaleSignatures(staged, "root", io.out);
  RETURN_IF_ERROR(trust::CheckPublishable(layout.StagedFile("root.json"), staged.signed_part,
                                   published_root.version, now));
  RETURN_IF_ERROR(WriteStaged(layout, "root", Encode(staged.signed_part, staged.signatures)));
  const trust::RoleKeys& old_root = published_root.roles.at("root");
  const trust::RoleKeys& new_root = staged.signed_part.roles.at("root");
  io.out << "staged root v" << staged.signed_part.version << ": " << role << " keys "
         << ShortIds(role_keys.keyids) << ", threshold " << threshold << "\n"
         << "it needs " << old_root.threshold << " signature(s) from the root keys of v"
         << published_root.version << " (" << ShortIds(old_root.keyids) << ") and "
         << new_root.threshold << " from those of v" << staged.signed_part.version << " ("
         << ShortIds(new_root.keyids) << "):\n"
         << "  weightpathctl repo sign --repo " << repo << " --role root --key KEY[,KEY...]\n";
  if (role == "timestamp" || role == "snapshot") {
    io.out << "then publish with the new " << role << " key: weightpathctl repo timestamp --repo "
           << repo << " --key TIMESTAMP_KEY --snapshot-key SNAPSHOT_KEY\n";
  } else if (role == "targets") {
    io.out << "and sign the next targets with the new targets keys before publishing\n";
  }
  return absl::OkStatus();
}

absl::Status RunTimestamp(const ParsedArguments& args, absl::Time now, CommandIo io) {
  ASSIGN_OR_RETURN(std::string repo, RequiredFlag(args, "repo"));
  ASSIGN_OR_RETURN(std::string timestamp_files, RequiredFlag(args, "key"));
  std::vector<std::string> warnings;
  ASSIGN_OR_RETURN(std::vector<trust::SigningKey> timestamp_keys,
                   LoadSigningKeys(timestamp_files, warnings));
  std::vector<trust::SigningKey> snapshot_keys;
  if (std::optional<std::string> files = args.Value("snapshot-key")) {
    ASSIGN_OR_RETURN(snapshot_keys, LoadSigningKeys(*files, warnings));
  }
  PrintWarnings(warnings, io.err);
  ASSIGN_OR_RETURN(absl::Time timestamp_expires, ExpiryFlag(args, "expires", kTimestampLifetime, now));
  ASSIGN_OR_RETURN(absl::Time snapshot_expires,
                   ExpiryFlag(args, "snapshot-expires", kSnapshotLifetime, now));

  const RepositoryLayout layout = LayoutOf(repo);
  ASSIGN_OR_RETURN(RepositoryLock lock, RepositoryLock::Acquire(layout));
  ASSIGN_OR_RETURN(Published published, LoadPublished(layout));
  const Root& old_root = published.root.metadata.signed_part;
  std::vector<std::string> notes;
  // Files to publish: name -> bytes.
  std::map<std::string, std::string> files;
  std::vector<std::string> published_staged;
  std::vector<std::string> summary;

  // 1. A fully signed staged root.
  const Root* root = &old_root;
  ASSIGN_OR_RETURN(std::optional<File<Root>> staged_root,
                   (ReadIfPresent<Root>(layout.StagedFile("root.json"), ReadRoot)));
  if (staged_root) {
    const Metadata<Root>& next = staged_root->metadata;
    trust::SignatureTally by_old = trust::TallySignatures(
        next.canonical_signed, next.signatures, old_root.keys, old_root.roles.at("root").keyids,
        old_root.roles.at("root").threshold);
    trust::SignatureTally by_new = trust::TallySignatures(
        next.canonical_signed, next.signatures, next.signed_part.keys,
        next.signed_part.roles.at("root").keyids, next.signed_part.roles.at("root").threshold);
    if (next.signed_part.version != old_root.version + 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          layout.StagedFile("root.json"), ": version ", next.signed_part.version,
          ", but the next root is ", old_root.version + 1, "; remove the stale staged root"));
    }
    if (by_old.valid >= by_old.threshold && by_new.valid >= by_new.threshold) {
      RETURN_IF_ERROR(trust::CheckPublishable(layout.StagedFile("root.json"), next.signed_part,
                                       old_root.version, now));
      root = &next.signed_part;
      for (const std::string& name : NamesFor(*root, "root", root->version)) {
        files[name] = staged_root->bytes;
      }
      published_staged.push_back(layout.StagedFile("root.json"));
      summary.push_back(absl::StrCat("root v", root->version));
    } else {
      notes.push_back(absl::StrCat("staged root v", next.signed_part.version, " is not published: ",
                                   by_old.valid, " of ", by_old.threshold, " signatures from v",
                                   old_root.version, "'s root keys, ", by_new.valid, " of ",
                                   by_new.threshold, " from its own"));
    }
  }
  const auto verified_by = [&](const std::string& role, const std::string& canonical,
                               const std::vector<trust::Signature>& signatures) {
    const trust::RoleKeys& keys = root->roles.at(role);
    trust::SignatureTally tally =
        trust::TallySignatures(canonical, signatures, root->keys, keys.keyids, keys.threshold);
    return tally.valid >= tally.threshold;
  };

  // 2. A fully signed staged targets.
  std::string targets_bytes = published.targets.bytes;
  int64_t targets_version = published.targets.metadata.signed_part.version;
  bool targets_changed = false;
  ASSIGN_OR_RETURN(std::optional<File<Targets>> staged_targets,
                   (ReadIfPresent<Targets>(layout.StagedFile("targets.json"), ReadTargets)));
  if (staged_targets) {
    const Metadata<Targets>& next = staged_targets->metadata;
    if (verified_by("targets", next.canonical_signed, next.signatures)) {
      RETURN_IF_ERROR(trust::CheckPublishable(layout.StagedFile("targets.json"), next.signed_part,
                                       targets_version, now));
      targets_bytes = staged_targets->bytes;
      targets_version = next.signed_part.version;
      targets_changed = true;
      for (const std::string& name : NamesFor(*root, "targets", targets_version)) {
        files[name] = targets_bytes;
      }
      published_staged.push_back(layout.StagedFile("targets.json"));
      summary.push_back(absl::StrCat("targets v", targets_version, " (",
                                     next.signed_part.targets.size(), " targets)"));
    } else {
      notes.push_back(absl::StrCat("staged targets v", next.signed_part.version,
                                   " is not published: below the threshold of the targets keys "
                                   "of root v", root->version));
    }
  }
  if (!targets_changed && !verified_by("targets", published.targets.metadata.canonical_signed,
                                       published.targets.metadata.signatures)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "root v", root->version, " changes the targets keys, and the published targets v",
        targets_version, " is not signed by them: stage and sign targets with the new keys (repo "
        "sign --role targets) before publishing the root"));
  }

  // 3. A new snapshot when the targets changed, its keys changed, or asked.
  std::string snapshot_bytes = published.snapshot.bytes;
  int64_t snapshot_version = published.snapshot.metadata.signed_part.version;
  absl::Time snapshot_expiry = published.snapshot.metadata.signed_part.expires;
  const bool snapshot_stale = !verified_by("snapshot", published.snapshot.metadata.canonical_signed,
                                           published.snapshot.metadata.signatures);
  if (targets_changed || snapshot_stale || !snapshot_keys.empty()) {
    if (snapshot_keys.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--snapshot-key is required: ",
          snapshot_stale ? absl::StrCat("root v", root->version, " changes the snapshot keys")
                         : std::string("the targets changed, so the snapshot must")));
    }
    ASSIGN_OR_RETURN(std::vector<const trust::SigningKey*> chosen,
                     trust::KeysForRole(*root, "snapshot", snapshot_keys));
    Snapshot snapshot = published.snapshot.metadata.signed_part;
    snapshot.version = snapshot_version + 1;
    snapshot.expires = snapshot_expires;
    snapshot.meta["targets.json"] = trust::DescribeMetadataFile(targets_bytes, targets_version);
    RETURN_IF_ERROR(trust::CheckPublishable("snapshot", snapshot, snapshot_version, now));
    ASSIGN_OR_RETURN(snapshot_bytes, trust::SignMetadata(trust::SignedToJson(snapshot), chosen));
    snapshot_version = snapshot.version;
    snapshot_expiry = snapshot.expires;
    for (const std::string& name : NamesFor(*root, "snapshot", snapshot_version)) {
      files[name] = snapshot_bytes;
    }
    summary.push_back(absl::StrCat("snapshot v", snapshot_version, " (expires ",
                                   trust::FormatExpires(snapshot.expires), ")"));
  }

  // 4. Always a new timestamp.
  ASSIGN_OR_RETURN(std::vector<const trust::SigningKey*> chosen,
                   trust::KeysForRole(*root, "timestamp", timestamp_keys));
  Timestamp probe;
  probe.version = published.timestamp.metadata.signed_part.version + 1;
  probe.expires = timestamp_expires;
  RETURN_IF_ERROR(
      trust::CheckPublishable("timestamp", probe, published.timestamp.metadata.signed_part.version, now));
  ASSIGN_OR_RETURN(files["timestamp.json"],
                   trust::MakeTimestamp(snapshot_bytes, snapshot_version,
                                        published.timestamp.metadata.signed_part.version,
                                        timestamp_expires, chosen));
  summary.push_back(absl::StrCat("timestamp v", probe.version, " (expires ",
                                 trust::FormatExpires(timestamp_expires), ")"));

  // What will expire first: a device refuses the whole repository once any
  // role has, however fresh the timestamp.
  const absl::Time targets_expiry = targets_changed
                                        ? staged_targets->metadata.signed_part.expires
                                        : published.targets.metadata.signed_part.expires;
  // Soon means within half the role's default lifetime, two weeks at most:
  // two weeks' notice to gather the offline root and targets keys, 3.5 days
  // for a snapshot. A flat two weeks noted every default 7-day snapshot on
  // every publish, which taught operators to ignore the note.
  struct Expiry {
    std::string what;
    absl::Time expiry;
    absl::Duration default_lifetime;
    const char* renew;
  };
  const Expiry expiries[] = {
      {absl::StrCat("root v", root->version), root->expires, kRootLifetime,
       "repo sign --role root --expires"},
      {absl::StrCat("targets v", targets_version), targets_expiry, kTargetsLifetime,
       "repo sign --role targets --expires"},
      {absl::StrCat("snapshot v", snapshot_version), snapshot_expiry, kSnapshotLifetime,
       "--snapshot-key here"}};
  for (const Expiry& role : expiries) {
    const absl::Duration soon = std::min(absl::Hours(24 * 14), role.default_lifetime / 2);
    if (role.expiry < timestamp_expires) {
      notes.push_back(absl::StrCat(role.what, " expires at ", trust::FormatExpires(role.expiry),
                                   ", before this timestamp: devices refuse the repository from "
                                   "then on unless it is re-signed (",
                                   role.renew, ")"));
    } else if (role.expiry < now + soon) {
      notes.push_back(absl::StrCat(role.what, " expires at ", trust::FormatExpires(role.expiry),
                                   ", within ", absl::FDivDuration(soon, absl::Hours(24)),
                                   " days: re-sign it before then (", role.renew, ")"));
    }
  }

  // 5. Nothing is written that a device would refuse: a device holding the
  // first root, and one holding what was published until now, both accept
  // the result.
  ASSIGN_OR_RETURN(std::string first_root,
                   ReadBoundedFile(layout.MetadataFile("1.root.json"), kLimits.root_max_bytes));
  absl::StatusOr<trust::TrustedMetadataSet> fresh =
      RefreshAsDevice(layout.metadata, first_root, now, &files, nullptr);
  if (!fresh.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to publish: a device starting from 1.root.json would refuse it: ",
        fresh.status().message()));
  }
  absl::StatusOr<trust::TrustedMetadataSet> before =
      RefreshAsDevice(layout.metadata, first_root, now, nullptr, nullptr);
  if (before.ok()) {
    absl::StatusOr<trust::TrustedMetadataSet> after =
        trust::TrustedMetadataSet::Restore(before->SerializeTrusted(), now, kLimits);
    absl::Status updated = after.status();
    if (after.ok()) {
      updated = trust::RefreshMetadata(*after, DirectoryFetcher(layout.metadata, &files)).status();
    }
    if (!updated.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "refusing to publish: a device that trusts the published metadata would refuse it: ",
          updated.message()));
    }
  }

  // 6. Versioned files first, the plain names next, timestamp.json last: a
  // device that reads the new timestamp finds everything it names.
  std::vector<std::string> order;
  for (const auto& [name, bytes] : files) {
    if (name != "timestamp.json" && std::isdigit(static_cast<unsigned char>(name.front()))) order.push_back(name);
  }
  for (const auto& [name, bytes] : files) {
    if (name != "timestamp.json" && !std::isdigit(static_cast<unsigned char>(name.front()))) order.push_back(name);
  }
  order.push_back("timestamp.json");
  for (const std::string& name : order) {
    RETURN_IF_ERROR(WriteFileAtomically(layout.MetadataFile(name), files.at(name)));
  }
  for (const std::string& path : published_staged) RETURN_IF_ERROR(RemoveFileIfPresent(path));
  io.out << "published " << absl::StrJoin(summary, ", ") << "\n";
  for (const std::string& note : notes) io.out << "note: " << note << "\n";
  return absl::OkStatus();
}

Json KeysJson(const trust::RoleKeys& role) {
  Json out = Json::MakeObject();
  Json ids = Json::MakeArray();
  for (const std::string& keyid : role.keyids) ids.array().push_back(Json::String(keyid));
  out.Set("keyids", std::move(ids));
  out.Set("threshold", Json::Int(role.threshold));
  return out;
}

Json RoleJson(const trust::SignedCommon& common) {
  Json out = Json::MakeObject();
  out.Set("version", Json::Int(common.version));
  out.Set("expires", Json::String(trust::FormatExpires(common.expires)));
  return out;
}

Json TargetJson(const trust::TargetInfo& target) {
  Json out = Json::MakeObject();
  out.Set("path", Json::String(target.path));
  out.Set("length", Json::Int(target.file.length));
  out.Set("sha256", Json::String(target.sha256));
  out.Set("role", Json::String(target.role));
  if (!target.file.custom.is_null()) out.Set("custom", target.file.custom);
  return out;
}

absl::Status RunVerify(const ParsedArguments& args, absl::Time now, CommandIo io) {
  std::string directory;
  if (std::optional<std::string> metadata = args.Value("metadata-dir")) {
    if (args.Has("repo")) return absl::InvalidArgumentError("--repo or --metadata-dir, not both");
    directory = *metadata;
  } else {
    ASSIGN_OR_RETURN(std::string repo, RequiredFlag(args, "repo"));
    directory = LayoutOf(repo).metadata;
  }
  ASSIGN_OR_RETURN(const ViewOutput output, ParseViewOutput(args.Value("output")));
  absl::Time at = now;
  if (std::optional<std::string> text = args.Value("at")) {
    absl::StatusOr<absl::Time> parsed = trust::ParseExpires(*text);
    if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat("--at: ", parsed.status().message()));
    at = *parsed;
  }
  const std::string root_path = args.Value("root").value_or(directory + "/1.root.json");
  ASSIGN_OR_RETURN(std::string root_bytes, ReadBoundedFile(root_path, kLimits.root_max_bytes));
  trust::RefreshReport report;
  ASSIGN_OR_RETURN(trust::TrustedMetadataSet set,
                   RefreshAsDevice(directory, root_bytes, at, nullptr, &report));
  const trust::MetadataFetcher fetch = DirectoryFetcher(directory, nullptr);
  ASSIGN_OR_RETURN(std::vector<trust::TargetInfo> targets, trust::ListTargets(set, &fetch));
  std::optional<trust::TargetInfo> target;
  if (std::optional<std::string> path = args.Value("target")) {
    ASSIGN_OR_RETURN(target, trust::FindTarget(set, *path, &fetch));
  }
  // A directory checked as a device checks a directory build: the signed
  // files must make the signed manifest, and the directory must hold
  // exactly them.
  std::optional<std::string> build_dir = args.Value("dir");
  std::vector<trust::BuildManifestFile> build_files;
  if (build_dir) {
    if (!target) return absl::InvalidArgumentError("--dir needs --target (the build it should be)");
    ASSIGN_OR_RETURN(const trust::WeightpathTarget custom, trust::ParseWeightpathTarget(*target));
    if (custom.files.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "target \"", ControlEscaped(target->path),
          "\" is a single-file build (its custom lists no files); --dir checks a directory build"));
    }
    const trust::BuildManifestDigest manifest = trust::DigestBuildManifest(custom.files);
    if (manifest.sha256 != target->sha256 ||
        static_cast<int64_t>(manifest.size_bytes) != target->file.length) {
      return absl::PermissionDeniedError(absl::StrCat(
          "target \"", ControlEscaped(target->path), "\": its custom.files make a manifest of ",
          manifest.size_bytes, " bytes, sha256 ", manifest.sha256, ", not the signed ",
          target->file.length, " bytes, sha256 ", target->sha256, "; a device refuses it"));
    }
    RETURN_IF_ERROR(CheckDirectoryAgainstBuild(*build_dir, custom.files));
    build_files = custom.files;
  }
  uint64_t build_bytes = 0;
  for (const trust::BuildManifestFile& file : build_files) build_bytes += file.size_bytes;

  const Root& root = set.root().signed_part;
  if (output != ViewOutput::kTable) {
    Json out = Json::MakeObject();
    out.Set("metadata_dir", Json::String(directory));
    out.Set("reference_time", Json::String(trust::FormatExpires(at)));
    Json root_json = RoleJson(root);
    root_json.Set("consistent_snapshot", Json::Bool(root.consistent_snapshot));
    Json roles = Json::MakeObject();
    for (const auto& [name, role] : root.roles) roles.Set(name, KeysJson(role));
    root_json.Set("roles", std::move(roles));
    out.Set("root", std::move(root_json));
    out.Set("timestamp", RoleJson(set.timestamp()->signed_part));
    out.Set("snapshot", RoleJson(set.snapshot()->signed_part));
    out.Set("targets", RoleJson(set.targets()->signed_part));
    Json listed = Json::MakeArray();
    for (const trust::TargetInfo& info : targets) listed.array().push_back(TargetJson(info));
    out.Set("target_files", std::move(listed));
    if (target) out.Set("target", TargetJson(*target));
    if (build_dir) {
      Json checked = Json::MakeObject();
      checked.Set("path", Json::String(*build_dir));
      checked.Set("files", Json::Int(static_cast<int64_t>(build_files.size())));
      checked.Set("size_bytes", Json::Int(static_cast<int64_t>(build_bytes)));
      out.Set("directory_verified", std::move(checked));
    }
    return WriteJsonDocument(trust::PrettyJson(out), output, io.out);
  }
  io.out << directory << ": verified from " << root_path << " (root v"
         << report.root_version_before << ") at " << trust::FormatExpires(at) << "\n";
  const auto line = [&](const std::string& name, const trust::SignedCommon& common) {
    io.out << "  " << name << std::string(11 - name.size(), ' ') << "v" << common.version
           << "  expires " << trust::FormatExpires(common.expires) << "\n";
  };
  line("root", root);
  for (const auto& [name, role] : root.roles) {
    io.out << "    " << name << std::string(11 - name.size(), ' ') << role.threshold << " of "
           << ShortIds(role.keyids) << "\n";
  }
  line("timestamp", set.timestamp()->signed_part);
  line("snapshot", set.snapshot()->signed_part);
  line("targets", set.targets()->signed_part);
  io.out << "  " << targets.size() << " target(s)\n";
  if (target) {
    io.out << "target " << target->path << ": " << target->file.length << " bytes, sha256 "
           << target->sha256 << " (signed by " << target->role << ")\n";
    if (!target->file.custom.is_null()) {
      io.out << "  custom " << trust::CanonicalJson(target->file.custom) << "\n";
    }
  }
  if (build_dir) {
    io.out << *build_dir << ": holds exactly the signed build (" << build_files.size()
           << " file(s), " << build_bytes << " bytes, every size and sha256 as signed)\n";
  }
  return absl::OkStatus();
}

}  // namespace

int RunRepoCommand(const std::vector<std::string>& args, CommandIo io) {
  if (args.empty() || args.front() == "--help" || args.front() == "-h" || args.front() == "help") {
    WriteHelp(args.empty() ? io.err : io.out);
    return args.empty() ? kExitUsage : kExitOk;
  }
  const ActionSpec* spec = nullptr;
  for (const ActionSpec& candidate : kActions) {
    if (candidate.name == args.front()) spec = &candidate;
  }
  if (spec == nullptr) {
    io.err << "weightpathctl repo: unknown action '" << args.front()
           << "'; run 'weightpathctl repo --help'\n";
    return kExitUsage;
  }
  const std::string command = absl::StrCat(kCommand, " ", spec->name);
  const std::vector<FlagSpec> flags = FlagsFor(spec->action);
  int exit_code = kExitOk;
  const std::optional<ParsedArguments> parsed = ParseFlags(
      command, std::vector<std::string>(args.begin() + 1, args.end()), flags,
      [spec, &flags](std::ostream& out) {
        out << "usage: weightpathctl repo " << spec->name << " [flags]\n"
            << spec->summary << "\n\n"
            << FlagHelp(flags);
      },
      io, &exit_code);
  if (!parsed.has_value()) return exit_code;
  const absl::Time now = absl::Now();
  absl::Status status;
  switch (spec->action) {
    case Action::kInit:
      status = RunInit(*parsed, now, io);
      break;
    case Action::kAddTarget:
      status = RunAddTarget(*parsed, now, io);
      break;
    case Action::kRemoveTarget:
      status = RunRemoveTarget(*parsed, now, io);
      break;
    case Action::kSign:
      status = RunSign(*parsed, now, io);
      break;
    case Action::kTimestamp:
      status = RunTimestamp(*parsed, now, io);
      break;
    case Action::kRotateRoot:
      status = RunRotateRoot(*parsed, now, io);
      break;
    case Action::kVerify:
      status = RunVerify(*parsed, now, io);
      break;
  }
  if (!status.ok()) return ReportError(command, status, io.err);
  return kExitOk;
}

}  // namespace weightpath::ctl
