#!/usr/bin/env python3
"""A complete acpguard policy provider in Python 3, standard library only.

It allows every tool call except shell commands (run_shell_command).

Run it (the token is the one serve and acp send; keep it out of your shell
history, e.g. read it from a file):

    export QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN="$(cat ~/.config/acpguard/provider-token)"
    python3 examples/provider.py            # listens on 127.0.0.1:8790
    python3 examples/provider.py 9000       # or on another loopback port

and point acpguard at it:

    acpguard serve --workspace "$PWD" --external-tool-guard-mode=required \
      --external-tool-guard-endpoint=http://127.0.0.1:8790

Port 8790 is not the reference provider's 8787 (acpguard provider), so both
can run side by side. The wire contract is docs/provider-protocol.md. Without the token it prints why and exits with status 2.
"""
import hmac
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULT_PORT = 8790
TOKEN_VAR = "QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN"


class Provider(BaseHTTPRequestHandler):
    token = ""

    def do_POST(self):
        if not hmac.compare_digest(self.headers.get("Authorization", ""), "Bearer " + self.token):
            return self.answer(401, {"error": "unauthorized"})
        try:
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        except ValueError:
            return self.answer(400, {"error": "body is not JSON"})
        if self.path == "/v1/handshake":
            return self.answer(200, {"protocolVersion": 1, "nonce": req["nonce"],
                                     "capabilities": {"prepare": True}})
        if self.path == "/v1/prepare":
            out = {"protocolVersion": 1, "requestId": req["requestId"],
                   "allowed": req["toolName"] != "run_shell_command"}
            if not out["allowed"]:
                out["reason"] = "Shell commands are not allowed here"
            return self.answer(200, out)
        self.answer(404, {"error": "not found"})

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main(argv):
    token = os.environ.pop(TOKEN_VAR, "")
    if not token:
        print(f"start provider: {TOKEN_VAR} is not set or empty; "
              "set it to the token acpguard sends (the same value serve and acp get)",
              file=sys.stderr)
        return 2
    port = DEFAULT_PORT
    if len(argv) > 1:
        try:
            port = int(argv[1])
        except ValueError:
            print(f"start provider: port {argv[1]!r} is not a number; usage: provider.py [PORT]",
                  file=sys.stderr)
            return 2
    Provider.token = token
    server = ThreadingHTTPServer(("127.0.0.1", port), Provider)
    print(f"provider listening on http://127.0.0.1:{server.server_port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
