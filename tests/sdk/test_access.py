"""Access control from the client side, against a real `docingest serve`: the SDK sends a
service key's principals (given, or from DOCINGEST_PRINCIPALS), makes and revokes keys, sets
and changes access lists; and the command line, the MCP server and the LangChain and
LlamaIndex retrievers, which all read through the SDK, see only what their key may see."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import docingest
from docingest.adapters import langchain, llamaindex
from tests.support.docingest_service import DOCINGEST, ServiceEnv

INDEX = "sdk-access"
QUERY = "harbour quay lease"
LEGAL = b"Harbour lease terms: the quay rent rises in March, says the legal memo."
HR = b"Harbour staffing: the quay crew grows in March, says the hr memo."


@pytest.fixture(scope="module")
def admin(sdk_serve: ServiceEnv) -> Iterator[docingest.Client]:
    """No DOCINGEST_API_KEYS: a request without a key is an admin."""
    with docingest.Client(sdk_serve.base_url) as client:
        client.ingest(INDEX, LEGAL, filename="legal.txt", access=["group:legal"])
        client.ingest(INDEX, HR, filename="hr.txt", access=["group:hr"])
        yield client


@pytest.fixture(scope="module")
def service_key(admin: docingest.Client) -> str:
    made = admin.create_key("portal", role="service", indexes=[INDEX])
    assert made.key and made.role == "service"
    return made.key


def found(response: Any) -> set[str]:
    return {hit.document_id for hit in response.results}


def test_the_sdk_acts_for_the_principals_it_is_given(
    sdk_serve: ServiceEnv, admin: docingest.Client, service_key: str
) -> None:
    assert found(admin.search(INDEX, QUERY, top_k=10)) == {"legal.txt", "hr.txt"}
    with docingest.Client(
        sdk_serve.base_url, api_key=service_key, principals=["group:legal"]
    ) as legal:
        assert found(legal.search(INDEX, QUERY, top_k=10)) == {"legal.txt"}
        assert [d.document_id for d in legal.iter_documents(INDEX)] == ["legal.txt"]
        with pytest.raises(docingest.NotFound):
            legal.get_document(INDEX, "hr.txt")
        assert asyncio.run(_async_search(legal)) == {"legal.txt"}
    with docingest.Client(sdk_serve.base_url, api_key=service_key) as nobody:
        assert found(nobody.search(INDEX, QUERY, top_k=10)) == set()  # public only


async def _async_search(client: docingest.Client) -> set[str]:
    async with client.to_async() as same:
        return found(await same.search(INDEX, QUERY, top_k=10))


def test_principals_come_from_the_environment_when_not_given(
    sdk_serve: ServiceEnv, service_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCINGEST_PRINCIPALS", "group:hr")
    with docingest.Client(sdk_serve.base_url, api_key=service_key) as hr:
        assert found(hr.search(INDEX, QUERY, top_k=10)) == {"hr.txt"}


def test_an_access_list_is_changed_and_a_key_revoked(
    sdk_serve: ServiceEnv, admin: docingest.Client
) -> None:
    made = admin.create_key("ana", role="user", principals=["user:ana"])
    assert made.id in {key.id for key in admin.list_keys()}
    with docingest.Client(sdk_serve.base_url, api_key=made.key) as ana:
        assert found(ana.search(INDEX, QUERY, top_k=10)) == set()
        changed = admin.update_access(INDEX, "hr.txt", ["group:hr", "user:ana"])
        assert changed.access == ["group:hr", "user:ana"]
        assert found(ana.search(INDEX, QUERY, top_k=10)) == {"hr.txt"}
        admin.revoke_key(made.id)
        with pytest.raises(docingest.DocingestError) as refused:
            ana.search(INDEX, QUERY)
        assert refused.value.code == "unauthorized"
    admin.update_access(INDEX, "hr.txt", ["group:hr"])


def test_the_retrievers_see_only_what_their_client_may(
    sdk_serve: ServiceEnv, service_key: str
) -> None:
    with docingest.Client(
        sdk_serve.base_url, api_key=service_key, principals=["group:legal"]
    ) as legal:
        documents = langchain.DocingestRetriever(index=INDEX, client=legal, top_k=10).invoke(QUERY)
        assert {doc.metadata["document_id"] for doc in documents} == {"legal.txt"}
        nodes = llamaindex.DocingestRetriever(INDEX, client=legal, top_k=10).retrieve(QUERY)
        assert {node.node.metadata["document_id"] for node in nodes} == {"legal.txt"}


def environ(sdk_serve: ServiceEnv, key: str, principals: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCINGEST_")}
    return env | {
        "DOCINGEST_URL": sdk_serve.base_url,
        "DOCINGEST_API_KEY": key,
        "DOCINGEST_PRINCIPALS": principals,
    }


def test_the_command_line_and_the_mcp_server_read_as_their_key(
    sdk_serve: ServiceEnv, service_key: str
) -> None:
    env = environ(sdk_serve, service_key, "group:hr")
    shown = subprocess.run(
        [str(DOCINGEST), "search", QUERY, "--index", INDEX, "--top-k", "10", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert {hit["document_id"] for hit in json.loads(shown.stdout)["results"]} == {"hr.txt"}

    params = StdioServerParameters(command=str(DOCINGEST), args=["mcp"], env=env)

    async def scenario() -> dict[str, Any]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("search", {"index": INDEX, "query": QUERY})
            assert not result.is_error, result.content
            return dict(result.structured_content or {})

    answer = asyncio.run(scenario())
    assert {hit["document_id"] for hit in answer["results"]} == {"hr.txt"}
