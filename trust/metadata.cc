#include "trust/metadata.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace weightpath::trust {
namespace {

std::string Quoted(absl::string_view text) { return absl::StrCat("\"", text, "\""); }

// Reads the members of one JSON object, naming each in errors by its path
// from the document root, and collects the members nobody asked for.
class Fields {
 public:
  Fields(const Json& value, absl::string_view label, std::string path)
      : label_(label), path_(std::move(path)) {
    if (value.is_object()) object_ = &value.object();
  }

  absl::Status CheckObject(const Json& value) const {
    if (value.is_object()) return absl::OkStatus();
    return Error(path_, absl::StrCat("must be an object, not ", JsonTypeName(value.type())));
  }

  std::string Path(absl::string_view key) const {
    return path_.empty() ? std::string(key) : absl::StrCat(path_, ".", key);
  }

  absl::Status Error(absl::string_view path, absl::string_view reason) const {
    return absl::InvalidArgumentError(absl::StrCat(label_, ": ", path, ": ", reason));
  }

  const Json* Optional(absl::string_view key) {
    if (object_ == nullptr) return nullptr;
    auto it = object_->find(key);
    if (it == object_->end()) return nullptr;
    used_.push_back(it->first);
    return &it->second;
  }

  absl::StatusOr<const Json*> Required(absl::string_view key, Json::Type type) {
    const Json* value = Optional(key);
    if (value == nullptr) return Error(Path(key), "missing");
    if (value->type() != type) {
      return Error(Path(key), absl::StrCat("must be ", JsonTypeName(type), ", not ",
                                           JsonTypeName(value->type())));
    }
    return value;
  }

  absl::StatusOr<std::string> String(absl::string_view key) {
    ASSIGN_OR_RETURN(const Json* value, Required(key, Json::Type::kString));
    return value->string_value();
  }

  absl::StatusOr<int64_t> Integer(absl::string_view key, int64_t minimum) {
    ASSIGN_OR_RETURN(const Json* value, Required(key, Json::Type::kInt));
    if (value->int_value() < minimum) {
      return Error(Path(key), absl::StrCat("must be at least ", minimum, ", not ",
                                           value->int_value()));
    }
    return value->int_value();
  }

  absl::StatusOr<bool> Boolean(absl::string_view key) {
    ASSIGN_OR_RETURN(const Json* value, Required(key, Json::Type::kBool));
    return value->bool_value();
  }

  Json::Object Unrecognized() const {
    Json::Object rest;
    if (object_ == nullptr) return rest;
    for (const auto& [key, value] : *object_) {
      if (std::find(used_.begin(), used_.end(), key) == used_.end()) rest.emplace(key, value);
    }
    return rest;
  }

  absl::string_view label() const { return label_; }
  const std::string& path() const { return path_; }

 private:
  absl::string_view label_;
  std::string path_;
  const Json::Object* object_ = nullptr;
  // Keys of *object_ already read; an object has a handful of fields, and
  // one of these per target makes a set's allocations show in profiles.
  std::vector<absl::string_view> used_;
};

void MergeUnrecognized(const Json::Object& unrecognized, Json& into) {
  for (const auto& [key, value] : unrecognized) {
    // A known field always wins: an unrecognized field can only have come
    // from a document that did not have the known one.
    into.object().emplace(key, value);
  }
}

absl::Status ParseSpecVersion(absl::string_view label, const std::string& version) {
  std::vector<absl::string_view> parts = absl::StrSplit(version, '.');
  bool numeric = parts.size() == 2 || parts.size() == 3;
  for (absl::string_view part : parts) {
    uint32_t unused = 0;
    if (part.empty() || !absl::SimpleAtoi(part, &unused)) numeric = false;
  }
  if (!numeric) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": signed.spec_version: ", Quoted(version), " is not MAJOR.MINOR[.PATCH]"));
  }
  if (parts[0] != "1") {
    return absl::InvalidArgumentError(absl::StrCat(
        label, ": signed.spec_version: ", Quoted(version),
        " is not supported (this client reads TUF specification 1.x)"));
  }
  return absl::OkStatus();
}

