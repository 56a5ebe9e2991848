#include "agent/signed/metadata_fetcher.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "agent/net/curl_library.h"
#include "common/control_characters.h"
#include "common/status_macros.h"

namespace weightpath::agent {
namespace {

// Where one response body goes, and the guard that stops it at the limit.
struct BodySink {
  std::string* body = nullptr;
  int64_t max_bytes = 0;
  bool oversized = false;
};

size_t AppendToBody(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<BodySink*>(user);
  const size_t bytes = size * count;
  if (static_cast<int64_t>(sink->body->size() + bytes) > sink->max_bytes) {
    sink->oversized = true;
    return 0;  // libcurl aborts the transfer with CURLE_WRITE_ERROR
  }
  sink->body->append(data, bytes);
  return bytes;
}

constexpr int kMaxRedirects = 5;

// The URL a Location header names, relative to the URL that answered:
// absolute (http:// or https://), absolute-path ("/x") or relative ("x").
absl::StatusOr<std::string> ResolveRedirect(const std::string& from, const std::string& location,
                                            const std::string& original) {
  if (location.empty() || HasControlCharacters(location) || location.size() > 8192) {
    return absl::UnavailableError(absl::StrCat(original, ": a redirect with a bad Location"));
  }
  if (absl::StartsWithIgnoreCase(location, "http://") ||
      absl::StartsWithIgnoreCase(location, "https://")) {
    return location;
  }
  if (absl::StrContains(location, "://") || absl::StartsWith(location, "//")) {
    return absl::UnavailableError(absl::StrCat(
        original, ": redirected to \"", ControlEscaped(location.substr(0, 128)),
        "\", which is not http:// or https://"));
  }
  // `from` is an http:// URL (ParsePlainHttpUrl accepted it).
  const size_t authority_end = from.find('/', std::string("http://").size());
  const std::string origin = from.substr(0, authority_end);
  if (absl::StartsWith(location, "/")) return absl::StrCat(origin, location);
  std::string directory =
      authority_end == std::string::npos ? "/" : from.substr(authority_end);
  directory = directory.substr(0, directory.find('?'));
  directory = directory.substr(0, directory.rfind('/') + 1);
  return absl::StrCat(origin, directory, location);
}

}  // namespace

struct HttpMetadataFetcher::Handle {
  const CurlApi* api = nullptr;
  CURL* curl = nullptr;
  ~Handle() {
    if (curl != nullptr) api->easy_cleanup(curl);
  }
};

HttpMetadataFetcher::HttpMetadataFetcher(std::string base_url, Clock* clock, MonotonicTime deadline,
                                         absl::Duration call_timeout)
    : base_url_(std::move(base_url)),
      clock_(clock),
      plain_(clock),
      deadline_(deadline),
      call_timeout_(call_timeout) {
  while (!base_url_.empty() && base_url_.back() == '/') base_url_.pop_back();
}

HttpMetadataFetcher::~HttpMetadataFetcher() = default;

std::string HttpMetadataFetcher::UrlFor(const std::string& file_name) const {
  return absl::StrCat(base_url_, "/", file_name);
}

absl::StatusOr<std::string> HttpMetadataFetcher::Fetch(const trust::MetadataRequest& request) {
  const std::string url = UrlFor(request.file_name);
  const absl::Duration left = deadline_ - clock_->MonotonicNow();
  if (left <= absl::ZeroDuration()) {
    return absl::DeadlineExceededError(absl::StrCat("no time left in the budget to fetch ", url));
  }
  const absl::Duration limit = std::min(call_timeout_, left);
  ++requests_;
  const MonotonicTime request_deadline = clock_->MonotonicNow() + limit;
  std::string current = url;
  for (int redirects = 0;; ++redirects) {
    absl::StatusOr<PlainHttpUrl> plain = ParsePlainHttpUrl(current);
    if (!plain.ok()) break;  // https:// (or user information): libcurl's
    absl::StatusOr<PlainHttpResponse> response =
        plain_.Get(*plain, request.max_bytes, request_deadline);
    if (!response.ok()) {
      if (absl::IsResourceExhausted(response.status())) {
        return absl::ResourceExhaustedError(
            absl::StrCat(url, ": more than the ", request.max_bytes,
                         " bytes allowed; stopped reading (endless data)"));
      }
      if (absl::IsDeadlineExceeded(response.status())) {
        return absl::DeadlineExceededError(
            absl::StrCat(url, ": no complete answer within ", absl::FormatDuration(limit), ": ",
                         response.status().message()));
      }
      return absl::UnavailableError(absl::StrCat(url, ": ", response.status().message()));
    }
    const int status = response->status;
    if (status >= 200 && status < 300) return std::move(response->body);
    const bool redirect = status == 301 || status == 302 || status == 303 || status == 307 ||
                          status == 308;
    if (redirect && response->location) {
      if (redirects >= kMaxRedirects) {
        return absl::UnavailableError(
            absl::StrCat(url, ": more than ", kMaxRedirects, " redirects"));
      }
      ASSIGN_OR_RETURN(current, ResolveRedirect(current, *response->location, url));
      continue;
    }
    if (status == 403 || status == 404 || status == 410) {
      return absl::NotFoundError(absl::StrCat(url, " answered HTTP ", status));
    }
    return absl::UnavailableError(absl::StrCat(url, " answered HTTP ", status));
  }
  const absl::Duration curl_limit = request_deadline - clock_->MonotonicNow();
  if (curl_limit <= absl::ZeroDuration()) {
    return absl::DeadlineExceededError(absl::StrCat(
        url, ": no complete answer within ", absl::FormatDuration(limit), " (redirected)"));
  }
  return FetchWithCurl(url, current, request, curl_limit);
}

absl::StatusOr<std::string> HttpMetadataFetcher::FetchWithCurl(
    const std::string& url, const std::string& location, const trust::MetadataRequest& request,
    absl::Duration limit) {
  if (handle_ == nullptr) {
    ASSIGN_OR_RETURN(const CurlApi* api, LoadCurl());
    auto handle = std::make_unique<Handle>();
    handle->api = api;
    handle->curl = api->easy_init();
    if (handle->curl == nullptr) return absl::InternalError("curl_easy_init failed");
    handle_ = std::move(handle);
  }
  const CurlApi& api = *handle_->api;
  CURL* curl = handle_->curl;

  std::string body;
  BodySink sink{&body, request.max_bytes, false};
  char error_buffer[CURL_ERROR_SIZE] = {0};
  const long limit_ms = static_cast<long>(std::max<int64_t>(1, absl::ToInt64Milliseconds(limit)));
  api.easy_setopt(curl, CURLOPT_URL, location.c_str());
  api.easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  api.easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  api.easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  api.easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
  api.easy_setopt(curl, CURLOPT_MAXREDIRS, static_cast<long>(kMaxRedirects));
  api.easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
  api.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  api.easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
  api.easy_setopt(curl, CURLOPT_WRITEFUNCTION, &AppendToBody);
  api.easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  // A Content-Length past the limit is refused before any of the body.
  api.easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(request.max_bytes));
  // The whole request (name lookup, connect, transfer) on libcurl's own
  // monotonic clock, so a mirror that accepts and then says nothing, or
  // trickles, cannot hold the boot past its budget.
  api.easy_setopt(curl, CURLOPT_TIMEOUT_MS, limit_ms);
  api.easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, limit_ms);
  const CURLcode code = api.easy_perform(curl);
  long http_status = 0;
  api.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http_status);
  // Nothing of ours may stay registered with the handle past this call.
  api.easy_setopt(curl, CURLOPT_ERRORBUFFER, static_cast<char*>(nullptr));
  api.easy_setopt(curl, CURLOPT_WRITEDATA, static_cast<void*>(nullptr));
  const std::string error_text = error_buffer[0] != '\0' ? error_buffer : api.easy_strerror(code);

  if (sink.oversized || code == CURLE_FILESIZE_EXCEEDED) {
    return absl::ResourceExhaustedError(
        absl::StrCat(url, ": more than the ", request.max_bytes,
                     " bytes allowed; stopped reading (endless data)"));
  }
  switch (code) {
    case CURLE_OK:
      return body;
    case CURLE_HTTP_RETURNED_ERROR:
      if (http_status == 403 || http_status == 404 || http_status == 410) {
        return absl::NotFoundError(absl::StrCat(url, " answered HTTP ", http_status));
      }
      return absl::UnavailableError(absl::StrCat(url, " answered HTTP ", http_status));
    case CURLE_OPERATION_TIMEDOUT:
      return absl::DeadlineExceededError(absl::StrCat(
          url, ": no complete answer within ", absl::FormatDuration(limit), ": ", error_text));
    default:
      return absl::UnavailableError(absl::StrCat(url, ": ", error_text));
  }
}

MetadataFetcherFactory HttpMetadataFetchers(std::string base_url, Clock* clock,
                                            absl::Duration call_timeout) {
  return [base_url = std::move(base_url), clock, call_timeout](MonotonicTime deadline) {
    auto fetcher = std::make_shared<HttpMetadataFetcher>(base_url, clock, deadline, call_timeout);
    return trust::MetadataFetcher(
        [fetcher](const trust::MetadataRequest& request) { return fetcher->Fetch(request); });
  };
}

}  // namespace weightpath::agent
