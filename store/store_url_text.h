// A --store URL as logs and operators may read it: the password of a
// postgres:// URL, in its user information or as a `password=` parameter,
// written ***. The host, port, user and database stay: they are what an
// operator checks first when the store cannot be reached. Devices are told
// none of it (server/api/store_call.h).
#pragma once

#include <string>
#include <string_view>

namespace weightpath::store {

inline std::string RedactedStoreUrl(std::string_view url) {
  std::string text(url);
  const size_t scheme_end = text.find("://");
  if (scheme_end == std::string::npos) return text;  // sqlite:FILE, none
  const size_t authority = scheme_end + 3;
  const size_t path = text.find_first_of("/?#", authority);
  const size_t at = text.rfind('@', path == std::string::npos ? text.size() : path);
  if (at != std::string::npos && at >= authority) {
    const size_t colon = text.find(':', authority);
    if (colon != std::string::npos && colon < at) text.replace(colon + 1, at - colon - 1, "***");
  }
  // libpq takes any connection keyword as a query parameter.
  for (size_t key = text.find("password=", authority); key != std::string::npos;
       key = text.find("password=", key + 1)) {
    if (text[key - 1] != '?' && text[key - 1] != '&') continue;
    const size_t value = key + 9;
    const size_t end = text.find_first_of("&#", value);
    text.replace(value, (end == std::string::npos ? text.size() : end) - value, "***");
  }
  return text;
}

}  // namespace weightpath::store