absl::Status ParseCommon(Fields& fields, RoleType expected, SignedCommon& common) {
  ASSIGN_OR_RETURN(std::string type, fields.String("_type"));
  if (type != RoleTypeName(expected)) {
    return fields.Error("signed._type", absl::StrCat(Quoted(type), ", expected ",
                                                     Quoted(RoleTypeName(expected))));
  }
  ASSIGN_OR_RETURN(common.spec_version, fields.String("spec_version"));
  RETURN_IF_ERROR(ParseSpecVersion(fields.label(), common.spec_version));
  ASSIGN_OR_RETURN(common.version, fields.Integer("version", 1));
  ASSIGN_OR_RETURN(std::string expires, fields.String("expires"));
  absl::StatusOr<absl::Time> parsed = ParseExpires(expires);
  if (!parsed.ok()) return fields.Error("signed.expires", parsed.status().message());
  common.expires = *parsed;
  return absl::OkStatus();
}

void CommonToJson(const SignedCommon& common, RoleType type, Json& out) {
  out.Set("_type", Json::String(std::string(RoleTypeName(type))));
  out.Set("spec_version", Json::String(common.spec_version));
  out.Set("version", Json::Int(common.version));
  out.Set("expires", Json::String(FormatExpires(common.expires)));
}

absl::StatusOr<std::vector<std::string>> StringList(Fields& fields, absl::string_view key,
                                                    bool allow_empty) {
  ASSIGN_OR_RETURN(const Json* value, fields.Required(key, Json::Type::kArray));
  std::vector<std::string> strings;
  std::set<std::string, std::less<>> seen;
  for (size_t i = 0; i < value->array().size(); ++i) {
    const Json& element = value->array()[i];
    const std::string path = absl::StrCat(fields.Path(key), "[", i, "]");
    if (!element.is_string()) return fields.Error(path, "must be a string");
    if (!seen.insert(element.string_value()).second) {
      return fields.Error(path, absl::StrCat(Quoted(element.string_value()), " is listed twice"));
    }
    strings.push_back(element.string_value());
  }
  if (!allow_empty && strings.empty()) return fields.Error(fields.Path(key), "must not be empty");
  return strings;
}

absl::StatusOr<std::map<std::string, std::string>> Hashes(Fields& fields, bool required) {
  const Json* value = fields.Optional("hashes");
  std::map<std::string, std::string> hashes;
  if (value == nullptr) {
    if (required) return fields.Error(fields.Path("hashes"), "missing");
    return hashes;
  }
  if (!value->is_object()) return fields.Error(fields.Path("hashes"), "must be an object");
  if (value->object().empty()) return fields.Error(fields.Path("hashes"), "must not be empty");
  for (const auto& [algorithm, digest] : value->object()) {
    const std::string path = absl::StrCat(fields.Path("hashes"), ".", algorithm);
    if (!digest.is_string() || !IsLowercaseHex(digest.string_value()) ||
        digest.string_value().size() % 2 != 0) {
      return fields.Error(path, "must be a lowercase hex digest");
    }
    hashes.emplace(algorithm, digest.string_value());
  }
  return hashes;
}

Json HashesToJson(const std::map<std::string, std::string>& hashes) {
  Json out = Json::MakeObject();
  for (const auto& [algorithm, digest] : hashes) out.Set(algorithm, Json::String(digest));
  return out;
}

absl::StatusOr<Key> ParseKey(const Json& value, absl::string_view keyid, absl::string_view label,
                             const std::string& path) {
  Fields fields(value, label, path);
  RETURN_IF_ERROR(fields.CheckObject(value));
  Key key;
  key.keyid = std::string(keyid);
  key.json = value;
  ASSIGN_OR_RETURN(key.keytype, fields.String("keytype"));
  ASSIGN_OR_RETURN(key.scheme, fields.String("scheme"));
  ASSIGN_OR_RETURN(const Json* keyval, fields.Required("keyval", Json::Type::kObject));
  Fields keyval_fields(*keyval, label, fields.Path("keyval"));
  ASSIGN_OR_RETURN(key.public_value, keyval_fields.String("public"));
  // The key id is the hash of the key, so the same key cannot hide behind
  // two ids and one id cannot name two keys (TUF 1.0, "KEYID").
  const std::string computed = ComputeKeyId(value);
  if (computed != keyid) {
    return fields.Error(path, absl::StrCat("key id ", ShortKeyId(keyid),
                                           " is not the SHA-256 of the key (", ShortKeyId(computed),
                                           ")"));
  }
  if (key.keytype == "ed25519" && key.scheme == "ed25519") {
    absl::StatusOr<std::string> raw = HexDecode(key.public_value);
    if (!raw.ok() || raw->size() != 32) {
      return fields.Error(fields.Path("keyval.public"),
                          "an ed25519 public key is 64 hex digits");
    }
    absl::StatusOr<Ed25519PublicKey> parsed = Ed25519PublicKey::FromRaw(*raw);
    if (!parsed.ok()) return fields.Error(fields.Path("keyval.public"), parsed.status().message());
    key.ed25519 = *std::move(parsed);
  }
  return key;
}

