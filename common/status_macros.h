// Early-return helpers for absl::Status / absl::StatusOr; Debian's abseil
// (20220623) ships none.
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define WP_CONCAT_INNER(a, b) a##b
#define WP_CONCAT(a, b) WP_CONCAT_INNER(a, b)

// Returns the status from the enclosing function if `expr` is not OK.
#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    ::absl::Status wp_status_ = (expr);              \
    if (!wp_status_.ok()) return wp_status_;         \
  } while (false)

// `lhs` = value of the StatusOr `expr`, or return its status.
#define ASSIGN_OR_RETURN(lhs, expr) \
  WP_ASSIGN_OR_RETURN_IMPL(WP_CONCAT(wp_statusor_, __LINE__), lhs, expr)

#define WP_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
