"""Create, replace and delete one object only if it is as expected: the compare-and-swap that the
writer lease on object storage is built on (:mod:`._lease`).

Two kinds, the same four calls (``create``, ``replace``, ``read``, ``delete``); a *version*
names one content of the object (``replace`` and ``delete`` act only on the version read):

- :class:`ConditionalObjects`: S3's conditional requests, sent through boto3 (pyarrow's S3
  client sends none): ``PutObject`` with ``If-None-Match: *`` creates the key only if it is
  free, with ``If-Match: <etag>`` replaces only the version read, ``DeleteObject`` with
  ``If-Match`` deletes only that version. The server decides, so of two writers racing for
  the same key exactly one wins (AWS S3, MinIO and moto implement them). The version is the ETag.
- :class:`PlainObjects`: any pyarrow filesystem: check, write, read back. Two writers within
  the time of one request may both believe they won; used where conditional requests are not
  to be had (boto3 missing, another object store, a server that ignores the headers). The
  version is a hash of the content.

:func:`objects_for` picks the kind for a filesystem; the S3 client gets the endpoint, region
and credentials of the pyarrow ``S3FileSystem`` it stands in for (or, where that has none, the
same defaults: ``AWS_*`` variables, ``~/.aws``, the instance's role).
"""

from __future__ import annotations

import hashlib
from typing import Any, Protocol

import pyarrow.fs as pafs

from .._fs import exists

S3_EXTRA = "pip install 'seed-sweep[s3]'"  # what brings boto3


class Objects(Protocol):
    atomic: bool  # the store decides (conditional requests), not a check before the write

    def create(self, key: str, body: bytes) -> str | None:
        """Write ``body`` at ``key`` if no object is there: its version, or None (taken)."""
        ...

    def replace(self, key: str, body: bytes, version: str) -> str | None:
        """Write ``body`` at ``key`` if the object there is ``version``: the new version, or None."""
        ...

    def read(self, key: str) -> tuple[bytes, str] | None:
        """``(content, version)`` of ``key``, or None if there is no such object."""
        ...

    def delete(self, key: str, version: str) -> None:
        """Delete ``key`` if the object there is still ``version``."""
        ...


def _version(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


class PlainObjects:
    """:class:`Objects` on any pyarrow filesystem, by check, write and read back (not atomic)."""

    atomic = False

    def __init__(self, fs: pafs.FileSystem):
        self.fs = fs

    def read(self, key: str) -> tuple[bytes, str] | None:
        try:
            with self.fs.open_input_stream(key) as f:
                body = f.read()
        except FileNotFoundError:
            return None
        return body, _version(body)

    def _write(self, key: str, body: bytes) -> str | None:
        with self.fs.open_output_stream(key) as f:
            f.write(body)
        now = self.read(key)  # another writer's content here means it won
        return _version(body) if now is not None and now[0] == body else None

    def create(self, key: str, body: bytes) -> str | None:
        return None if exists(self.fs, key) else self._write(key, body)

    def replace(self, key: str, body: bytes, version: str) -> str | None:
        now = self.read(key)
        return self._write(key, body) if now is not None and now[1] == version else None

    def delete(self, key: str, version: str) -> None:
        now = self.read(key)
        if now is not None and now[1] == version:
            self.fs.delete_file(key)


_LOST_RACE = {"PreconditionFailed", "ConditionalRequestConflict"}  # 412; 409: a concurrent conditional write won


class ConditionalObjects:
    """:class:`Objects` on S3 through boto3's conditional requests (atomic: the server decides)."""

    atomic = True

    def __init__(self, client: Any):
        self.client = client

    @staticmethod
    def _split(key: str) -> tuple[str, str]:
        bucket, _, name = key.partition("/")
        return bucket, name

    def _call(self, method: str, key: str, **kwargs: Any) -> Any:
        """The response, or None where the condition failed or the key does not exist."""
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, name = self._split(key)
        try:
            return getattr(self.client, method)(Bucket=bucket, Key=name, **kwargs)
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "")
            if code in _LOST_RACE or code in ("NoSuchKey", "404"):
                return None
            raise OSError(f"s3://{key}: {method} failed ({code}: {e.response.get('Error', {}).get('Message')})") from e
        except BotoCoreError as e:  # no connection, no credentials, ...
            raise OSError(f"s3://{key}: {method} failed ({e})") from e

    def create(self, key: str, body: bytes) -> str | None:
        response = self._call("put_object", key, Body=body, IfNoneMatch="*")
        return None if response is None else response["ETag"]

    def replace(self, key: str, body: bytes, version: str) -> str | None:
        response = self._call("put_object", key, Body=body, IfMatch=version)
        return None if response is None else response["ETag"]

    def read(self, key: str) -> tuple[bytes, str] | None:
        response = self._call("get_object", key)
        return None if response is None else (response["Body"].read(), response["ETag"])

    def delete(self, key: str, version: str) -> None:
        self._call("delete_object", key, IfMatch=version)


def s3_client(fs: pafs.S3FileSystem) -> Any:
    """A boto3 S3 client with the endpoint, region, credentials and addressing of ``fs``.

    pyarrow exposes a filesystem's settings only through its pickling (``__reduce__``), which
    holds the keyword arguments that rebuild it. Raises ``ImportError`` without boto3, and
    ``ValueError`` for settings boto3 cannot mirror here (an assumed role)."""
    from boto3.session import Session
    from botocore import UNSIGNED
    from botocore.config import Config

    options: dict[str, Any] = fs.__reduce__()[1][0]
    if options.get("role_arn"):
        raise ValueError("the filesystem assumes a role (role_arn)")
    endpoint = options.get("endpoint_override") or None
    if endpoint and "://" not in endpoint:
        endpoint = f"{options.get('scheme') or 'https'}://{endpoint}"
    style = "virtual" if options.get("force_virtual_addressing") else "path" if endpoint else "auto"
    config = Config(
        s3={"addressing_style": style},
        retries={"mode": "standard"},
        signature_version=UNSIGNED if options.get("anonymous") else None,
    )
    credentials = (
        {
            "aws_access_key_id": options["access_key"],
            "aws_secret_access_key": options.get("secret_key"),
            "aws_session_token": options.get("session_token") or None,
        }
        if options.get("access_key")
        else {}
    )
    return Session().client(
        "s3",
        endpoint_url=endpoint,
        region_name=fs.region or None,
        verify=options.get("tls_ca_file_path") or None,
        config=config,
        **credentials,
    )


def objects_for(fs: pafs.FileSystem) -> tuple[Objects, str | None]:
    """``(objects, why)`` for ``fs``: conditional requests on S3 where boto3 can make them, else
    plain ones, with ``why`` saying why not (None: conditional, or a filesystem other than S3,
    where nothing better is to be had). Keys are paths of ``fs``."""
    if not isinstance(fs, pafs.S3FileSystem):
        return PlainObjects(fs), None
    try:
        return ConditionalObjects(s3_client(fs)), None
    except ImportError:
        return PlainObjects(fs), f"boto3 is not installed ({S3_EXTRA})"
    except (ValueError, KeyError, IndexError, TypeError) as e:  # settings this client cannot copy
        return PlainObjects(fs), f"an S3 client like this filesystem's cannot be made ({e})"
