"""The adapters against the real frameworks and a real `docingest serve`: LangChain's and
LlamaIndex's retrievers (sync and async), and `docingest mcp` driven by the MCP SDK's own
client over stdio and over streamable HTTP, its `ingest` refusing what is not allowed."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from llama_index.core.schema import QueryBundle
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

import docingest
from docingest.adapters import langchain, llamaindex
from docingest.adapters.fetch_policy import FetchPolicy, NotAllowed
from tests.support.docingest_service import DOCINGEST, ServiceEnv, free_port
from tests.support.paths import EXAMPLES_DIR
from tests.support.waiting import wait_until

INDEX = "sdk-adapters"
QUERY = "Which document formats does Docling parse?"
# Loaded here, not lazily inside the MCP client's task: pytest rewrites anyio's modules (a
# plugin) and CPython 3.11.7 can fail compiling one that deep in a stack (SystemError: AST
# constructor recursion depth mismatch).
OPEN_PROCESS = anyio.open_process
SOURCE_KEYS = {"document_id", "filename", "page_start", "page_end", "headings", "score", "scores"}


@pytest.fixture(scope="module")
def client(sdk_serve: ServiceEnv) -> Iterator[docingest.Client]:
    with docingest.Client(sdk_serve.base_url) as client:
        client.ingest(INDEX, EXAMPLES_DIR / "docling-README.md", metadata={"kind": "readme"})
        yield client


def test_langchain_retriever_returns_excerpts_sources_and_scores(client: docingest.Client) -> None:
    retriever = langchain.DocingestRetriever(index=INDEX, client=client, top_k=3)
    documents = retriever.invoke(QUERY)
    assert 0 < len(documents) <= 3
    first = documents[0]
    assert SOURCE_KEYS <= set(first.metadata) and first.metadata["index"] == INDEX
    assert first.metadata["document_id"] == "docling-README.md"
    assert first.metadata["scores"]["vector"] is not None
    assert first.page_content and first.id == f"{INDEX}/docling-README.md#" + str(
        first.metadata["chunk_index"]
    )
    again = asyncio.run(retriever.ainvoke(QUERY))
    assert [doc.id for doc in again] == [doc.id for doc in documents]


def test_llamaindex_retriever_returns_nodes_with_scores(client: docingest.Client) -> None:
    retriever = llamaindex.DocingestRetriever(INDEX, client=client, top_k=3, mode="hybrid")
    nodes = retriever.retrieve(QUERY)
    assert 0 < len(nodes) <= 3
    scores = [node.score for node in nodes]
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    node = nodes[0].node
    assert SOURCE_KEYS <= set(node.metadata) and node.get_content()
    assert "scores" not in node.get_content(metadata_mode="llm")  # type: ignore[arg-type]
    again = asyncio.run(retriever.aretrieve(QueryBundle(QUERY)))
    assert [n.node.node_id for n in again] == [n.node.node_id for n in nodes]


def tool_result(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return dict(result.structured_content)


async def exercise(session: ClientSession, allowed: Path, outside: Path) -> dict[str, Any]:
    """List the tools, search, list indexes and documents, ingest an allowed file, and try
    one that is not allowed."""
    await session.initialize()
    names = {tool.name for tool in (await session.list_tools()).tools}
    found = tool_result(await session.call_tool("search", {"index": INDEX, "query": QUERY}))
    indexes = tool_result(await session.call_tool("list_indexes", {}))
    documents = tool_result(await session.call_tool("list_documents", {"index": INDEX}))
    ingested = tool_result(
        await session.call_tool("ingest", {"index": INDEX + "-mcp", "source": str(allowed)})
    )
    refused = await session.call_tool("ingest", {"index": INDEX, "source": str(outside)})
    return {
        "names": names, "search": found, "indexes": indexes, "documents": documents,
        "ingested": ingested, "refused": refused,
    }  # fmt: skip


def check(seen: dict[str, Any]) -> None:
    assert seen["names"] == {"search", "list_indexes", "list_documents", "ingest"}
    hit = seen["search"]["results"][0]
    assert hit["text"] and SOURCE_KEYS <= set(hit) and hit["document_id"] == "docling-README.md"
    assert INDEX in {index["name"] for index in seen["indexes"]["indexes"]}
    assert [doc["document_id"] for doc in seen["documents"]["documents"]] == ["docling-README.md"]
    assert seen["ingested"]["status"] == "completed"
    assert seen["refused"].is_error
    assert "not allowed" in seen["refused"].content[0].text


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path, Path]:
    allowed_dir = tmp_path / "shared"
    allowed_dir.mkdir()
    allowed = allowed_dir / "minutes.txt"
    allowed.write_text("Minutes: the board approved the new travel policy.\n")
    outside = tmp_path / "private.txt"
    outside.write_text("Not for agents.\n")
    return allowed_dir, allowed, outside


def environ(sdk_serve: ServiceEnv) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCINGEST_")}
    return env | {"DOCINGEST_URL": sdk_serve.base_url}


def test_mcp_over_stdio(
    client: docingest.Client, sdk_serve: ServiceEnv, files: tuple[Path, Path, Path]
) -> None:
    allowed_dir, allowed, outside = files
    params = StdioServerParameters(
        command=str(DOCINGEST),
        args=["mcp", "--allow-path", str(allowed_dir)],
        env=environ(sdk_serve),
    )

    async def scenario() -> dict[str, Any]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            return await exercise(session, allowed, outside)

    check(asyncio.run(scenario()))


def test_mcp_over_streamable_http(
    client: docingest.Client, sdk_serve: ServiceEnv, files: tuple[Path, Path, Path]
) -> None:
    allowed_dir, allowed, outside = files
    port = free_port()
    env = environ(sdk_serve) | {"DOCINGEST_MCP_ALLOW_PATHS": json.dumps([str(allowed_dir)])}
    process = subprocess.Popen(
        [str(DOCINGEST), "mcp", "--transport", "http", "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/mcp"

    def answering() -> bool:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        try:
            httpx.get(url, timeout=2)
        except httpx.TransportError:
            return False
        return True

    try:
        wait_until(answering, timeout=120, what="docingest mcp listening")

        async def scenario() -> dict[str, Any]:
            async with (
                streamable_http_client(url) as (read, write),
                ClientSession(read, write) as session,
            ):
                return await exercise(session, allowed, outside)

        check(asyncio.run(scenario()))
    finally:
        process.terminate()
        process.wait(30)
        if process.stderr:
            process.stderr.close()


@pytest.fixture
def site(tmp_path: Path) -> Iterator[str]:
    """A local web server of `tmp_path` (a private address, as a deployment's own would be)."""
    (tmp_path / "page.txt").write_text("A page served on the local network.\n")
    handler = partial(SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_urls_are_fetched_only_when_allowed_and_public(site: str) -> None:
    closed = FetchPolicy()
    with pytest.raises(NotAllowed, match="not under a URL prefix"):
        closed.check_url(site + "page.txt")
    listed = FetchPolicy(allow_urls=[site])
    with pytest.raises(NotAllowed, match="non-public address"):
        listed.fetch(site + "page.txt")
    with pytest.raises(NotAllowed, match="not an http"):
        listed.check_url("file:///etc/passwd")
    opened = FetchPolicy(allow_urls=[site], allow_private=True)
    path, name = opened.fetch(site + "page.txt")
    try:
        assert name == "page.txt" and path.read_text() == "A page served on the local network.\n"
    finally:
        path.unlink()
    with pytest.raises(NotAllowed, match="larger than"):
        FetchPolicy(allow_urls=[site], allow_private=True, max_bytes=8).fetch(site + "page.txt")


def test_paths_are_read_only_inside_allowed_folders(files: tuple[Path, Path, Path]) -> None:
    allowed_dir, allowed, outside = files
    policy = FetchPolicy(allow_paths=[allowed_dir])
    assert policy.check_path(str(allowed)) == allowed.resolve()
    with pytest.raises(NotAllowed):
        policy.check_path(str(outside))
    with pytest.raises(NotAllowed):
        policy.check_path(str(allowed_dir / ".." / "private.txt"))
    (allowed_dir / "link.txt").symlink_to(outside)
    with pytest.raises(NotAllowed):
        policy.check_path(str(allowed_dir / "link.txt"))
