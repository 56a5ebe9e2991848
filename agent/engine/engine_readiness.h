// Waiting for the inference engine to serve before its start is reported:
// systemd runs ExecStartPost right after a Type=simple engine process
// starts, long before vLLM has loaded its weights and answers /health, so
// reporting ENGINE_STARTED there would count a build as healthy that may
// never serve. `weightpath-agent outcome --outcome engine_started
// --wait-ready URL` polls the engine's readiness endpoint first and reports
// ENGINE_START_FAILED instead when it does not come up in time.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace weightpath::agent {

struct ReadinessWait {
  std::string url;  // http://host:port/path, e.g. vLLM's http://127.0.0.1:8000/health
  absl::Duration timeout = absl::Minutes(10);
  absl::Duration poll_interval = absl::Seconds(1);
};

// OK once a GET of `wait.url` answers 200. DEADLINE_EXCEEDED when `timeout`
// of monotonic time passes first, naming the URL, the time waited and the
// last answer or error ("HTTP 503", "connection refused"); INVALID_ARGUMENT
// for a URL that is not plain http:// (an engine's local endpoint).
absl::Status WaitForEngineReady(const ReadinessWait& wait, Clock* clock);

}  // namespace weightpath::agent