absl::StatusOr<std::map<std::string, Key>> ParseKeys(Fields& fields, absl::string_view key_name) {
  ASSIGN_OR_RETURN(const Json* value, fields.Required(key_name, Json::Type::kObject));
  std::map<std::string, Key> keys;
  for (const auto& [keyid, key_json] : value->object()) {
    ASSIGN_OR_RETURN(Key key, ParseKey(key_json, keyid, fields.label(),
                                       absl::StrCat(fields.Path(key_name), "[", Quoted(keyid), "]")));
    keys.emplace(keyid, std::move(key));
  }
  return keys;
}

Json KeysToJson(const std::map<std::string, Key>& keys) {
  Json out = Json::MakeObject();
  for (const auto& [keyid, key] : keys) out.Set(keyid, key.json);
  return out;
}

absl::StatusOr<MetaFile> ParseMetaFile(const Json& value, absl::string_view label,
                                       const std::string& path) {
  Fields fields(value, label, path);
  RETURN_IF_ERROR(fields.CheckObject(value));
  MetaFile meta;
  ASSIGN_OR_RETURN(meta.version, fields.Integer("version", 1));
  if (fields.Optional("length") != nullptr) {
    ASSIGN_OR_RETURN(meta.length, fields.Integer("length", 0));
  }
  ASSIGN_OR_RETURN(meta.hashes, Hashes(fields, false));
  meta.unrecognized = fields.Unrecognized();
  return meta;
}

Json MetaFileToJson(const MetaFile& meta) {
  Json out = Json::MakeObject();
  out.Set("version", Json::Int(meta.version));
  if (meta.length) out.Set("length", Json::Int(*meta.length));
  if (!meta.hashes.empty()) out.Set("hashes", HashesToJson(meta.hashes));
  MergeUnrecognized(meta.unrecognized, out);
  return out;
}

absl::StatusOr<Signature> ParseSignature(const Json& value, absl::string_view label,
                                         const std::string& path) {
  Fields fields(value, label, path);
  RETURN_IF_ERROR(fields.CheckObject(value));
  Signature signature;
  ASSIGN_OR_RETURN(signature.keyid, fields.String("keyid"));
  ASSIGN_OR_RETURN(signature.sig, fields.String("sig"));
  signature.unrecognized = fields.Unrecognized();
  return signature;
}

// The envelope every role shares: {"signed": {...}, "signatures": [...]}.
struct Envelope {
  Json document;
  const Json* signed_json = nullptr;
  std::vector<Signature> signatures;
  Json::Object unrecognized;
};

absl::StatusOr<Envelope> ParseEnvelope(absl::string_view bytes, absl::string_view label) {
  Envelope envelope;
  ASSIGN_OR_RETURN(envelope.document, ParseJson(bytes, label));
  Fields fields(envelope.document, label, "");
  if (!envelope.document.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": must be a JSON object"));
  }
  ASSIGN_OR_RETURN(envelope.signed_json, fields.Required("signed", Json::Type::kObject));
  ASSIGN_OR_RETURN(const Json* signatures, fields.Required("signatures", Json::Type::kArray));
  std::set<std::string, std::less<>> keyids;
  for (size_t i = 0; i < signatures->array().size(); ++i) {
    const std::string path = absl::StrCat("signatures[", i, "]");
    ASSIGN_OR_RETURN(Signature signature, ParseSignature(signatures->array()[i], label, path));
    // Two signatures under one key id are ambiguous (which one counts?);
    // python-tuf refuses them too.
    if (!keyids.insert(signature.keyid).second) {
      return fields.Error(path, absl::StrCat("a second signature for key id ",
                                             ShortKeyId(signature.keyid)));
    }
    envelope.signatures.push_back(std::move(signature));
  }
  envelope.unrecognized = fields.Unrecognized();
  return envelope;
}

template <typename T>
Metadata<T> FromEnvelope(Envelope& envelope, T signed_part) {
  Metadata<T> metadata;
  metadata.signed_part = std::move(signed_part);
  metadata.signatures = std::move(envelope.signatures);
  metadata.canonical_signed = CanonicalJson(*envelope.signed_json);
  metadata.unrecognized = std::move(envelope.unrecognized);
  return metadata;
}

