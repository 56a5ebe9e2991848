// Names the calling thread (at most 15 characters, the kernel's limit), so
// `top -H`, perf and /proc/PID/task/*/comm tell the server's background
// threads apart from gRPC's.
#pragma once

#include <pthread.h>

namespace weightpath {

inline void NameThisThread(const char* name) { pthread_setname_np(pthread_self(), name); }

}  // namespace weightpath
