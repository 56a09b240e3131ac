"""`docingest mcp`: serve the docingest service to agents over MCP (stdio or streamable HTTP).

The tools talk to a running service like the other client commands (`--url`, `--api-key`);
what `ingest` may read is the operator's: DOCINGEST_MCP_ALLOW_PATHS / _URLS / _PRIVATE, or
`--allow-path`, `--allow-url`, `--allow-private`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from docingest.pipeline.settings import Settings


def add_mcp_command(commands: Any) -> None:
    from docingest.commands import connection_options

    mcp = commands.add_parser("mcp", help="serve search and ingestion as MCP tools for agents")
    mcp.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    mcp.add_argument("--host", default="127.0.0.1", help="http: listen address")
    mcp.add_argument("--port", type=int, default=8765, help="http: listen port")
    mcp.add_argument("--path", default="/mcp", help="http: the endpoint's path")
    mcp.add_argument(
        "--allow-path", type=Path, action="append", default=[], metavar="DIR",
        help="a folder whose files `ingest` may read (repeatable; DOCINGEST_MCP_ALLOW_PATHS)",
    )  # fmt: skip
    mcp.add_argument(
        "--allow-url", action="append", default=[], metavar="PREFIX",
        help="a URL prefix `ingest` may fetch (repeatable; DOCINGEST_MCP_ALLOW_URLS)",
    )  # fmt: skip
    mcp.add_argument(
        "--allow-private", action="store_true",
        help="let allowed URLs resolve to private addresses (DOCINGEST_MCP_ALLOW_PRIVATE)",
    )  # fmt: skip
    connection_options(mcp)
    mcp.set_defaults(handler=run_mcp, extra="mcp")


def run_mcp(args: argparse.Namespace, settings: Settings) -> int:
    from docingest import AsyncClient
    from docingest._core import default_base_url
    from docingest.adapters.fetch_policy import FetchPolicy
    from docingest.adapters.mcp import build_server  # the mcp extra (`extra=` above)

    policy = FetchPolicy(
        allow_paths=[*settings.mcp_allow_paths, *args.allow_path],
        allow_urls=[*settings.mcp_allow_urls, *args.allow_url],
        allow_private=settings.mcp_allow_private or args.allow_private,
        max_bytes=settings.max_upload_bytes,
    )
    url = args.url or default_base_url(host=settings.host, port=settings.port)
    server = build_server(AsyncClient(url, api_key=args.api_key or None), policy)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run(
            "streamable-http", host=args.host, port=args.port, streamable_http_path=args.path
        )
    return 0