absl::StatusOr<RoleKeys> ParseRoleKeys(const Json& value, absl::string_view label,
                                       const std::string& path) {
  Fields fields(value, label, path);
  RETURN_IF_ERROR(fields.CheckObject(value));
  RoleKeys role;
  ASSIGN_OR_RETURN(role.keyids, StringList(fields, "keyids", true));
  ASSIGN_OR_RETURN(role.threshold, fields.Integer("threshold", 1));
  role.unrecognized = fields.Unrecognized();
  return role;
}

Json RoleKeysToJson(const RoleKeys& role) {
  Json out = Json::MakeObject();
  Json keyids = Json::MakeArray();
  for (const std::string& keyid : role.keyids) keyids.array().push_back(Json::String(keyid));
  out.Set("keyids", std::move(keyids));
  out.Set("threshold", Json::Int(role.threshold));
  MergeUnrecognized(role.unrecognized, out);
  return out;
}

Json StringArray(const std::vector<std::string>& strings) {
  Json out = Json::MakeArray();
  for (const std::string& text : strings) out.array().push_back(Json::String(text));
  return out;
}

absl::StatusOr<DelegatedRole> ParseDelegatedRole(const Json& value, absl::string_view label,
                                                 const std::string& path) {
  Fields fields(value, label, path);
  RETURN_IF_ERROR(fields.CheckObject(value));
  DelegatedRole role;
  ASSIGN_OR_RETURN(role.name, fields.String("name"));
  if (role.name.empty()) return fields.Error(fields.Path("name"), "must not be empty");
  if (IsTopLevelRoleName(role.name)) {
    return fields.Error(fields.Path("name"),
                        absl::StrCat(Quoted(role.name), " is a top-level role name"));
  }
  ASSIGN_OR_RETURN(role.keyids, StringList(fields, "keyids", true));
  ASSIGN_OR_RETURN(role.threshold, fields.Integer("threshold", 1));
  ASSIGN_OR_RETURN(role.terminating, fields.Boolean("terminating"));
  const bool has_paths = fields.Optional("paths") != nullptr;
  const bool has_prefixes = fields.Optional("path_hash_prefixes") != nullptr;
  if (has_paths == has_prefixes) {
    return fields.Error(path, "needs exactly one of paths and path_hash_prefixes");
  }
  if (has_paths) {
    ASSIGN_OR_RETURN(role.paths, StringList(fields, "paths", true));
  } else {
    ASSIGN_OR_RETURN(role.path_hash_prefixes, StringList(fields, "path_hash_prefixes", true));
  }
  role.unrecognized = fields.Unrecognized();
  return role;
}

absl::StatusOr<Delegations> ParseDelegations(const Json& value, absl::string_view label) {
  Fields fields(value, label, "signed.delegations");
  RETURN_IF_ERROR(fields.CheckObject(value));
  if (fields.Optional("succinct_roles") != nullptr) {
    return fields.Error("signed.delegations.succinct_roles",
                        "succinct hash delegations are not supported by this client");
  }
  Delegations delegations;
  ASSIGN_OR_RETURN(delegations.keys, ParseKeys(fields, "keys"));
  ASSIGN_OR_RETURN(const Json* roles, fields.Required("roles", Json::Type::kArray));
  std::set<std::string, std::less<>> names;
  for (size_t i = 0; i < roles->array().size(); ++i) {
    const std::string path = absl::StrCat("signed.delegations.roles[", i, "]");
    ASSIGN_OR_RETURN(DelegatedRole role, ParseDelegatedRole(roles->array()[i], label, path));
    if (!names.insert(role.name).second) {
      return fields.Error(path, absl::StrCat("role ", Quoted(role.name), " is delegated twice"));
    }
    delegations.roles.push_back(std::move(role));
  }
  delegations.unrecognized = fields.Unrecognized();
  return delegations;
}

Json DelegationsToJson(const Delegations& delegations) {
  Json out = Json::MakeObject();
  out.Set("keys", KeysToJson(delegations.keys));
  Json roles = Json::MakeArray();
  for (const DelegatedRole& role : delegations.roles) {
    Json entry = Json::MakeObject();
    entry.Set("name", Json::String(role.name));
    entry.Set("keyids", StringArray(role.keyids));
    entry.Set("threshold", Json::Int(role.threshold));
    entry.Set("terminating", Json::Bool(role.terminating));
    if (role.paths) entry.Set("paths", StringArray(*role.paths));
    if (role.path_hash_prefixes) entry.Set("path_hash_prefixes", StringArray(*role.path_hash_prefixes));
    MergeUnrecognized(role.unrecognized, entry);
    roles.array().push_back(std::move(entry));
  }
  out.Set("roles", std::move(roles));
  MergeUnrecognized(delegations.unrecognized, out);
  return out;
}

