#!/usr/bin/env bash
# `weightpath-agent serve-cache` on a hit from the page cache, all on
# loopback:
#  (a) one download of the whole blob, `curl -o /dev/null`, through
#      serve-cache vs the same file from `python3 -m http.server` vs
#      `curl file://` reading it, and vs a bare loop of os.sendfile behind
#      the least HTTP answer (what loopback TCP to curl carries at best, the
#      ceiling of any server here): the arms interleaved in each round
#      (their order rotated), ROUNDS rounds, medians;
#  (b) CONCURRENT downloads at once of the blob's first CONCURRENT_MIB MiB
#      (a Range: the same sendfile path as a whole blob, less disk to move;
#      --max-connections CONCURRENT where that is over the default):
#      serve-cache's peak RSS (VmHWM, reset before the phase);
#  (c) IDLE connections that send nothing or half a request line, held
#      past the 10 s request-head limit, once with the default
#      --max-connections and once with the largest (4096): how many are
#      refused (503) or closed, serve-cache's peak RSS and threads, and what
#      a normal GET gets meanwhile and after;
#  (d) as many downloads as --max-connections (the default, then 2048 of
#      4096) whose clients read nothing (a 4 KiB receive buffer): each holds
#      its thread in sendfile; serve-cache's peak RSS, and what one more
#      request gets.
#
#   bench/serve_cache_throughput.sh AGENT_BIN [BLOB_MIB] [ROUNDS] [CONCURRENT] [CONCURRENT_MIB] [IDLE]
#
# Defaults 512 MiB, 5 rounds, 100 downloads of 256 MiB, 3000 idle
# connections. The blob is incompressible bytes, warmed into serve-cache's
# store by one GET through it (its upstream: the http.server), then the
# http.server's copy is replaced by a hard link to the store's, so every arm
# reads the same inode from the page cache. Needs python3, curl, openssl,
# about BLOB_MIB MiB free under /tmp.
set -euo pipefail

usage="usage: $0 AGENT_BIN [BLOB_MIB] [ROUNDS] [CONCURRENT] [CONCURRENT_MIB] [IDLE]"
agent=${1:?$usage}
blob_mib=${2:-512}
rounds=${3:-5}
concurrent=${4:-100}
concurrent_mib=${5:-256}
idle=${6:-3000}
((concurrent_mib <= blob_mib)) || { echo "CONCURRENT_MIB must be at most BLOB_MIB" >&2; exit 2; }
free_mib=$(df -Pm /tmp | awk 'NR == 2 { print $4 }')
((free_mib > 2 * blob_mib + 1024)) || { echo "only $free_mib MiB free under /tmp" >&2; exit 1; }
ulimit -n "$(ulimit -Hn)"
((idle + 64 <= $(ulimit -n))) || { echo "IDLE over the descriptor limit $(ulimit -n)" >&2; exit 2; }

work=$(mktemp -d /tmp/wp-serve-cache-bench-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
any_alive() { for pid; do kill -0 "$pid" 2>/dev/null && return 0; done; return 1; }
status_kib() { sed -n "s/^$2:[[:space:]]*\([0-9]*\).*/\1/p" "/proc/$1/status"; }

mkdir -p "$work/origin/blobs/sha256"
head -c "$((blob_mib * 1048576))" /dev/zero |
  openssl enc -aes-128-ctr -nosalt -pass pass:weightpath-serve-cache -pbkdf2 2>/dev/null \
    >"$work/blob"
digest=$(sha256sum "$work/blob" | cut -d' ' -f1)
blob_bytes=$(stat -c %s "$work/blob")
mv "$work/blob" "$work/origin/blobs/sha256/$digest"

python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$work/origin" \
  >"$work/python.out" 2>"$work/python.err" &
pids+=($!)
for _ in $(seq 1 100); do grep -q ' port ' "$work/python.out" 2>/dev/null && break; sleep 0.1; done
python_port=$(sed -n 's/.* port \([0-9]*\) .*/\1/p' "$work/python.out")
[[ -n "$python_port" ]] || { cat "$work/python.err" >&2; exit 1; }

cat >"$work/bare_sendfile.py" <<'PY'
# Answers every connection with PATH: a fixed HTTP head, then os.sendfile
# in 1 MiB pieces; no parsing, no checks.
import os, socket, sys

listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
while True:
    client, _ = listener.accept()
    client.recv(65536)
    with open(sys.argv[1], "rb") as blob:
        size = os.fstat(blob.fileno()).st_size
        client.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % size)
        offset = 0
        while offset < size:
            sent = os.sendfile(client.fileno(), blob.fileno(), offset, min(1 << 20, size - offset))
            if sent <= 0:
                break
            offset += sent
    client.close()
