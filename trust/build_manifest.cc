#include "trust/build_manifest.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/control_characters.h"
#include "common/status_macros.h"
#include "trust/crypto.h"
#include "trust/json.h"

namespace weightpath::trust {
namespace {

absl::Status Invalid(absl::string_view reason) {
  return absl::InvalidArgumentError(std::string(reason));
}

std::string Quoted(absl::string_view path) { return absl::StrCat("\"", ControlEscaped(path), "\""); }

bool IsSha256Hex(absl::string_view text) { return text.size() == 64 && IsLowercaseHex(text); }

bool ByPath(const BuildManifestFile& a, const BuildManifestFile& b) { return a.path < b.path; }

}  // namespace

absl::Status CheckBuildFilePath(absl::string_view path) {
  if (path.empty()) return Invalid("empty path");
  if (path.size() > kMaxBuildFilePathBytes) {
    return Invalid(absl::StrCat("longer than ", kMaxBuildFilePathBytes, " bytes"));
  }
  if (path.front() == '/') return Invalid("must be relative (no leading '/')");
  if (path.back() == '/') return Invalid("ends with '/' (a file's path, not a directory's)");
  for (size_t i = 0; i < path.size();) {
    const unsigned char byte = static_cast<unsigned char>(path[i]);
    if (byte < 0x20 || byte == 0x7f) {
      return Invalid(byte == 0 ? "holds a NUL byte" : "holds a control character");
    }
    if (byte == '\\') return Invalid("holds a backslash (the separator is '/')");
    if (byte < 0x80) {
      ++i;
      continue;
    }
    uint32_t code_point = 0;
    const size_t length = control_characters_internal::DecodeUtf8(path.substr(i), &code_point);
    if (length == 0) return Invalid("is not well-formed UTF-8");
    if (control_characters_internal::IsLayoutControl(code_point)) {
      return Invalid("holds a control or text-direction character");
    }
    i += length;
  }
  size_t depth = 0;
  for (absl::string_view component : absl::StrSplit(path, '/')) {
    if (component.empty()) return Invalid("has an empty component ('//')");
    if (component == "." || component == "..") {
      return Invalid("has a '.' or '..' component");
    }
    if (component.size() > kMaxBuildFilePathComponentBytes) {
      return Invalid(absl::StrCat("has a component longer than ", kMaxBuildFilePathComponentBytes,
                                  " bytes"));
    }
    if (++depth > kMaxBuildFilePathDepth) {
      return Invalid(absl::StrCat("is more than ", kMaxBuildFilePathDepth, " components deep"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateBuildFiles(const std::vector<BuildManifestFile>& files) {
  if (files.empty()) return Invalid("a directory build lists no file");
  if (files.size() > kMaxBuildFiles) {
    return Invalid(absl::StrCat("a directory build lists ", files.size(),
                                " files; at most ", kMaxBuildFiles, " are accepted"));
  }
  for (size_t i = 0; i < files.size(); ++i) {
    const BuildManifestFile& file = files[i];
    if (absl::Status path = CheckBuildFilePath(file.path); !path.ok()) {
      return Invalid(absl::StrCat("file ", i, " ", Quoted(file.path), ": path ", path.message()));
    }
    if (!IsSha256Hex(file.sha256)) {
      return Invalid(absl::StrCat("file ", Quoted(file.path),
                                  ": sha256 must be 64 lowercase hex digits"));
    }
  }
  // Sorted by folded path, a clash (same name but for case) is adjacent,
  // and so is a file and another file "under" it: "a" < "a/b" < "a0".
  std::vector<std::pair<std::string, const BuildManifestFile*>> folded;
  folded.reserve(files.size());
  for (const BuildManifestFile& file : files) {
    folded.emplace_back(absl::AsciiStrToLower(file.path), &file);
  }
  std::sort(folded.begin(), folded.end());
  for (size_t i = 1; i < folded.size(); ++i) {
    const auto& [previous_key, previous] = folded[i - 1];
    const auto& [key, file] = folded[i];
    if (key == previous_key) {
      return Invalid(absl::StrCat(
          "files ", Quoted(previous->path), " and ", Quoted(file->path),
          previous->path == file->path ? ": the same path twice"
                                       : ": differ only in case (one file on a case-insensitive "
                                         "filesystem)"));
    }
  }
  // A file whose path is a directory of another: "a" and "a/b", under any
  // case. Every directory prefix of every path must not be a file.
  std::set<std::string, std::less<>> file_keys;
  for (const auto& [key, file] : folded) file_keys.insert(key);
  for (const auto& [key, file] : folded) {
    for (size_t slash = key.find('/'); slash != std::string::npos; slash = key.find('/', slash + 1)) {
      auto clash = file_keys.find(absl::string_view(key).substr(0, slash));
      if (clash != file_keys.end()) {
        return Invalid(absl::StrCat("file ", Quoted(file->path), " lies under ",
                                    Quoted(absl::string_view(file->path).substr(0, slash)),
                                    ", which is a file of the build too"));
      }
    }
  }
  return absl::OkStatus();
}

Json BuildFilesToJson(std::vector<BuildManifestFile> files) {
  std::sort(files.begin(), files.end(), ByPath);
  Json list = Json::MakeArray();
  list.array().reserve(files.size());
  for (BuildManifestFile& file : files) {
    Json entry = Json::MakeObject();
    entry.Set("path", Json::String(std::move(file.path)));
    entry.Set("sha256", Json::String(std::move(file.sha256)));
    entry.Set("size_bytes", Json::Int(static_cast<int64_t>(file.size_bytes)));
    list.array().push_back(std::move(entry));
  }
  return list;
}

absl::StatusOr<std::vector<BuildManifestFile>> BuildFilesFromJson(const Json& list,
                                                                  absl::string_view label) {
  const auto fault = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": ", what));
  };
  if (!list.is_array()) return fault("files must be an array");
  if (list.array().size() > kMaxBuildFiles) {
    return fault(absl::StrCat("lists ", list.array().size(), " files; at most ", kMaxBuildFiles));
  }
  std::vector<BuildManifestFile> files;
  files.reserve(list.array().size());
  for (size_t i = 0; i < list.array().size(); ++i) {
    const Json& entry = list.array()[i];
    if (!entry.is_object() || entry.object().size() != 3) {
      return fault(absl::StrCat("files[", i, "]: must be an object of path, sha256 and size_bytes"));
    }
    const Json* path = entry.Find("path");
    const Json* sha256 = entry.Find("sha256");
    const Json* size = entry.Find("size_bytes");
    if (path == nullptr || !path->is_string() || sha256 == nullptr || !sha256->is_string() ||
        size == nullptr || !size->is_int() || size->int_value() < 0) {
      return fault(absl::StrCat("files[", i,
                                "]: path and sha256 must be strings, size_bytes a count"));
    }
    files.push_back({path->string_value(), sha256->string_value(),
                     static_cast<uint64_t>(size->int_value())});
  }
  if (absl::Status valid = ValidateBuildFiles(files); !valid.ok()) return fault(valid.message());
  return files;
}

std::string CanonicalBuildManifest(std::vector<BuildManifestFile> files) {
  Json manifest = Json::MakeObject();
  manifest.Set("files", BuildFilesToJson(std::move(files)));
  manifest.Set("format", Json::String(kBuildManifestFormat));
  return CanonicalJson(manifest);
}

BuildManifestDigest DigestBuildManifest(const std::vector<BuildManifestFile>& files) {
  const std::string bytes = CanonicalBuildManifest(files);
  return {Sha256Hex(bytes), bytes.size()};
}

absl::StatusOr<std::vector<BuildManifestFile>> ParseBuildManifest(absl::string_view bytes,
                                                                  absl::string_view label) {
  const auto fault = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": ", what));
  };
  if (bytes.size() > kMaxBuildManifestBytes) {
    return fault(absl::StrCat(bytes.size(), " bytes; a build manifest is at most ",
                              kMaxBuildManifestBytes));
  }
  absl::StatusOr<Json> document = ParseJson(bytes, label);
  if (!document.ok()) return document.status();
  if (!document->is_object()) return fault("not a JSON object");
  for (const auto& [key, value] : document->object()) {
    if (key != "files" && key != "format") {
      return fault(absl::StrCat("unknown member \"", ControlEscaped(key), "\""));
    }
  }
  const Json* format = document->Find("format");
  if (format == nullptr || !format->is_string() || format->string_value() != kBuildManifestFormat) {
    return fault(absl::StrCat("format must be \"", kBuildManifestFormat, "\""));
  }
  const Json* list = document->Find("files");
  if (list == nullptr) return fault("files must be an array");
  ASSIGN_OR_RETURN(std::vector<BuildManifestFile> files, BuildFilesFromJson(*list, label));
  if (CanonicalBuildManifest(files) != bytes) {
    return fault(absl::StrCat("not in canonical form (", kBuildManifestFormat,
                              ": canonical JSON, files sorted by path); it would have two digests"));
  }
  return files;
}

}  // namespace weightpath::trust