// fnmatch(3) without flags on one path component: '*' any run, '?' one
// byte, "[...]" a set with ranges and '!' negation. Path separators never
// reach here (the caller splits on '/'), so '*' cannot cross a directory.
bool MatchComponent(absl::string_view text, absl::string_view pattern) {
  size_t t = 0;
  size_t p = 0;
  size_t star_p = absl::string_view::npos;
  size_t star_t = 0;
  const auto match_set = [&](size_t& at, char c, bool& matched) -> bool {
    // `at` points just past '['. Returns false when the set is unterminated
    // (then '[' is an ordinary character, as in Python's fnmatch).
    size_t i = at;
    bool negate = false;
    if (i < pattern.size() && (pattern[i] == '!')) {
      negate = true;
      ++i;
    }
    bool found = false;
    bool first = true;
    while (i < pattern.size() && (first || pattern[i] != ']')) {
      first = false;
      char low = pattern[i];
      char high = low;
      if (i + 2 < pattern.size() && pattern[i + 1] == '-' && pattern[i + 2] != ']') {
        high = pattern[i + 2];
        i += 3;
      } else {
        ++i;
      }
      if (low <= c && c <= high) found = true;
    }
    if (i >= pattern.size()) return false;
    at = i + 1;
    matched = found != negate;
    return true;
  };
  while (t < text.size()) {
    if (p < pattern.size()) {
      const char pc = pattern[p];
      if (pc == '*') {
        star_p = p++;
        star_t = t;
        continue;
      }
      if (pc == '?') {
        ++p;
        ++t;
        continue;
      }
      if (pc == '[') {
        size_t next = p + 1;
        bool matched = false;
        if (match_set(next, text[t], matched)) {
          if (matched) {
            p = next;
            ++t;
            continue;
          }
        } else if (text[t] == '[') {
          ++p;
          ++t;
          continue;
        }
      } else if (pc == text[t]) {
        ++p;
        ++t;
        continue;
      }
    }
    if (star_p == absl::string_view::npos) return false;
    p = star_p + 1;
    t = ++star_t;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool MatchPathPattern(absl::string_view target_path, absl::string_view pattern) {
  std::vector<absl::string_view> target_parts = absl::StrSplit(target_path, '/');
  std::vector<absl::string_view> pattern_parts = absl::StrSplit(pattern, '/');
  if (target_parts.size() != pattern_parts.size()) return false;
  for (size_t i = 0; i < target_parts.size(); ++i) {
    if (!MatchComponent(target_parts[i], pattern_parts[i])) return false;
  }
  return true;
}

}  // namespace

absl::string_view RoleTypeName(RoleType type) {
  switch (type) {
    case RoleType::kRoot:
      return "root";
    case RoleType::kTimestamp:
      return "timestamp";
    case RoleType::kSnapshot:
      return "snapshot";
    case RoleType::kTargets:
      return "targets";
  }
  return "unknown";
}

bool IsTopLevelRoleName(absl::string_view name) {
  return name == "root" || name == "timestamp" || name == "snapshot" || name == "targets";
}

std::string ComputeKeyId(const Json& key_json) { return Sha256Hex(CanonicalJson(key_json)); }

Key MakeEd25519Key(const Ed25519PublicKey& public_key) {
  Key key;
  key.keytype = "ed25519";
  key.scheme = "ed25519";
  key.public_value = HexEncode(public_key.raw());
  Json keyval = Json::MakeObject();
  keyval.Set("public", Json::String(key.public_value));
  key.json = Json::MakeObject();
  key.json.Set("keytype", Json::String(key.keytype));
  key.json.Set("scheme", Json::String(key.scheme));
  key.json.Set("keyval", std::move(keyval));
  key.keyid = ComputeKeyId(key.json);
  key.ed25519 = public_key;
  return key;
}

std::string ShortKeyId(absl::string_view keyid) { return std::string(keyid.substr(0, 8)); }

bool DelegatedRole::IsDelegatedPath(absl::string_view target_path) const {
  if (paths) {
    for (const std::string& pattern : *paths) {
      if (MatchPathPattern(target_path, pattern)) return true;
    }
    return false;
  }
  if (path_hash_prefixes) {
    const std::string digest = Sha256Hex(target_path);
    for (const std::string& prefix : *path_hash_prefixes) {
      if (absl::StartsWith(digest, prefix)) return true;
    }
  }
  return false;
}

absl::StatusOr<absl::Time> ParseExpires(absl::string_view text) {
  // YYYY-MM-DDTHH:MM:SSZ, exactly 20 bytes.
  const auto digits = [&](size_t at, size_t count, int& out) {
    out = 0;
    for (size_t i = at; i < at + count; ++i) {
      if (text[i] < '0' || text[i] > '9') return false;
      out = out * 10 + (text[i] - '0');
    }
    return true;
  };
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  const bool shaped = text.size() == 20 && text[4] == '-' && text[7] == '-' && text[10] == 'T' &&
                      text[13] == ':' && text[16] == ':' && text[19] == 'Z' &&
                      digits(0, 4, year) && digits(5, 2, month) && digits(8, 2, day) &&
                      digits(11, 2, hour) && digits(14, 2, minute) && digits(17, 2, second);
  if (!shaped) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quoted(text), " is not of the form YYYY-MM-DDTHH:MM:SSZ"));
  }
  const absl::CivilSecond civil(year, month, day, hour, minute, second);
  // CivilSecond normalises out-of-range fields (Feb 30 -> Mar 2); a field
  // that moved means the text named a date that does not exist.
  if (civil.year() != year || civil.month() != month || civil.day() != day ||
      civil.hour() != hour || civil.minute() != minute || civil.second() != second) {
    return absl::InvalidArgumentError(absl::StrCat(Quoted(text), " is not a valid date and time"));
  }
  return absl::FromCivil(civil, absl::UTCTimeZone());
}

