#include "store/sql_database.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace weightpath::store {
namespace {
constexpr int kPostgresPoolSize = 8;
}

absl::StatusOr<std::unique_ptr<SqlDatabase>> OpenSqlDatabase(std::string_view url_view) {
  const std::string url(url_view);
  if (absl::StartsWith(url, "sqlite:")) {
    std::string file = url.substr(std::string_view("sqlite:").size());
    if (file.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("store URL \"", url, "\": sqlite: needs a file name, e.g. sqlite:fleet.db"));
    }
    return OpenSqliteDatabase(file);
  }
  if (absl::StartsWith(url, "postgres://") || absl::StartsWith(url, "postgresql://")) {
    return OpenPostgresDatabase(url, kPostgresPoolSize);
  }
  // Never echo a URL that might carry a password in an unknown scheme.
  const std::string scheme = url.substr(0, url.find(':'));
  return absl::InvalidArgumentError(
      absl::StrCat("store URL scheme \"", scheme,
                   "\" is not supported: use sqlite:FILE or postgres://USER@HOST:PORT/DB"));
}

absl::StatusOr<int64_t> CellInt(const SqlCell& cell, absl::string_view column) {
  int64_t value = 0;
  if (!cell.has_value() || !absl::SimpleAtoi(*cell, &value)) {
    return absl::DataLossError(absl::StrCat("store column ", column, " is not an integer"));
  }
  return value;
}

absl::StatusOr<double> CellDouble(const SqlCell& cell, absl::string_view column) {
  double value = 0;
  if (!cell.has_value() || !absl::SimpleAtod(*cell, &value)) {
    return absl::DataLossError(absl::StrCat("store column ", column, " is not a number"));
  }
  return value;
}

std::string CellText(const SqlCell& cell) { return cell.value_or(""); }

}  // namespace weightpath::store