PY

cache_pid=
start_cache() {  # [--max-connections N]
  "$agent" serve-cache --listen 127.0.0.1:0 --cache-dir "$work/store" \
    --upstream "http://127.0.0.1:$python_port" "$@" >"$work/cache.out" 2>>"$work/cache.err" &
  cache_pid=$!
  pids+=($cache_pid)
  for _ in $(seq 1 100); do grep -q '^LISTENING ' "$work/cache.out" 2>/dev/null && break; sleep 0.1; done
  cache_port=$(sed -n 's/^LISTENING //p' "$work/cache.out")
  [[ -n "$cache_port" ]] || { cat "$work/cache.err" >&2; exit 1; }
  cache_url=http://127.0.0.1:$cache_port/blobs/sha256/$digest
}
stop_cache() {
  kill -TERM "$cache_pid"; wait "$cache_pid" || true
}
reset_peak() { echo 5 >"/proc/$cache_pid/clear_refs"; }

connections=()
((concurrent > 256)) && connections=(--max-connections "$concurrent")
start_cache "${connections[@]}"
curl -sf -o /dev/null "$cache_url" || { echo "warming through serve-cache failed" >&2; exit 1; }
[[ -f "$work/store/$digest" ]] || { echo "serve-cache did not store the blob" >&2; exit 1; }
ln -f "$work/store/$digest" "$work/origin/blobs/sha256/$digest"
# Every arm reads one inode; read it once more so it is all in the page cache.
cat "$work/store/$digest" >/dev/null

python3 -u "$work/bare_sendfile.py" "$work/store/$digest" >"$work/bare.out" 2>"$work/bare.err" &
pids+=($!)
for _ in $(seq 1 100); do [[ -s "$work/bare.out" ]] && break; sleep 0.1; done
bare_port=$(cat "$work/bare.out")
[[ -n "$bare_port" ]] || { cat "$work/bare.err" >&2; exit 1; }

echo "blob: $blob_bytes bytes ($digest); $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "(a) one download of the whole blob, MiB/s (curl -o /dev/null), $rounds rounds"
arms=(serve-cache python-http.server curl-file bare-sendfile)
declare -A url=(
  [serve-cache]=$cache_url
  [python-http.server]=http://127.0.0.1:$python_port/blobs/sha256/$digest
  [curl-file]=file://$work/store/$digest
  [bare-sendfile]=http://127.0.0.1:$bare_port/blob
)
for r in $(seq 1 "$rounds"); do
  line="  round $r:"
  for i in 0 1 2 3; do
    arm=${arms[$(((r + i) % 4))]}
    read -r speed size < <(curl -sf -o /dev/null -w '%{speed_download} %{size_download}\n' "${url[$arm]}")
    [[ "$size" == "$blob_bytes" ]] || { echo "$arm: got $size of $blob_bytes bytes" >&2; exit 1; }
    echo "$speed" >>"$work/speed.$arm"
    line+=$(printf '  %s %7.1f' "$arm" "$(mib "$speed")")
  done
  echo "$line"
done
for arm in "${arms[@]}"; do
  printf '  median %-19s %7.1f MiB/s\n' "$arm" "$(mib "$(median <"$work/speed.$arm")")"
