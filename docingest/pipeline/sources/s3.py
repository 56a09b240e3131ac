"""The `s3` source: a bucket of any S3-compatible store (AWS, MinIO, Cloudflare R2, GCS's
interoperability API) through boto3.

boto3 rather than httpx with hand-made SigV4: it signs, pages `ListObjectsV2` with
continuation tokens, retries throttling, and names the store's errors, for every store above.
An item is an object (not a "folder/" marker); its document id is its key, its fingerprint
its ETag and size. A custom endpoint is checked by the sources' address rule when saved and
at the start of every run (boto3 resolves the name itself when it connects).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from docingest.pipeline.errors import SourceUnreadable
from docingest.pipeline.settings import Settings
from docingest.pipeline.sources.base import (
    Fetched,
    Found,
    Item,
    ItemFailed,
    Known,
    SourceType,
    copy_limited,
    max_item_bytes,
)
from docingest.pipeline.sources.globs import MAX_GLOBS, selected
from docingest.pipeline.sources.targets import check_source_url

PAGE_SIZE = 1000
"""Keys per ListObjectsV2 page (the most S3 returns)."""
_DENIED = {
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
    "AllAccessDisabled",
    "403",
}
_MISSING_BUCKET = {"NoSuchBucket", "404"}


class S3Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    bucket: str = Field(min_length=1, max_length=255)
    prefix: str = Field(default="", max_length=1024)
    endpoint_url: str | None = Field(default=None, max_length=2048)
    region: str | None = Field(default=None, max_length=64)
    access_key_id: str | None = Field(default=None, max_length=256)
    secret_access_key: str | None = Field(default=None, max_length=1024)
    include: list[str] = Field(default_factory=list, max_length=MAX_GLOBS)
    exclude: list[str] = Field(default_factory=list, max_length=MAX_GLOBS)


def check(config: S3Config, settings: Settings) -> None:
    if config.endpoint_url is not None:
        check_source_url(config.endpoint_url, settings, what="S3 endpoint_url")


def _code(exc: Exception) -> str:
    response: Any = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


class S3Reader:
    def __init__(self, config: S3Config, settings: Settings) -> None:
        import boto3  # the service's dependency, imported where a bucket is read
        from botocore.config import Config

        self._config = config
        self._limit = max_item_bytes(settings)
        timeout = settings.source_request_timeout_seconds
        self._client = boto3.session.Session().client(
            "s3",
            endpoint_url=config.endpoint_url,
            region_name=config.region or "us-east-1",
            aws_access_key_id=config.access_key_id,
            aws_secret_access_key=config.secret_access_key,
            config=Config(
                connect_timeout=timeout,
                read_timeout=timeout,
                retries={"max_attempts": 3, "mode": "standard"},
                # Path-style for a custom endpoint: MinIO and most self-hosted stores have no
                # wildcard DNS for bucket names.
                s3={"addressing_style": "path" if config.endpoint_url else "auto"},
                # Never read credentials from the server's own environment or files when a
                # source gives none: an anonymous (unsigned) request instead.
                **({} if config.access_key_id else {"signature_version": _unsigned()}),
            ),
        )

    def walk(self, known: Known, staging: Callable[[], Path]) -> Iterator[Found]:
        from botocore.exceptions import BotoCoreError, ClientError

        paginator = self._client.get_paginator("list_objects_v2")
        pages = paginator.paginate(
            Bucket=self._config.bucket,
            Prefix=self._config.prefix,
            PaginationConfig={"PageSize": PAGE_SIZE},
        )
        try:
            for page in pages:
                for entry in page.get("Contents", []):
                    key = entry["Key"]
                    if key.endswith("/"):
                        continue
                    if not selected(key, self._config.include, self._config.exclude):
                        continue
                    etag = str(entry.get("ETag", "")).strip('"')
                    size = int(entry.get("Size", 0))
                    modified = entry.get("LastModified")
                    yield Found(
                        Item(
                            document_id=key,
                            uri=f"s3://{self._config.bucket}/{key}",
                            fingerprint=f"{etag}:{size}",
                            filename=PurePosixPath(key).name or key,
                            etag=etag,
                            last_modified=modified.isoformat().replace("+00:00", "Z")
                            if modified is not None
                            else None,
                            size=size,
                        )
                    )
        except ClientError as exc:
            raise _unreadable(self._config.bucket, exc) from exc
        except BotoCoreError as exc:
            raise SourceUnreadable(
                "source_unreachable", f"The S3 store cannot be reached: {exc}."
            ) from exc

    def fetch(self, item: Item, destination: Path) -> Fetched:
        from botocore.exceptions import BotoCoreError, ClientError

        if item.size is not None and item.size > self._limit:
            raise ItemFailed(
                "document_too_large",
                f"The object is {item.size} bytes, more than the limit of {self._limit}.",
            )
        try:
            answer = self._client.get_object(Bucket=self._config.bucket, Key=item.document_id)
            body = answer["Body"]
            try:
                fetched = copy_limited(body.read, destination, limit=self._limit)
            finally:
                body.close()
        except ClientError as exc:
            raise ItemFailed("source_error", f"Cannot read {item.uri}: {_code(exc)}.") from exc
        except BotoCoreError as exc:
            raise ItemFailed("source_unreachable", f"Cannot read {item.uri}: {exc}.") from exc
        return Fetched(fetched.size, fetched.sha256, answer.get("ContentType"))

    def close(self) -> None:
        self._client.close()


def _unsigned() -> Any:
    from botocore import UNSIGNED

    return UNSIGNED


def _unreadable(bucket: str, exc: Exception) -> SourceUnreadable:
    code = _code(exc)
    if code in _MISSING_BUCKET:
        return SourceUnreadable("bucket_not_found", f"The bucket {bucket!r} does not exist.")
    if code in _DENIED:
        return SourceUnreadable(
            "access_denied", f"The S3 store refused the credentials for {bucket!r} ({code})."
        )
    return SourceUnreadable("source_error", f"The S3 store answered {code or 'an error'}.")


S3 = SourceType(
    name="s3",
    config=S3Config,
    secrets=frozenset({"secret_access_key"}),
    check=check,
    open=S3Reader,
)
