"""An S3-compatible server for tests: moto's server mode (it speaks the S3 REST API) on a free
loopback port, in a thread, with a client to fill its buckets."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

ACCESS_KEY = "test-access-key"
SECRET_KEY = "test-secret-key-never-shown"


@dataclass(frozen=True)
class S3Server:
    endpoint_url: str
    client: Any
    """A boto3 S3 client of the server."""

    def config(self, bucket: str, **more: Any) -> dict[str, Any]:
        """An `s3` source's config for `bucket` on this server."""
        return {
            "bucket": bucket,
            "endpoint_url": self.endpoint_url,
            "region": "us-east-1",
            "access_key_id": ACCESS_KEY,
            "secret_access_key": SECRET_KEY,
            **more,
        }


@contextmanager
def s3_server() -> Iterator[S3Server]:
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
        )
        yield S3Server(endpoint, client)
        client.close()
    finally:
        server.stop()
