// Lets ThreadSanitizer see absl::Mutex, absl::CondVar and absl::Notification
// from Debian's abseil, which is not built with TSan.
//
// absl::Mutex takes and hands over its lock with its own atomics and futex
// calls inside libabsl_synchronization.so. TSan only learns about
// synchronisation it can see (instrumented code, pthread calls it
// intercepts), so without this every access guarded by an absl::Mutex would
// be reported as a race, and the reports would bury any real one.
//
// This file, linked into a test executable of the TSan build only, defines
// the public lock and wait functions itself. The executable's definition
// comes first in symbol lookup, so every call (from our code, from gRPC, and
// from abseil's own PLT calls) lands here; each forwards to the real
// function, found with dlsym(RTLD_NEXT), and tells TSan what happened with
// its mutex annotations, the way abseil's own TSan build does:
//  - a lock is announced after the real lock returns (so a condition
//    evaluated meanwhile sees the mutex as not held);
//  - an unlock is announced before the real unlock (a thread that locks
//    next must find the release already recorded);
//  - a wait on a condition or a CondVar is an unlock followed by a lock;
//  - a Condition is evaluated (by the waiter or by the thread unlocking)
//    inside a pretend lock and unlock of its mutex, so the guarded state it
//    reads is ordered with the writes made under the lock.
// A wait on a mutex held in reader mode is announced as if it were held in
// writer mode: TSan then sees more ordering than there is, never less, so
// this can hide a race between two readers but cannot report a false one.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#if !defined(__SANITIZE_THREAD__) && defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define __SANITIZE_THREAD__ 1
#endif
#endif
#ifndef __SANITIZE_THREAD__
#error "tsan_absl_sync.cc belongs in the -fsanitize=thread build only"
#endif

extern "C" {
// From compiler-rt's sanitizer/tsan_interface.h, declared here because
// Debian's clang ships the runtime but not always that header.
void __tsan_mutex_pre_lock(void* addr, unsigned flags);
void __tsan_mutex_post_lock(void* addr, unsigned flags, int recursion);
int __tsan_mutex_pre_unlock(void* addr, unsigned flags);
void __tsan_mutex_post_unlock(void* addr, unsigned flags);
void __tsan_acquire(void* addr);
void __tsan_release(void* addr);
}

