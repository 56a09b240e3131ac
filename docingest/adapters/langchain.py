"""A LangChain retriever over a docingest index (`pip install docingest[langchain]`).

    from docingest.adapters.langchain import DocingestRetriever
    retriever = DocingestRetriever(index="handbook", top_k=4)
    docs = retriever.invoke("notice period")        # or await retriever.ainvoke(...)

Each `Document`'s `page_content` is the hit's excerpt (its chunk's text where the server gives
no excerpt) and its metadata the source and scores (`docingest.adapters.source.hit_fields`).
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from docingest import AsyncClient, Client
from docingest.adapters.source import hit_fields, hit_id
from docingest.models import SearchMode, SearchResponse


class DocingestRetriever(BaseRetriever):
    """Search one index; every search option of the contract is a field."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: str
    client: Client = Field(default_factory=Client, exclude=True)
    """DOCINGEST_URL and DOCINGEST_API_KEY by default."""
    async_client: AsyncClient | None = Field(default=None, exclude=True)
    """For `ainvoke`; without one, each call opens one with `client`'s address and key."""
    top_k: int = 5
    mode: SearchMode | None = None
    filter: dict[str, Any] | None = None
    max_chunks_per_document: int | None = None
    score_threshold: float | None = None
    rerank: bool | dict[str, Any] | None = None
    expand: dict[str, Any] | None = None

    def _options(self) -> dict[str, Any]:
        return {
            "top_k": self.top_k,
            "mode": self.mode,
            "filter": self.filter,
            "max_chunks_per_document": self.max_chunks_per_document,
            "score_threshold": self.score_threshold,
            "rerank": self.rerank,
            "expand": self.expand,
        }

    def _documents(self, response: SearchResponse) -> list[Document]:
        return [
            Document(
                page_content=hit.best_text,
                metadata=hit_fields(hit, index=self.index),
                id=hit_id(hit, index=self.index),
            )
            for hit in response.results
        ]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self._documents(self.client.search(self.index, query, **self._options()))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.async_client is not None:
            response = await self.async_client.search(self.index, query, **self._options())
        else:  # one for this call: an httpx AsyncClient belongs to the event loop it ran in
            async with self.client.to_async() as client:
                response = await client.search(self.index, query, **self._options())
        return self._documents(response)
