// How long the store work of the calling thread may wait: for a pooled
// connection, and for a lock another connection holds (SQLite's write lock,
// a PostgreSQL row or table lock). A server sets it from its call's deadline
// around each unit of store work, so a call that cannot get the database in
// time is refused with UNAVAILABLE while its caller still listens, rather
// than after the caller gave up. Without one, each backend's own bound
// applies (SQLite: a 10 s busy timeout).
//
// A thread-local scope rather than a parameter: the deadline belongs to the
// call, and every FleetStore method a call may reach (reports, rollouts,
// operator queries) honours it without carrying it in its signature.
#pragma once

#include "absl/time/time.h"

namespace weightpath::store {

class ScopedCallDeadline {
 public:
  // Until destroyed, CallDeadline() on this thread is `deadline` (or the
  // enclosing scope's, when that is earlier).
  explicit ScopedCallDeadline(absl::Time deadline);
  ~ScopedCallDeadline();
  ScopedCallDeadline(const ScopedCallDeadline&) = delete;
  ScopedCallDeadline& operator=(const ScopedCallDeadline&) = delete;

 private:
  absl::Time previous_;
};

// absl::InfiniteFuture() outside any scope.
absl::Time CallDeadline();

}  // namespace weightpath::store