namespace {

constexpr unsigned kReadLock = 1 << 3;  // __tsan_mutex_read_lock
constexpr unsigned kTryLock = 1 << 4;   // __tsan_mutex_try_lock

#define WP_STRINGIFY_INNER(x) #x
#define WP_STRINGIFY(x) WP_STRINGIFY_INNER(x)

// The mangled name of a member of absl's inline namespace, e.g.
// ("N", "5Mutex4LockEv") -> "_ZN4absl7debian35Mutex4LockEv".
std::string Mangled(const char* qualifier, const char* tail) {
  const std::string inline_namespace = WP_STRINGIFY(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  return std::string("_Z") + qualifier + "4absl" + std::to_string(inline_namespace.size()) +
         inline_namespace + tail;
}

template <typename Function>
Function Real(const char* qualifier, const char* tail) {
  const std::string name = Mangled(qualifier, tail);
  void* symbol = dlsym(RTLD_NEXT, name.c_str());
  if (symbol == nullptr) {
    std::fprintf(stderr, "tsan_absl_sync: %s not found in abseil: %s\n", name.c_str(), dlerror());
    std::abort();
  }
  return reinterpret_cast<Function>(symbol);
}

// abseil calls its own public functions too (AwaitWithTimeout goes through
// AwaitWithDeadline, a CondVar wait relocks its mutex): only the outermost
// call on a thread is announced, the inner ones just forward.
thread_local int wrapper_depth = 0;

class Outermost {
 public:
  Outermost() : outermost_(wrapper_depth++ == 0) {}
  ~Outermost() { --wrapper_depth; }
  Outermost(const Outermost&) = delete;
  Outermost& operator=(const Outermost&) = delete;
  explicit operator bool() const { return outermost_; }

 private:
  const bool outermost_;
};

// Declares `real` (the abseil function) and `announce` (whether this call
// is the outermost one, the one that tells TSan).
#define WP_REAL(type, qualifier, tail)                    \
  static const auto real = Real<type>(qualifier, tail);   \
  const Outermost announce;

void AnnounceLock(absl::Mutex* mu, unsigned flags) {
  __tsan_mutex_pre_lock(mu, flags);
  __tsan_mutex_post_lock(mu, flags, 0);
}

void AnnounceUnlock(absl::Mutex* mu, unsigned flags) {
  __tsan_mutex_pre_unlock(mu, flags);
  __tsan_mutex_post_unlock(mu, flags);
}

// A Condition that evaluates `inner` inside a pretend lock of `mu`.
struct AnnotatedCondition {
  const absl::Condition* inner;
  absl::Mutex* mu;

  static bool Eval(AnnotatedCondition* self) {
    AnnounceLock(self->mu, 0);
    const bool result = self->inner->Eval();
    AnnounceUnlock(self->mu, 0);
    return result;
  }
};

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  WP_REAL(void (*)(Mutex*), "N", "5Mutex4LockEv");
  real(this);
  if (announce) AnnounceLock(this, 0);
}

void Mutex::Unlock() {
  WP_REAL(void (*)(Mutex*), "N", "5Mutex6UnlockEv");
  if (announce) AnnounceUnlock(this, 0);
  real(this);
}

void Mutex::ReaderLock() {
  WP_REAL(void (*)(Mutex*), "N", "5Mutex10ReaderLockEv");
  real(this);
  if (announce) AnnounceLock(this, kReadLock);
}

void Mutex::ReaderUnlock() {
  WP_REAL(void (*)(Mutex*), "N", "5Mutex12ReaderUnlockEv");
  if (announce) AnnounceUnlock(this, kReadLock);
  real(this);
}

bool Mutex::TryLock() {
  WP_REAL(bool (*)(Mutex*), "N", "5Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked && announce) AnnounceLock(this, kTryLock);
  return locked;
}

bool Mutex::ReaderTryLock() {
  WP_REAL(bool (*)(Mutex*), "N", "5Mutex13ReaderTryLockEv");
  const bool locked = real(this);
  if (locked && announce) AnnounceLock(this, kReadLock | kTryLock);
  return locked;
}

void Mutex::Await(const Condition& cond) {
  WP_REAL(void (*)(Mutex*, const Condition&), "N", "5Mutex5AwaitERKNS0_9ConditionE");
  AnnotatedCondition annotated{&cond, this};
  if (announce) AnnounceUnlock(this, 0);
  real(this, announce ? Condition(&AnnotatedCondition::Eval, &annotated) : cond);
  if (announce) AnnounceLock(this, 0);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  WP_REAL(bool (*)(Mutex*, const Condition&, Duration), "N",
          "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  AnnotatedCondition annotated{&cond, this};
  if (announce) AnnounceUnlock(this, 0);
  const bool result = real(this, announce ? Condition(&AnnotatedCondition::Eval, &annotated) : cond, timeout);
  if (announce) AnnounceLock(this, 0);
  return result;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  WP_REAL(bool (*)(Mutex*, const Condition&, Time), "N",
          "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  AnnotatedCondition annotated{&cond, this};
  if (announce) AnnounceUnlock(this, 0);
  const bool result = real(this, announce ? Condition(&AnnotatedCondition::Eval, &annotated) : cond, deadline);
  if (announce) AnnounceLock(this, 0);
  return result;
}

void Mutex::LockWhen(const Condition& cond) {
  WP_REAL(void (*)(Mutex*, const Condition&), "N", "5Mutex8LockWhenERKNS0_9ConditionE");
  AnnotatedCondition annotated{&cond, this};
  real(this, announce ? Condition(&AnnotatedCondition::Eval, &annotated) : cond);
  if (announce) AnnounceLock(this, 0);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  WP_REAL(bool (*)(Mutex*, const Condition&, Duration), "N",
          "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  AnnotatedCondition annotated{&cond, this};
  const bool result = real(this, announce ? Condition(&AnnotatedCondition::Eval, &annotated) : cond, timeout);
  if (announce) AnnounceLock(this, 0);  // held either way
  return result;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  WP_REAL(bool (*)(Mutex*, const Condition&, Time), "N",
          "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  AnnotatedCondition annotated{&cond, this};
  const bool result = real(this, announce ? Condition(&AnnotatedCondition::Eval, &annotated) : cond, deadline);
  if (announce) AnnounceLock(this, 0);
  return result;
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  WP_REAL(void (*)(Mutex*, const Condition&), "N", "5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  AnnotatedCondition annotated{&cond, this};
  real(this, announce ? Condition(&AnnotatedCondition::Eval, &annotated) : cond);
  if (announce) AnnounceLock(this, kReadLock);
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout) {
  WP_REAL(bool (*)(Mutex*, const Condition&, Duration), "N",
          "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  AnnotatedCondition annotated{&cond, this};
  const bool result = real(this, announce ? Condition(&AnnotatedCondition::Eval, &annotated) : cond, timeout);
  if (announce) AnnounceLock(this, kReadLock);
  return result;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  WP_REAL(bool (*)(Mutex*, const Condition&, Time), "N",
          "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  AnnotatedCondition annotated{&cond, this};
  const bool result = real(this, announce ? Condition(&AnnotatedCondition::Eval, &annotated) : cond, deadline);
  if (announce) AnnounceLock(this, kReadLock);
  return result;
}

void CondVar::Wait(Mutex* mu) {
  WP_REAL(void (*)(CondVar*, Mutex*), "N", "7CondVar4WaitEPNS0_5MutexE");
  if (announce) AnnounceUnlock(mu, 0);
  real(this, mu);
  if (announce) AnnounceLock(mu, 0);
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  WP_REAL(bool (*)(CondVar*, Mutex*, Duration), "N",
          "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  if (announce) AnnounceUnlock(mu, 0);
  const bool result = real(this, mu, timeout);
  if (announce) AnnounceLock(mu, 0);
  return result;
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  WP_REAL(bool (*)(CondVar*, Mutex*, Time), "N",
          "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  if (announce) AnnounceUnlock(mu, 0);
  const bool result = real(this, mu, deadline);
  if (announce) AnnounceLock(mu, 0);
  return result;
}

// Notify happens before every wait that sees it. (HasBeenNotified() is an
// inline atomic load that no annotation here can reach; nothing in this
// project hands data over through it alone.)
void Notification::Notify() {
  WP_REAL(void (*)(Notification*), "N", "12Notification6NotifyEv");
  if (announce) __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  WP_REAL(void (*)(const Notification*), "NK", "12Notification19WaitForNotificationEv");
  real(this);
  if (announce) __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  WP_REAL(bool (*)(const Notification*, Duration), "NK",
          "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  const bool notified = real(this, timeout);
  if (notified && announce) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  WP_REAL(bool (*)(const Notification*, Time), "NK",
          "12Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  const bool notified = real(this, deadline);
  if (notified && announce) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl
