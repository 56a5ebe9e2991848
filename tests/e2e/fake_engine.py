"""A stand-in for an inference engine's readiness endpoint, as vLLM serves
it: GET /health answers 503 while the engine loads and 200 once it serves.

    fake_engine.py READY_AFTER_SECONDS   (negative: never ready)

Prints "port N" once listening on 127.0.0.1 (a free port).
"""
import http.server
import sys
import time

ready_after = float(sys.argv[1])
started = time.monotonic()


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ready = ready_after >= 0 and time.monotonic() - started >= ready_after
        status = 200 if ready and self.path == "/health" else 503
        body = b"" if status == 200 else b"loading\n"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
print("port %d" % server.server_address[1], flush=True)
server.serve_forever()
