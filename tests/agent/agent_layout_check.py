#!/usr/bin/env python3
"""Checks that agent/'s folders depend one way: every #include "agent/<dir>/..."
in agent/<room>/ names a folder <room> may use (agent/README.md, "Layout").
Prints each include that breaks the rule, and exits 1 if there is any."""
import pathlib
import re
import sys

# What each folder may include besides itself, from the top down.
MAY_USE = {
    "cli": {"flow", "sitecache", "signed", "fetch", "report", "engine", "net", "decision",
            "config", "base", "probe"},
    "sitecache": {"fetch", "net", "config", "base"},
    "flow": {"signed", "fetch", "report", "engine", "net", "decision", "config", "base"},
    "signed": {"fetch", "net", "decision", "config", "base"},
    "fetch": {"net", "decision", "config", "base"},
    "report": {"net", "decision", "config", "base"},
    "engine": {"net", "decision", "config", "base"},
    "net": {"config", "base"},
    "decision": {"config", "base"},
    "config": {"base"},
    "base": set(),
    "probe": {"base"},
}
INCLUDE = re.compile(r'#include "agent/([a-z_]+)/')


def main(source_dir: str) -> int:
    agent = pathlib.Path(source_dir) / "agent"
    broken = []
    seen_rooms = set()
    for path in sorted(agent.rglob("*")):
        if path.suffix not in (".cc", ".h"):
            continue
        relative = path.relative_to(agent)
        if len(relative.parts) < 2:
            broken.append(f"agent/{relative}: a source file outside any folder")
            continue
        room = relative.parts[0]
        seen_rooms.add(room)
        if room not in MAY_USE:
            broken.append(f"agent/{relative}: folder {room}/ is not in the layout")
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = INCLUDE.match(line)
            if match and match.group(1) != room and match.group(1) not in MAY_USE[room]:
                broken.append(f"agent/{relative}:{number}: {room}/ may not include "
                              f"{match.group(1)}/ ({line.strip()})")
    for line in broken:
        print(line)
    print(f"{len(seen_rooms)} folders checked, {len(broken)} includes against the layout")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