done
awk -v a="$(median <"$work/speed.serve-cache")" -v b="$(median <"$work/speed.python-http.server")" \
  -v c="$(median <"$work/speed.curl-file")" \
  -v d="$(median <"$work/speed.bare-sendfile")" \
  'BEGIN { f = b > c ? b : c; printf "  serve-cache / the faster of http.server and curl file: %.2f (target >= 0.9); / bare sendfile: %.2f\n", a / f, a / d }'
echo "  load after (a): $(cut -d' ' -f1-3 /proc/loadavg)"

echo "(b) $concurrent downloads at once of the first $concurrent_mib MiB (Range), ${connections[*]:-the default --max-connections}"
reset_peak
t0=$(date +%s%N)
downloads=()
for i in $(seq 1 "$concurrent"); do
  curl -s -o /dev/null -r "0-$((concurrent_mib * 1048576 - 1))" -w '%{http_code} %{size_download}\n' \
    "$cache_url" >"$work/concurrent.$i" &
  downloads+=($!)
done
max_threads=0
while any_alive "${downloads[@]}"; do
  threads=$(status_kib "$cache_pid" Threads)
  ((threads > max_threads)) && max_threads=$threads
  sleep 0.2
done
for pid in "${downloads[@]}"; do wait "$pid" || true; done
t1=$(date +%s%N)
ok=$(cat "$work"/concurrent.* | awk -v n="$((concurrent_mib * 1048576))" '$1 == 206 && $2 == n' | wc -l)
awk -v t="$((t1 - t0))" -v n="$concurrent" -v m="$concurrent_mib" -v ok="$ok" \
  'BEGIN { printf "  %d of %d complete (206, %d MiB), wall %.2f s, aggregate %.1f MiB/s\n", ok, n, m, t / 1e9, ok * m / (t / 1e9) }'
echo "  serve-cache peak RSS (VmHWM) $(mib "$(($(status_kib "$cache_pid" VmHWM) * 1024))") MiB, threads at most $max_threads (target <= 50 MB)"
echo "  load after (b): $(cut -d' ' -f1-3 /proc/loadavg)"
stop_cache

cat >"$work/idle.py" <<'PY'
# Opens N connections to 127.0.0.1:PORT, half sending nothing, half the
# start of a request line; then, while they are held, one GET of the
# blob's first MiB (the probe); says how many were answered 503, closed
# without an answer, or are still open 1 s and HOLD s after the last
# connect.
import select, socket, sys, time

port, n, hold, target = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
socks, failed = [], 0
t0 = time.monotonic()
for i in range(n):
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect(("127.0.0.1", port))
        if i % 2:
            s.send(b"GET /blobs/sha256/")
    except OSError:
        failed += 1
        s.close()
        continue
    s.setblocking(False)
    socks.append(s)
state = {s: "open" for s in socks}
connected = time.monotonic()
print(f"{len(socks)} connected in {connected - t0:.1f} s, {failed} failed to connect", flush=True)

def look():
    poller, by_fd = select.poll(), {}
    for s in socks:
        if state[s] == "open":
            poller.register(s, select.POLLIN)
            by_fd[s.fileno()] = s
    for fd, _ in poller.poll(0):
        s = by_fd[fd]
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        state[s] = "503" if data.startswith(b"HTTP/1.1 503") else ("closed" if not data else "other")
    counts = {}
    for v in state.values():
        counts[v] = counts.get(v, 0) + 1
    return f"at {time.monotonic() - t0:4.1f} s: " + " ".join(f"{k}={v}" for k, v in sorted(counts.items()))

time.sleep(1)
print(look(), flush=True)
probe = socket.create_connection(("127.0.0.1", port), timeout=5)
probe.sendall(f"GET {target} HTTP/1.1\r\nHost: cache\r\nRange: bytes=0-1048575\r\n\r\n".encode())
answer, error = b"", ""
try:
    while chunk := probe.recv(1 << 20):
        answer += chunk
