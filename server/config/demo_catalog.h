// The artifact catalog compiled into the server, so that it runs with no
// arguments. Its artifacts are the files scripts/make-demo-artifacts writes.
#pragma once

#include "absl/strings/string_view.h"
#include <string_view>

namespace weightpath::server {

inline constexpr absl::string_view kDemoCatalogSourceName = "<embedded demo catalog>";

absl::string_view DemoCatalogYaml();

}  // namespace weightpath::server