std::string FormatExpires(absl::Time time) {
  // %E4Y: the four digits ParseExpires reads, so a year before 1000 (0326)
  // round-trips instead of printing as "326".
  return absl::FormatTime("%E4Y-%m-%dT%H:%M:%SZ", time, absl::UTCTimeZone());
}

absl::StatusOr<Metadata<Root>> ParseRoot(absl::string_view bytes, absl::string_view label) {
  ASSIGN_OR_RETURN(Envelope envelope, ParseEnvelope(bytes, label));
  Fields fields(*envelope.signed_json, label, "signed");
  Root root;
  RETURN_IF_ERROR(ParseCommon(fields, RoleType::kRoot, root));
  ASSIGN_OR_RETURN(root.consistent_snapshot, fields.Boolean("consistent_snapshot"));
  ASSIGN_OR_RETURN(root.keys, ParseKeys(fields, "keys"));
  ASSIGN_OR_RETURN(const Json* roles, fields.Required("roles", Json::Type::kObject));
  for (const auto& [name, role_json] : roles->object()) {
    const std::string path = absl::StrCat("signed.roles.", name);
    if (!IsTopLevelRoleName(name)) {
      return fields.Error(path, "root lists only root, timestamp, snapshot and targets");
    }
    ASSIGN_OR_RETURN(RoleKeys role, ParseRoleKeys(role_json, label, path));
    root.roles.emplace(name, std::move(role));
  }
  for (RoleType type : {RoleType::kRoot, RoleType::kTimestamp, RoleType::kSnapshot,
                        RoleType::kTargets}) {
    if (root.roles.count(std::string(RoleTypeName(type))) == 0) {
      return fields.Error(absl::StrCat("signed.roles.", RoleTypeName(type)), "missing");
    }
  }
  root.unrecognized = fields.Unrecognized();
  return FromEnvelope(envelope, std::move(root));
}

absl::StatusOr<Metadata<Timestamp>> ParseTimestamp(absl::string_view bytes,
                                                   absl::string_view label) {
  ASSIGN_OR_RETURN(Envelope envelope, ParseEnvelope(bytes, label));
  Fields fields(*envelope.signed_json, label, "signed");
  Timestamp timestamp;
  RETURN_IF_ERROR(ParseCommon(fields, RoleType::kTimestamp, timestamp));
  ASSIGN_OR_RETURN(const Json* meta, fields.Required("meta", Json::Type::kObject));
  const Json* snapshot = meta->Find("snapshot.json");
  if (snapshot == nullptr || meta->object().size() != 1) {
    return fields.Error("signed.meta", "must describe snapshot.json and nothing else");
  }
  ASSIGN_OR_RETURN(timestamp.snapshot_meta,
                   ParseMetaFile(*snapshot, label, "signed.meta[\"snapshot.json\"]"));
  timestamp.unrecognized = fields.Unrecognized();
  return FromEnvelope(envelope, std::move(timestamp));
}

