#include "agent/cli/cache_command.h"

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/cli/command_options.h"
#include "agent/config/agent_config.h"
#include "agent/decision/decision_record.h"
#include "agent/decision/last_good_store.h"
#include "agent/fetch/build_cache.h"
#include "agent/fetch/cache_directory.h"
#include "common/clock.h"
#include "trust/json.h"

namespace weightpath::agent {
namespace {

constexpr int kExitShown = 0;
constexpr int kExitUnusable = 1;

using trust::Json;

// A decision whose build the cache must keep, and what it is called.
struct Reference {
  std::string name;  // "decision_file" or "last_good"
  v1::Artifact artifact;
};

std::vector<Reference> ReadReferences(const AgentConfig& config, std::vector<std::string>* notes) {
  std::vector<Reference> references;
  absl::StatusOr<DecisionRecord> running = ReadDecisionFile(config.decision_file);
  if (running.ok()) {
    if (HasArtifact(running->response.artifact())) {
      references.push_back({"decision_file", running->response.artifact()});
    }
  } else if (!absl::IsNotFound(running.status())) {
    notes->push_back(absl::StrCat("decision_file: ", running.status().message()));
  }
  absl::StatusOr<DecisionRecord> last_good = LoadLastGood(config.state_dir);
  if (last_good.ok()) {
    if (HasArtifact(last_good->response.artifact())) {
      references.push_back({"last_good", last_good->response.artifact()});
    }
  } else if (!absl::IsNotFound(last_good.status())) {
    notes->push_back(absl::StrCat("last good decision: ", last_good.status().message()));
  }
  return references;
}

// Who of `references` holds blob (or, `build`, build directory) `sha256`.
Json ReferencedBy(const std::vector<Reference>& references, const std::string& sha256, bool build) {
  Json::Array names;
  for (const Reference& reference : references) {
    bool holds = false;
    if (build) {
      holds = !reference.artifact.files().empty() && reference.artifact.sha256() == sha256;
    } else if (reference.artifact.files().empty()) {
      holds = reference.artifact.sha256() == sha256;
    } else {
      for (const v1::BuildFile& file : reference.artifact.files()) holds |= file.sha256() == sha256;
    }
    if (holds) names.push_back(Json::String(reference.name));
  }
  return Json::MakeArray(std::move(names));
}

Json Time(absl::Time time) {
  return Json::String(absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", time, absl::UTCTimeZone()));
}

Json Strings(const std::vector<std::string>& values) {
  Json::Array array;
  for (const std::string& value : values) array.push_back(Json::String(value));
  return Json::MakeArray(std::move(array));
}

Json Listing(const AgentConfig& config, const CacheContents& contents,
             const std::vector<Reference>& references, const std::vector<std::string>& notes) {
  Json::Array blobs;
  for (const CacheBlob& blob : contents.blobs) {
    blobs.push_back(Json::MakeObject({
        {"sha256", Json::String(blob.sha256)},
        {"size_bytes", Json::Int(static_cast<int64_t>(blob.size_bytes))},
        {"last_used", Time(blob.last_used)},
        {"stamped", Json::Bool(blob.stamped)},
        {"builds", Strings(blob.builds)},
        {"referenced_by", ReferencedBy(references, blob.sha256, false)},
    }));
  }
  Json::Array builds;
  for (const CacheBuildDirectory& build : contents.builds) {
    builds.push_back(Json::MakeObject({
        {"sha256", Json::String(build.sha256)},
        {"path", Json::String(absl::StrCat(config.cache_dir, "/builds/", build.sha256))},
        {"files", Json::Int(build.files)},
        {"last_used", Time(build.last_used)},
        {"referenced_by", ReferencedBy(references, build.sha256, true)},
    }));
  }
  Json::Array partials;
  for (const CachePartial& partial : contents.partials) {
    partials.push_back(Json::MakeObject({
        {"sha256", Json::String(partial.sha256)},
        {"size_bytes", Json::Int(static_cast<int64_t>(partial.size_bytes))},
        {"modified", Time(partial.modified)},
        {"being_written", Json::Bool(partial.being_written)},
    }));
  }
  Json::Array referenced;
  for (const Reference& reference : references) {
    referenced.push_back(Json::MakeObject({
        {"name", Json::String(reference.name)},
        {"sha256", Json::String(reference.artifact.sha256())},
        {"directory", Json::Bool(!reference.artifact.files().empty())},
    }));
  }
  const int64_t free_bytes = FreeBytesOn(config.cache_dir);
  return Json::MakeObject({
      {"cache_dir", Json::String(config.cache_dir)},
      {"blobs", Json::MakeArray(std::move(blobs))},
      {"builds", Json::MakeArray(std::move(builds))},
      {"partials", Json::MakeArray(std::move(partials))},
      {"staging", Strings(contents.staging)},
      {"ignored", Strings(contents.ignored)},
      {"references", Json::MakeArray(std::move(referenced))},
      {"notes", Strings(notes)},
      {"totals",
       Json::MakeObject({
           {"blob_bytes", Json::Int(static_cast<int64_t>(contents.blob_bytes))},
           {"partial_bytes", Json::Int(static_cast<int64_t>(contents.partial_bytes))},
           {"used_bytes", Json::Int(static_cast<int64_t>(contents.blob_bytes + contents.partial_bytes))},
           {"free_bytes", free_bytes >= 0 ? Json::Int(free_bytes) : Json::Null()},
           {"cache_max_bytes", Json::Int(static_cast<int64_t>(config.cache_max_bytes))},
           {"cache_min_free_bytes", Json::Int(static_cast<int64_t>(config.cache_reserve_bytes))},
       })},
  });
}

std::string ListingText(const Json& listing) {
  std::string out;
  const Json& totals = *listing.Find("totals");
  const int64_t max_bytes = totals.Find("cache_max_bytes")->int_value();
  absl::StrAppend(&out, "cache_dir ", listing.Find("cache_dir")->string_value(), ": ",
                  totals.Find("used_bytes")->int_value(), " bytes used",
                  max_bytes > 0 ? absl::StrCat(" of cache_max_bytes ", max_bytes)
                                : std::string(" (no cache_max_bytes)"),
                  "; ",
                  totals.Find("free_bytes")->is_int()
                      ? absl::StrCat(totals.Find("free_bytes")->int_value())
                      : std::string("unknown"),
                  " bytes free (cache_min_free_bytes ",
                  totals.Find("cache_min_free_bytes")->int_value(), ")\n");
  auto joined = [](const Json& array) {
    std::string text;
    for (const Json& value : array.array()) {
      absl::StrAppend(&text, text.empty() ? "" : ",", value.string_value().substr(0, 12));
    }
    return text.empty() ? std::string("-") : text;
  };
  absl::StrAppend(&out, "builds (", listing.Find("builds")->array().size(), "):\n");
  for (const Json& build : listing.Find("builds")->array()) {
    absl::StrAppend(&out, "  ", build.Find("sha256")->string_value(), "  ",
                    build.Find("files")->int_value(), " files  used ",
                    build.Find("last_used")->string_value(), "  referenced by ",
                    joined(*build.Find("referenced_by")), "\n");
  }
  absl::StrAppend(&out, "blobs (", listing.Find("blobs")->array().size(), ", ",
                  totals.Find("blob_bytes")->int_value(), " bytes):\n");
  for (const Json& blob : listing.Find("blobs")->array()) {
    absl::StrAppend(&out, "  ", blob.Find("sha256")->string_value(), "  ",
                    blob.Find("size_bytes")->int_value(), " bytes  used ",
                    blob.Find("last_used")->string_value(), "  in builds ",
                    joined(*blob.Find("builds")), "  referenced by ",
                    joined(*blob.Find("referenced_by")), "\n");
  }
  absl::StrAppend(&out, "partial downloads (", listing.Find("partials")->array().size(), ", ",
                  totals.Find("partial_bytes")->int_value(), " bytes):\n");
  for (const Json& partial : listing.Find("partials")->array()) {
    absl::StrAppend(&out, "  ", partial.Find("sha256")->string_value(), "  ",
                    partial.Find("size_bytes")->int_value(), " bytes  modified ",
                    partial.Find("modified")->string_value(),
                    partial.Find("being_written")->bool_value() ? "  (being written)" : "", "\n");
  }
  for (const Json& name : listing.Find("staging")->array()) {
    absl::StrAppend(&out, "staging: builds/", name.string_value(), "\n");
  }
  for (const Json& name : listing.Find("ignored")->array()) {
    absl::StrAppend(&out, "ignored (not the agent's): ", name.string_value(), "\n");
  }
  for (const Json& note : listing.Find("notes")->array()) {
    absl::StrAppend(&out, "note: ", note.string_value(), "\n");
  }
  return out;
}

// What was in `before` and is not in `after`, by kind.
Json Removed(const CacheContents& before, const CacheContents& after) {
  auto gone = [](const auto& from, const auto& still, auto key) {
    std::set<std::string> left;
    for (const auto& entry : still) left.insert(key(entry));
    Json::Array names;
    for (const auto& entry : from) {
      if (left.count(key(entry)) == 0) names.push_back(Json::String(key(entry)));
    }
    return Json::MakeArray(std::move(names));
  };
  auto sha = [](const auto& entry) { return entry.sha256; };
  auto name = [](const std::string& entry) { return entry; };
  return Json::MakeObject({
      {"blobs", gone(before.blobs, after.blobs, sha)},
      {"builds", gone(before.builds, after.builds, sha)},
      {"partials", gone(before.partials, after.partials, sha)},
      {"staging", gone(before.staging, after.staging, name)},
  });
}

}  // namespace

std::string CacheUsage() {
  return R"(usage: weightpath-agent cache [list|gc] [--config FILE] [--root DIR] [-o text|json]

What the build cache in cache_dir holds (agent/README.md, "The build cache"):
  list  (default) every blob (sha256, size, last used, the build directories
        holding it, whether the decision in decision_file or the last good
        decision references it), the build directories, partial downloads,
        and the totals against cache_max_bytes and cache_min_free_bytes
  gc    evicts as after a hand-over, keeping the builds of decision_file and
        the last good decision: stale partial downloads and staging
        directories, build directories no kept decision names, then blobs no
        kept build holds (least recently used first) while over the limits;
        prints what went and the bytes freed
Uses no network.

  --config FILE  agent YAML config (default /etc/weightpath/agent.yaml)
  --root DIR     where /etc/machine-id is read when the config has no device_id
  -o FORMAT      text (default) or json

exit codes:
  0  listed / collected
  1  config unreadable, cache_dir unreadable, or gc failed
  2  bad command line
)";
}

int RunCacheCommand(int argc, char** argv) {
  std::string action = "list";
  int first_option = 1;
  if (argc >= 2 && argv[1][0] != '-') {
    action = argv[1];
    first_option = 2;
    if (action != "list" && action != "gc") {
      return UsageError("cache", absl::StrCat("unknown action '", action, "' (list or gc)"),
                        CacheUsage());
    }
  }
  const std::string command = absl::StrCat("cache ", action);
  const absl::StatusOr<CommandOptions> options = ParseCommandOptions(
      argc - first_option + 1, argv + first_option - 1, {"--config", "--root", "-o", "--output"});
  if (!options.ok()) return UsageError(command, options.status().message(), CacheUsage());
  if (options->help()) {
    std::fputs(CacheUsage().c_str(), stdout);
    return kExitShown;
  }
  const std::string format = options->Value("-o").value_or(options->ValueOr("--output", "text"));
  if (format != "text" && format != "json") {
    return UsageError(command, absl::StrCat("-o: '", format, "' (text or json)"), CacheUsage());
  }
  absl::StatusOr<AgentConfig> config =
      LoadAgentConfig(options->ValueOr("--config", "/etc/weightpath/agent.yaml"),
                      options->ValueOr("--root", "/"));
  if (!config.ok()) {
    std::fprintf(stderr, "weightpath-agent %s: config: %s\n", command.c_str(),
                 config.status().ToString().c_str());
    return kExitUnusable;
  }
  std::vector<std::string> notes;
  const std::vector<Reference> references = ReadReferences(*config, &notes);
  absl::StatusOr<CacheContents> before = ScanCache(config->cache_dir);
  if (!before.ok()) {
    std::fprintf(stderr, "weightpath-agent %s: %s\n", command.c_str(),
                 before.status().ToString().c_str());
    return kExitUnusable;
  }
  if (action == "list") {
    const Json listing = Listing(*config, *before, references, notes);
    std::fputs((format == "json" ? trust::PrettyJson(listing) : ListingText(listing)).c_str(),
               stdout);
    return kExitShown;
  }
  std::vector<const v1::Artifact*> keep;
  for (const Reference& reference : references) keep.push_back(&reference.artifact);
  const std::unique_ptr<BuildCache> cache =
      MakeBuildCache(BuildCacheOptionsFor(*config), SystemClockInstance());
  absl::StatusOr<uint64_t> freed = cache->Collect(keep);
  if (!freed.ok()) {
    std::fprintf(stderr, "weightpath-agent cache gc: %s\n", freed.status().ToString().c_str());
    return kExitUnusable;
  }
  absl::StatusOr<CacheContents> after = ScanCache(config->cache_dir);
  if (!after.ok()) {
    std::fprintf(stderr, "weightpath-agent cache gc: %s\n", after.status().ToString().c_str());
    return kExitUnusable;
  }
  Json::Array kept;
  for (const Reference& reference : references) {
    kept.push_back(Json::MakeObject({{"name", Json::String(reference.name)},
                                     {"sha256", Json::String(reference.artifact.sha256())}}));
  }
  const Json result = Json::MakeObject({
      {"freed_bytes", Json::Int(static_cast<int64_t>(*freed))},
      {"removed", Removed(*before, *after)},
      {"kept", Json::MakeArray(std::move(kept))},
      {"used_bytes", Json::Int(static_cast<int64_t>(after->blob_bytes + after->partial_bytes))},
      {"notes", Strings(notes)},
  });
  if (format == "json") {
    std::fputs(trust::PrettyJson(result).c_str(), stdout);
    return kExitShown;
  }
  std::string text;
  for (const char* kind : {"builds", "blobs", "partials", "staging"}) {
    for (const Json& name : result.Find("removed")->Find(kind)->array()) {
      absl::StrAppend(&text, "removed ", kind, " ", name.string_value(), "\n");
    }
  }
  for (const Json& reference : result.Find("kept")->array()) {
    absl::StrAppend(&text, "kept ", reference.Find("name")->string_value(), " ",
                    reference.Find("sha256")->string_value(), "\n");
  }
  absl::StrAppend(&text, "freed ", *freed, " bytes; ", result.Find("used_bytes")->int_value(),
                  " bytes used\n");
  for (const std::string& note : notes) absl::StrAppend(&text, "note: ", note, "\n");
  std::fputs(text.c_str(), stdout);
  return kExitShown;
}

}  // namespace weightpath::agent
