"""A real MCP server over Streamable HTTP behind TLS on loopback, for the MCP end-to-end tests.

It is the official `mcp` SDK's `MCPServer` (uvicorn, the test CA's leaf certificate from
`fakeprovider.ensure_certs`), so the traffic semula records is what a real server sends: the
`initialize` handshake with its `Mcp-Session-Id`, SSE answers, the GET stream and DELETE.
Its tools' answers depend on their arguments and on a call counter, so a replay that served the
wrong recording, or reached the server, shows in the result. `lookup`'s answer holds a token (for the
redaction tests) unless `with_token` is false (for results that replay byte for byte). `GET /_calls`
says how many tool calls the server has answered.

Run standalone: `python tests/support/fake_mcp.py --port 0 --cert-dir DIR [--json]`; it prints
`fake_mcp ready port=<port>` and serves until SIGTERM.
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

READY_PREFIX = "fake_mcp ready port="


def build(json_response: bool):  # type: ignore[no-untyped-def]
    from mcp.server.mcpserver import MCPServer
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    server = MCPServer("semula-fake-mcp")
    calls = {"n": 0}

    def counted() -> int:
        calls["n"] += 1
        return calls["n"]

    @server.tool()
    def add(a: int, b: int) -> str:
        """Add two numbers."""
        return f"{a} + {b} = {a + b} (call {counted()})"

    @server.tool()
    def lookup(city: str, request_id: str = "", with_token: bool = True) -> str:
        """The weather of a city."""
        token = ", token sk-proj-abcdefghijklmnopqrstuvwxyz0123456789" if with_token else ""
        return f"weather in {city}: sunny{token} (call {counted()})"

    @server.resource("notes://today")
    def today() -> str:
        return "notes of the day"

    @server.prompt()
    def greet(name: str) -> str:
        return f"Say hello to {name}."

    @server.custom_route("/_calls", methods=["GET"])
    async def _calls(request: Request) -> JSONResponse:
        return JSONResponse({"calls": calls["n"]})

    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return server.streamable_http_app(json_response=json_response, transport_security=security)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cert-dir", type=Path, required=True)
    parser.add_argument("--json", action="store_true", help="answer application/json instead of SSE")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import uvicorn
    from fakeprovider import ensure_certs

    certs = ensure_certs(args.cert_dir)
    sock = socket.socket()
    sock.bind(("127.0.0.1", args.port))
    config = uvicorn.Config(build(args.json), ssl_certfile=str(certs.cert), ssl_keyfile=str(certs.key),
                            log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    print(f"{READY_PREFIX}{sock.getsockname()[1]}", flush=True)
    server.run(sockets=[sock])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