absl::StatusOr<Metadata<Snapshot>> ParseSnapshot(absl::string_view bytes, absl::string_view label) {
  ASSIGN_OR_RETURN(Envelope envelope, ParseEnvelope(bytes, label));
  Fields fields(*envelope.signed_json, label, "signed");
  Snapshot snapshot;
  RETURN_IF_ERROR(ParseCommon(fields, RoleType::kSnapshot, snapshot));
  ASSIGN_OR_RETURN(const Json* meta, fields.Required("meta", Json::Type::kObject));
  for (const auto& [name, entry] : meta->object()) {
    ASSIGN_OR_RETURN(MetaFile file,
                     ParseMetaFile(entry, label, absl::StrCat("signed.meta[", Quoted(name), "]")));
    snapshot.meta.emplace(name, std::move(file));
  }
  if (snapshot.meta.count("targets.json") == 0) {
    return fields.Error("signed.meta", "does not describe targets.json");
  }
  snapshot.unrecognized = fields.Unrecognized();
  return FromEnvelope(envelope, std::move(snapshot));
}

absl::StatusOr<Metadata<Targets>> ParseTargets(absl::string_view bytes, absl::string_view label) {
  ASSIGN_OR_RETURN(Envelope envelope, ParseEnvelope(bytes, label));
  Fields fields(*envelope.signed_json, label, "signed");
  Targets targets;
  RETURN_IF_ERROR(ParseCommon(fields, RoleType::kTargets, targets));
  ASSIGN_OR_RETURN(const Json* files, fields.Required("targets", Json::Type::kObject));
  for (const auto& [path, entry] : files->object()) {
    Fields target_fields(entry, label, absl::StrCat("signed.targets[", Quoted(path), "]"));
    RETURN_IF_ERROR(target_fields.CheckObject(entry));
    TargetFile target;
    ASSIGN_OR_RETURN(target.length, target_fields.Integer("length", 0));
    ASSIGN_OR_RETURN(target.hashes, Hashes(target_fields, true));
    if (const Json* custom = target_fields.Optional("custom")) target.custom = *custom;
    target.unrecognized = target_fields.Unrecognized();
    targets.targets.emplace(path, std::move(target));
  }
  if (const Json* delegations = fields.Optional("delegations")) {
    ASSIGN_OR_RETURN(targets.delegations, ParseDelegations(*delegations, label));
  }
  targets.unrecognized = fields.Unrecognized();
  return FromEnvelope(envelope, std::move(targets));
}

Json SignedToJson(const Root& root) {
  Json out = Json::MakeObject();
  CommonToJson(root, RoleType::kRoot, out);
  out.Set("consistent_snapshot", Json::Bool(root.consistent_snapshot));
  out.Set("keys", KeysToJson(root.keys));
  Json roles = Json::MakeObject();
  for (const auto& [name, role] : root.roles) roles.Set(name, RoleKeysToJson(role));
  out.Set("roles", std::move(roles));
  MergeUnrecognized(root.unrecognized, out);
  return out;
}

Json SignedToJson(const Timestamp& timestamp) {
  Json out = Json::MakeObject();
  CommonToJson(timestamp, RoleType::kTimestamp, out);
  Json meta = Json::MakeObject();
  meta.Set("snapshot.json", MetaFileToJson(timestamp.snapshot_meta));
  out.Set("meta", std::move(meta));
  MergeUnrecognized(timestamp.unrecognized, out);
  return out;
}

Json SignedToJson(const Snapshot& snapshot) {
  Json out = Json::MakeObject();
  CommonToJson(snapshot, RoleType::kSnapshot, out);
  Json meta = Json::MakeObject();
  for (const auto& [name, file] : snapshot.meta) meta.Set(name, MetaFileToJson(file));
  out.Set("meta", std::move(meta));
  MergeUnrecognized(snapshot.unrecognized, out);
  return out;
}

Json TargetFileToJson(const TargetFile& target) {
  Json out = Json::MakeObject();
  out.Set("length", Json::Int(target.length));
  out.Set("hashes", HashesToJson(target.hashes));
  if (!target.custom.is_null()) out.Set("custom", target.custom);
  MergeUnrecognized(target.unrecognized, out);
  return out;
}

