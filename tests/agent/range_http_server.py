#!/usr/bin/env python3
"""A static file server for the agent's download tests: GET with byte ranges
(206), a request log, and a fault that cuts a response short.

Python's SimpleHTTPRequestHandler ignores Range headers, which is exactly the
feature the resume tests exercise, so this serves files itself.

  range_http_server.py --root DIR [--request-log FILE] [--default-query Q]

--default-query applies the knobs below to every request whose URL has no
query of its own (a mirror base URL cannot carry one): a whole server that
trickles, say.

Prints "PORT <n>" once it listens on 127.0.0.1:<n> (a port the kernel picked).
A query of ?cut_after=N makes the server announce the full length, send only
N bytes of the body, and close the connection: an interrupted download.
A query of ?stall_after=N sends N bytes of the body and then nothing, with
the connection open: a mirror that hangs mid-transfer.

Hostile mirrors (tests/README.md, "Faults with real processes"):
  ?status=500        answers that status (a short text body) to every GET
  ?trickle=N         sends the body N bytes at a time, 100 ms apart
  ?delay_ms=N        waits N ms before answering (a slow mirror, to see
                     parallel downloads overlap)
  ?claim_length=N    announces Content-Length: N whatever the file's length;
                     sends min(N, length) bytes of the file, then (with
                     &pad=1 and N > length) N - length bytes of garbage, then
                     closes the connection
"""
import argparse
import os
import re
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RANGE_PATTERN = re.compile(r"^bytes=(\d+)-(\d*)$")
CHUNK_BYTES = 64 * 1024


class RangeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    root = "."
    log_path = None
    log_lock = threading.Lock()
    default_query = ""

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass  # the request log below is the record tests read

    def record(self, status, body_bytes):
        if not self.log_path:
            return
        line = "GET {} range={} status={} bytes={}\n".format(
            self.path, self.headers.get("Range", "-"), status, body_bytes)
        with self.log_lock, open(self.log_path, "a", encoding="utf-8") as log:
            log.write(line)

    def do_GET(self):  # noqa: N802 - the name http.server dispatches to
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query or self.default_query)
        relative = urllib.parse.unquote(url.path).lstrip("/")
        path = os.path.realpath(os.path.join(self.root, relative))
        if not path.startswith(os.path.realpath(self.root) + os.sep) or not os.path.isfile(path):
            self.record(404, 0)
            self.send_error(404)
            return
        if "delay_ms" in query:
            time.sleep(int(query["delay_ms"][0]) / 1000.0)
        if "status" in query:
            fault = int(query["status"][0])
            body = "mirror fault {}\n".format(fault).encode()
            self.record(fault, len(body))
            self.send_response(fault)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        size = os.path.getsize(path)
        start, end, status = 0, size - 1, 200
        range_header = self.headers.get("Range")
        if range_header:
            match = RANGE_PATTERN.match(range_header.strip())
            if not match or int(match.group(1)) >= size:
                self.record(416, 0)
                self.send_response(416)
                self.send_header("Content-Range", "bytes */{}".format(size))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            start = int(match.group(1))
            if match.group(2):
                end = min(int(match.group(2)), size - 1)
            status = 206
        length = end - start + 1
        cut_after = int(query["cut_after"][0]) if "cut_after" in query else None
        stall_after = int(query["stall_after"][0]) if "stall_after" in query else None
        if stall_after is not None:
            cut_after = stall_after
        trickle = int(query["trickle"][0]) if "trickle" in query else None
        claim_length = int(query["claim_length"][0]) if "claim_length" in query else None
        pad = claim_length is not None and "pad" in query and claim_length > length
        if claim_length is not None:
            cut_after = min(length, claim_length)

        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length if claim_length is None else claim_length))
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", "bytes {}-{}/{}".format(start, end, size))
        self.end_headers()

        to_send = length if cut_after is None else min(length, cut_after)
        # Logged before the body goes out, so a client that has its bytes can
        # rely on the line being there.
        self.record(status, to_send)
        sent = 0
        with open(path, "rb") as source:
            source.seek(start)
            while sent < to_send:
                chunk = source.read(min(trickle or CHUNK_BYTES, to_send - sent))
                if not chunk:
                    break
                self.wfile.write(chunk)
                sent += len(chunk)
                if trickle:
                    self.wfile.flush()
                    time.sleep(0.1)
        if pad:
            self.wfile.write(b"\xa5" * (claim_length - length))
        self.wfile.flush()
        if claim_length is not None:
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if stall_after is not None and sent < length:
            time.sleep(3600)  # the thread is a daemon: the server's exit ends it
            return
        if cut_after is not None and sent < length:
            self.close_connection = True
            self.connection.shutdown(2)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", required=True)
    parser.add_argument("--request-log")
    parser.add_argument("--default-query", default="")
    args = parser.parse_args()
    RangeHandler.default_query = args.default_query
    RangeHandler.root = args.root
    RangeHandler.log_path = args.request_log
    server = ThreadingHTTPServer(("127.0.0.1", 0), RangeHandler)
    server.daemon_threads = True
    print("PORT {}".format(server.server_address[1]), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
