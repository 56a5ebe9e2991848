#include "ctl/audit_command.h"

#include <cstdint>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/proto_time.h"
#include "ctl/admin_query.h"
#include "ctl/table_writer.h"

namespace weightpath::ctl {
namespace {

// The server's bounds on ListAuditEventsRequest.limit (store/store.h).
constexpr uint32_t kMaxLimit = 10000;
constexpr uint32_t kDefaultLimit = 1000;

const std::vector<FlagSpec>& AuditFlags() {
  static const std::vector<FlagSpec> flags = ViewFlags({
      {"since", '\0', true,
       "only events within this long (30m, 24h, 7d) or at or after this RFC 3339 time "
       "(2026-12-01T09:00:00Z); default: all"},
      {"limit", '\0', true,
       absl::StrCat("at most this many events, the newest (1 to ", kMaxLimit, "; default 1000)")},
  });
  return flags;
}

// A look-back (ParseSince's spelling) or an absolute RFC 3339 time.
absl::StatusOr<absl::Time> ParseSinceTime(const std::string& text) {
  absl::Time at;
  std::string ignored;
  if (absl::ParseTime(absl::RFC3339_full, text, &at, &ignored)) return at;
  absl::StatusOr<absl::Duration> window = ParseSince(text, "since");
  if (!window.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--since=\"", text,
                     "\" must be a duration such as 30m, 24h or 7d, or an RFC 3339 time such as "
                     "2026-12-01T09:00:00Z"));
  }
  return absl::Now() - *window;
}

absl::StatusOr<v1::ListAuditEventsRequest> BuildRequest(const ParsedArguments& arguments) {
  v1::ListAuditEventsRequest request;
  if (std::optional<std::string> since = arguments.Value("since")) {
    absl::StatusOr<absl::Time> at = ParseSinceTime(*since);
    if (!at.ok()) return at.status();
    *request.mutable_since() = ToProtoTime(*at);
  }
  if (std::optional<std::string> limit = arguments.Value("limit")) {
    uint32_t value = 0;
    if (!absl::SimpleAtoi(*limit, &value) || value == 0 || value > kMaxLimit) {
      return absl::InvalidArgumentError(absl::StrCat("--limit=\"", *limit,
                                                     "\" must be a whole number from 1 to ",
                                                     kMaxLimit));
    }
    request.set_limit(value);
  }
  return request;
}

// The server answers at most 3 MiB a page (10,000 events can come to ~26 MB,
// past gRPC's 4 MiB receive limit): pages are asked for, newest first, until
// the limit is reached or no older event matched, and joined oldest first.
absl::StatusOr<v1::ListAuditEventsResponse> ListAllPages(FleetAdminConnection& connection,
                                                         const v1::ListAuditEventsRequest& request) {
  const uint32_t wanted = request.limit() == 0 ? kDefaultLimit : request.limit();
  std::vector<v1::ListAuditEventsResponse> pages;
  v1::ListAuditEventsRequest page_request = request;
  uint32_t received = 0;
  while (true) {
    page_request.set_limit(wanted - received);
    absl::StatusOr<v1::ListAuditEventsResponse> page = CallFleetAdmin(
        connection, &v1::FleetAdmin::Stub::ListAuditEvents, page_request, "ListAuditEvents");
    if (!page.ok()) return page.status();
    received += static_cast<uint32_t>(page->events_size());
    pages.push_back(*std::move(page));
    const v1::ListAuditEventsResponse& last = pages.back();
    // An empty page cannot move the cursor: stop rather than ask again.
    if (!last.truncated() || last.next_page_token().empty() || last.events_size() == 0 ||
        received >= wanted) {
      break;
    }
    page_request.set_page_token(last.next_page_token());
  }
  v1::ListAuditEventsResponse joined;
  for (auto page = pages.rbegin(); page != pages.rend(); ++page) {
    for (v1::AuditEvent& event : *page->mutable_events()) *joined.add_events() = std::move(event);
  }
  joined.set_truncated(pages.back().truncated());
  return joined;
}

std::string OrDash(const std::string& text) { return text.empty() ? "-" : text; }

void WriteTable(const v1::ListAuditEventsResponse& response, std::ostream& out) {
  TableWriter table({"TIME", "IDENTITY", "ROLE", "RPC", "TARGET", "RESULT", "REPLICA", "MESSAGE"});
  for (const v1::AuditEvent& event : response.events()) {
    table.AddRow({FormatTimestamp(event.time()), OrDash(event.identity()), OrDash(event.role()),
                  event.rpc(), OrDash(event.target()), event.result(), OrDash(event.replica()),
                  OrDash(event.message())});
  }
  table.Write(out);
  if (response.truncated()) {
    out << "(older events left out: raise --limit or narrow --since; -o json shows each "
           "request)\n";
  }
}

}  // namespace

int RunAuditCommand(const std::vector<std::string>& args, CommandIo io) {
  const AdminQuery<v1::ListAuditEventsRequest, v1::ListAuditEventsResponse> query{
      "audit",
      "usage: weightpathctl audit [--since DURATION|RFC3339] [--limit N] [-o table|json|yaml] "
      "[--server ADDR]\n\n"
      "The FleetAdmin audit trail, oldest first: every call of a mutating RPC (rollout create,\n"
      "update, delete, pause, resume, advance, abort), refused ones included, with who made it,\n"
      "their role, what it was about and the server's answer. The servers' own actions are in\n"
      "it too, with role system: each policy a replica loads (PolicyLoaded: at start and on\n"
      "reload, the policy version as TARGET, the file's sha256 in MESSAGE) or refuses\n"
      "(ReloadRefused), by server:policy-file, and each step the rollout driver takes\n"
      "(RolloutAdvanced, RolloutPaused, RolloutRolledBack, RolloutCompleted), by\n"
      "server:rollout-driver, recorded once by the replica that took it. REPLICA names the\n"
      "server (--replica_name). -o json|yaml also carries each event's summary (for a policy\n"
      "load: version, sha256, source; for a step: stages and the gates that tripped). Needs\n"
      "the viewer role and a server with a fleet store.",
      AuditFlags(),
      BuildRequest,
      ListAllPages,
      WriteTable,
  };
  return RunAdminQuery(query, args, io);
}

}  // namespace weightpath::ctl