Json SignedToJson(const Targets& targets) {
  Json out = Json::MakeObject();
  CommonToJson(targets, RoleType::kTargets, out);
  Json files = Json::MakeObject();
  for (const auto& [path, target] : targets.targets) files.Set(path, TargetFileToJson(target));
  out.Set("targets", std::move(files));
  if (targets.delegations) out.Set("delegations", DelegationsToJson(*targets.delegations));
  MergeUnrecognized(targets.unrecognized, out);
  return out;
}

std::string EncodeMetadataFile(const Json& signed_json, const std::vector<Signature>& signatures,
                               const Json::Object& unrecognized) {
  Json document = Json::MakeObject();
  Json list = Json::MakeArray();
  for (const Signature& signature : signatures) {
    Json entry = Json::MakeObject();
    entry.Set("keyid", Json::String(signature.keyid));
    entry.Set("sig", Json::String(signature.sig));
    MergeUnrecognized(signature.unrecognized, entry);
    list.array().push_back(std::move(entry));
  }
  document.Set("signatures", std::move(list));
  document.Set("signed", signed_json);
  MergeUnrecognized(unrecognized, document);
  return PrettyJson(document);
}

absl::Status AddSignature(const Ed25519PrivateKey& key, absl::string_view canonical_signed,
                          std::vector<Signature>& signatures) {
  ASSIGN_OR_RETURN(std::string raw, key.Sign(canonical_signed));
  const std::string keyid = MakeEd25519Key(key.public_key()).keyid;
  Signature signature{keyid, HexEncode(raw), {}};
  for (Signature& existing : signatures) {
    if (existing.keyid == keyid) {
      existing = std::move(signature);
      return absl::OkStatus();
    }
  }
  signatures.push_back(std::move(signature));
  return absl::OkStatus();
}

SignatureTally TallySignatures(absl::string_view canonical_signed,
                               const std::vector<Signature>& signatures,
                               const std::map<std::string, Key>& keys,
                               const std::vector<std::string>& role_keyids, int64_t threshold) {
  SignatureTally tally;
  tally.threshold = threshold;
  std::set<std::string> counted_public_keys;
  for (const std::string& keyid : role_keyids) {
    const Signature* signature = nullptr;
    for (const Signature& candidate : signatures) {
      if (candidate.keyid == keyid) signature = &candidate;
    }
    if (signature == nullptr) {
      tally.unsigned_keyids.push_back(keyid);
      continue;
    }
    auto key = keys.find(keyid);
    if (key == keys.end() || !key->second.ed25519) {
      tally.unsupported_keyids.push_back(keyid);
      continue;
    }
    absl::StatusOr<std::string> raw = HexDecode(signature->sig);
    if (!raw.ok() || !key->second.ed25519->Verify(canonical_signed, *raw)) {
      tally.invalid_keyids.push_back(keyid);
      continue;
    }
    if (counted_public_keys.insert(key->second.ed25519->raw()).second) {
      ++tally.valid;
      tally.valid_keyids.push_back(keyid);
    }
  }
  return tally;
}

absl::Status CheckThreshold(absl::string_view label, absl::string_view signer_description,
                            const SignatureTally& tally) {
  if (tally.valid >= tally.threshold) return absl::OkStatus();
  const auto ids = [](const std::vector<std::string>& keyids) {
    std::vector<std::string> short_ids;
    for (const std::string& keyid : keyids) short_ids.push_back(ShortKeyId(keyid));
    return short_ids.empty() ? std::string("none") : absl::StrJoin(short_ids, ", ");
  };
  std::string detail = absl::StrCat("valid: ", ids(tally.valid_keyids));
  if (!tally.invalid_keyids.empty()) {
    absl::StrAppend(&detail, "; bad signature: ", ids(tally.invalid_keyids));
  }
  if (!tally.unsupported_keyids.empty()) {
    absl::StrAppend(&detail, "; unsupported or unknown key: ", ids(tally.unsupported_keyids));
  }
  if (!tally.unsigned_keyids.empty()) {
    absl::StrAppend(&detail, "; not signed by: ", ids(tally.unsigned_keyids));
  }
  return absl::UnauthenticatedError(absl::StrCat(
      label, ": ", tally.valid, " of the ", tally.threshold, " signatures required from ",
      signer_description, " (below threshold); ", detail));
}

}  // namespace weightpath::trust