except OSError as e:
    error = f" then {e.strerror}"
head, _, body = answer.partition(b"\r\n\r\n")
status = head.split(b"\r\n")[0].decode(errors="replace")
print(f"probe at {time.monotonic() - t0:4.1f} s: {status}, {len(body)} body bytes{error}", flush=True)
probe.close()
# HOLD s after the last connect, whose head limit then passed too.
time.sleep(max(0, hold - (time.monotonic() - connected)))
print(look(), flush=True)
PY

idle_phase() {  # [--max-connections N]
  start_cache "$@"
  reset_peak
  python3 -u "$work/idle.py" "$cache_port" "$idle" 11 "/blobs/sha256/$digest" >"$work/idle.out" 2>&1 &
  local idle_pid=$! max_threads=0 after
  while kill -0 "$idle_pid" 2>/dev/null; do
    threads=$(status_kib "$cache_pid" Threads)
    ((threads > max_threads)) && max_threads=$threads
    sleep 0.2
  done
  wait "$idle_pid" || true
  after=$(curl -s -o /dev/null -r 0-1048575 -w '%{http_code} %{size_download}' --max-time 5 "$cache_url" || true)
  echo "  ${*:-the default --max-connections}:"
  sed 's/^/    /' "$work/idle.out"
  echo "    after they closed, a 1 MiB Range GET (curl): $after"
  echo "    serve-cache peak RSS (VmHWM) $(mib "$(($(status_kib "$cache_pid" VmHWM) * 1024))") MiB, threads at most $max_threads; refused_connections_total $(curl -s "http://127.0.0.1:$cache_port/metrics" | sed -n 's/^weightpath_site_cache_refused_connections_total //p')"
  stop_cache
}
cat >"$work/stuck.py" <<'PY'
# N downloads of TARGET that read nothing, then one more request; prints
# its status line.
import socket, sys, time

port, n, target = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
readers = []
for _ in range(n):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(f"GET {target} HTTP/1.1\r\nHost: cache\r\n\r\n".encode())
    readers.append(s)
time.sleep(2)
extra = socket.create_connection(("127.0.0.1", port), timeout=5)
extra.sendall(b"GET /metrics HTTP/1.1\r\nHost: cache\r\n\r\n")
print("HELD; one more request:", extra.recv(4096).split(b"\r\n")[0].decode(errors="replace"), flush=True)
sys.stdin.readline()
PY

stuck_phase() {  # readers [--max-connections N]
  local readers=$1 threads
  shift
  start_cache "$@"
  reset_peak
  mkfifo "$work/stuck.in"
  python3 -u "$work/stuck.py" "$cache_port" "$readers" "/blobs/sha256/$digest" <"$work/stuck.in" >"$work/stuck.out" 2>&1 &
  local stuck_pid=$!
  exec 9>"$work/stuck.in"
  for _ in $(seq 1 600); do grep -q '^HELD' "$work/stuck.out" && break; sleep 0.1; done
  threads=$(status_kib "$cache_pid" Threads)
  echo "  $readers readers, ${*:-the default --max-connections}: $(sed -n 's/^HELD; //p' "$work/stuck.out"); threads $threads, peak RSS (VmHWM) $(mib "$(($(status_kib "$cache_pid" VmHWM) * 1024))") MiB"
  exec 9>&-
  wait "$stuck_pid" || true
  rm -f "$work/stuck.in"
  stop_cache
}

echo "(c) $idle idle connections (half silent, half 'GET /blobs/sha256/'), held until 11 s after the last connect (the head limit is 10 s)"
idle_phase
idle_phase --max-connections 4096
echo "  load after (c): $(cut -d' ' -f1-3 /proc/loadavg)"
echo "(d) downloads that read nothing, each holding a thread"
stuck_phase 256
stuck_phase 2048 --max-connections 4096
echo "  load after (d): $(cut -d' ' -f1-3 /proc/loadavg)"
