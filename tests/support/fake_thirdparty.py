"""Answers a third-party suite met behind an extra host: a redirect, and raw text labelled JSON.

`GET /go/<name>` answers `302 Found` with `Location: /media/<name>` (the CDN image the fake serves), as a
media host sends a download to its CDN: a deterministic answer the client follows. The call is
counted, so a replay that reached the fake would show. `POST /upload/v1beta/fileSearchStores/<store>:
uploadToFileSearchStore` takes the file's raw text labelled `application/json` (google-genai's
file-search upload does) and answers a finished operation naming the text's size and hash, so other
text gets another answer.

Registered into the fake's ROUTES by `routes(fakeprovider_module)` (see tests/support/fake_vertex.py);
the redirect is a GET, which `fakeprovider.Handler.do_GET` asks `redirect_target` about.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any

REDIRECT = re.compile(r"/go/(?P<name>[A-Za-z0-9._-]{1,80})")
# `GET /signed/<name>` redirects to a presigned URL, as S3 does: a new signature every time.
SIGNED_REDIRECT = re.compile(r"/signed/(?P<name>[A-Za-z0-9._-]{1,80})")
CDN_HOST = "files.semula-test-cdn.example"  # an extra host the tests map to the fake
SIGNING_KEY_ID = "AKIAIOSFODNN7EXAMPLE"  # a planted access key id: it must reach no file


def redirect_target(path: str) -> str | None:
    """Where `GET path` is redirected to, or None when it is not a redirecting path."""
    if match := REDIRECT.fullmatch(path):
        return f"/media/{match.group('name')}"
    if match := SIGNED_REDIRECT.fullmatch(path):
        signature = hashlib.sha256(os.urandom(16)).hexdigest()
        return (f"https://user:pa55w0rd@{CDN_HOST}/media/{match.group('name')}?X-Amz-Algorithm=AWS4-HMAC-SHA256"
                f"&X-Amz-Credential={SIGNING_KEY_ID}%2F20261205%2Fus-east-1%2Fs3%2Faws4_request"
                f"&X-Amz-Expires=300&X-Amz-Signature={signature}")
    return None


def routes(fake: Any) -> list[Any]:
    def upload_to_file_search_store(call: Any) -> Any:
        digest = hashlib.sha256(call.raw).hexdigest()[:16]
        store = call.path_params["store"]
        return fake.Reply(200, {
            "name": f"fileSearchStores/{store}/upload/operations/op-{digest}", "done": True,
            "response": {"@type": "type.googleapis.com/google.ai.generativelanguage.v1main.UploadToFileSearchStoreResponse",
                         "documentName": f"fileSearchStores/{store}/documents/doc-{digest}",
                         "sizeBytes": str(len(call.raw)), "mimeType": call.content_type.split(";")[0]},
        })

    return [fake.Route("gemini", re.compile(r"/upload/v1beta/fileSearchStores/(?P<store>[a-z0-9-]{1,40})"
                                            r":uploadToFileSearchStore"), upload_to_file_search_store, raw_body=True)]
