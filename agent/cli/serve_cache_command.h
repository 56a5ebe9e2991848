// `weightpath-agent serve-cache --listen ADDR --cache-dir DIR --upstream URL
// [--upstream URL...] [--max-bytes N] [--max-connections N]`: the site cache
// (agent/sitecache/site_cache.h), until SIGTERM or SIGINT.
#pragma once

#include <string>

namespace weightpath::agent {

std::string ServeCacheUsage();

// argv as the agent's dispatcher passes it: argv[0] is "serve-cache".
// Prints "LISTENING <port>" once it serves. Exit 0 after SIGTERM/SIGINT;
// 1 when it cannot listen or use its cache dir; 2 for a bad command line.
int RunServeCacheCommand(int argc, char** argv);

}  // namespace weightpath::agent
