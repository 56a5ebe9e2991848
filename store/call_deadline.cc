#include "store/call_deadline.h"

#include <algorithm>

namespace weightpath::store {
namespace {

thread_local absl::Time current_deadline = absl::InfiniteFuture();

}  // namespace

ScopedCallDeadline::ScopedCallDeadline(absl::Time deadline) : previous_(current_deadline) {
  current_deadline = std::min(previous_, deadline);
}

ScopedCallDeadline::~ScopedCallDeadline() { current_deadline = previous_; }

absl::Time CallDeadline() { return current_deadline; }

}  // namespace weightpath::store
