"""A LlamaIndex retriever over a docingest index (`pip install docingest[llamaindex]`).

    from docingest.adapters.llamaindex import DocingestRetriever
    retriever = DocingestRetriever("handbook", top_k=4)
    nodes = retriever.retrieve("notice period")     # or await retriever.aretrieve(...)

Each `NodeWithScore` has the hit's score, and a `TextNode` whose text is the excerpt (the
chunk's text where the server gives none) and whose metadata is the source and scores.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from docingest import AsyncClient, Client
from docingest.adapters.source import hit_fields, hit_id
from docingest.models import SearchResponse

_SOURCE_KEYS = ["index", "document_id", "chunk_index", "scores", "excerpt", "highlights", "start"]
"""Metadata kept out of the text an LLM or embedder sees (filename, pages and headings go in)."""


class DocingestRetriever(BaseRetriever):
    """Search one index; `search` takes every option of `Client.search`."""

    def __init__(
        self,
        index: str,
        *,
        client: Client | None = None,
        async_client: AsyncClient | None = None,
        top_k: int = 5,
        **search: Any,
    ) -> None:
        super().__init__()
        self.index = index
        self.client = client or Client()
        self.async_client = async_client
        self.search_options = {"top_k": top_k, **search}

    def _nodes(self, response: SearchResponse) -> list[NodeWithScore]:
        nodes = []
        for hit in response.results:
            fields = hit_fields(hit, index=self.index)
            node = TextNode(
                id_=hit_id(hit, index=self.index),
                text=hit.best_text,
                metadata=fields,
                excluded_embed_metadata_keys=[*_SOURCE_KEYS, "metadata", "end", "context"],
                excluded_llm_metadata_keys=[*_SOURCE_KEYS, "end", "context"],
            )
            nodes.append(NodeWithScore(node=node, score=hit.score))
        return nodes

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        response = self.client.search(self.index, query_bundle.query_str, **self.search_options)
        return self._nodes(response)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query = query_bundle.query_str
        if self.async_client is not None:
            response = await self.async_client.search(self.index, query, **self.search_options)
        else:  # one for this call: an httpx AsyncClient belongs to the event loop it ran in
            async with self.client.to_async() as client:
                response = await client.search(self.index, query, **self.search_options)
        return self._nodes(response)
