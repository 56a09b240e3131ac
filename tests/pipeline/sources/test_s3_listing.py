"""The `s3` reader against moto's S3 server: a listing longer than one ListObjectsV2 page is
read whole through continuation tokens, and items are fetched by key."""

from __future__ import annotations

from pathlib import Path

from docingest.pipeline.sources.s3 import S3, S3Config
from tests.support.s3_server import s3_server
from tests.support.settings import service_settings


def test_a_listing_of_more_than_one_page_is_read_whole(tmp_path: Path) -> None:
    settings = service_settings(tmp_path, "unused:", None, sources_allow_private=True)
    with s3_server() as server:
        server.client.create_bucket(Bucket="many-bucket")
        keys = [f"k/{number:05}.txt" for number in range(2345)]
        for key in keys:
            server.client.put_object(Bucket="many-bucket", Key=key, Body=key.encode())
        config = S3Config.model_validate(server.config("many-bucket"))
        S3.check(config, settings)
        reader = S3.open(config, settings)
        try:
            found = list(reader.walk({}, lambda: tmp_path / "unused"))
            assert [entry.item.document_id for entry in found] == keys
            fetched = reader.fetch(found[7].item, tmp_path / "one")
        finally:
            reader.close()
        assert (tmp_path / "one").read_bytes() == keys[7].encode()
        assert fetched.size == len(keys[7])
        assert found[7].item.fingerprint == f"{found[7].item.etag}:{len(keys[7])}"
