// `weightpath-agent cache [list|gc] [--config FILE] [--root DIR] [-o text|json]`:
// what the build cache (agent/fetch/build_cache.h) holds, and its eviction
// run by hand.
#pragma once

#include <string>

namespace weightpath::agent {

std::string CacheUsage();

// argv as the agent's dispatcher passes it: argv[0] is "cache".
// Exit 0 when listed or collected; 1 when the config or cache_dir cannot be
// read (or gc fails); 2 for a bad command line.
int RunCacheCommand(int argc, char** argv);

}  // namespace weightpath::agent
