"""`docingest mcp`: the service as tools for agents, over the official MCP Python SDK
(`pip install docingest[mcp]`), by stdio or streamable HTTP.

Tools: `search`, `list_indexes`, `list_documents`, and `ingest` of a file or URL the operator
allows (`FetchPolicy`): nothing is readable or fetchable unless allowed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from docingest import AsyncClient, DocingestError
from docingest.adapters.fetch_policy import FetchPolicy, NotAllowed
from docingest.adapters.source import hit_fields
from docingest.models import SearchMode

INSTRUCTIONS = (
    "Search documents ingested into docingest. Call list_indexes first, then search an index; "
    "each result has the text (the best excerpt of the chunk), its source (document, pages, "
    "headings) and its scores."
)


@contextmanager
def _told() -> Iterator[None]:
    """The service's refusals as `ToolError`, whose message the agent reads (any other
    exception reaches it only as "Error executing tool")."""
    try:
        yield
    except DocingestError as exc:
        raise ToolError(str(exc)) from exc
    except NotAllowed as exc:
        raise ToolError(f"not allowed: {exc}") from exc


def build_server(client: AsyncClient, policy: FetchPolicy) -> MCPServer:
    """An MCP server whose tools talk to the docingest service through `client`."""
    server = MCPServer("docingest", instructions=INSTRUCTIONS)

    @server.tool()
    async def search(
        index: str,
        query: str,
        top_k: int = 5,
        mode: SearchMode | None = None,
        filter: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Search an index. `mode` is hybrid (default), vector or keyword; `filter` matches
        metadata, e.g. {"department": "legal"} or {"year": {"gte": 2020}}."""
        with _told():
            response = await client.search(index, query, top_k=top_k, mode=mode, filter=filter)
        results = [
            {"text": hit.best_text, **hit_fields(hit, index=index)} for hit in response.results
        ]
        return {"results": results, "took_ms": response.took_ms}

    @server.tool()
    async def list_indexes() -> dict[str, Any]:
        """The indexes, with their document and chunk counts."""
        with _told():
            indexes = await client.list_indexes()
        return {
            "indexes": [
                {
                    "name": info.name,
                    "description": info.description,
                    "documents": info.documents,
                    "chunks": info.chunks,
                }
                for info in indexes
            ]  # fmt: skip
        }

    @server.tool()
    async def list_documents(
        index: str, limit: int = 50, cursor: str | None = None
    ) -> dict[str, Any]:
        """One page of an index's documents; pass `next_cursor` back for the next."""
        with _told():
            page = await client.list_documents(index, limit=limit, cursor=cursor)
        documents = [
            {"document_id": doc.document_id, "filename": doc.filename, "format": doc.format,
             "pages": doc.pages, "chunks": doc.chunks, "metadata": doc.metadata,
             "ingested_at": doc.ingested_at}
            for doc in page.documents[:limit]
        ]  # fmt: skip
        return {"documents": documents, "next_cursor": page.next_cursor}

    @server.tool()
    async def ingest(
        index: str,
        source: str,
        document_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        wait: bool = True,
    ) -> dict[str, Any]:
        """Ingest a file (a path on the server's machine) or an http(s) URL into an index,
        if the operator allows that path or URL; with `wait`, until the job ends."""
        with _told():
            if source.startswith(("http://", "https://")):
                path, name = await asyncio.to_thread(policy.fetch, source)
                temporary = True
            else:
                path, name, temporary = policy.check_path(source), "", False
        try:
            with _told():
                accepted = await client.upload(
                    index, path, filename=name or path.name, document_id=document_id,
                    metadata=metadata,
                )  # fmt: skip
                if not wait:
                    return accepted.to_json()
                job = await client.wait(accepted, raise_on_failure=False)
        finally:
            if temporary:
                Path(path).unlink(missing_ok=True)
        return job.to_json()

    return server
