"""A store file deleted under a running proxy is noticed (reliability item 6).

Recordings made after the file was deleted used to be acknowledged, then were gone at stop.
The store thread now compares the file's device and inode with those at open before each
write: it says so once on the console and the call log says `recorded` false with the reason.
"""

from __future__ import annotations

import pytest

from conftest import ProxyFactory
from e2e_helpers import openai_client, read_call_log, uniq

pytestmark = pytest.mark.e2e


def test_recordings_after_the_store_file_was_deleted_are_not_acknowledged(proxy_factory: ProxyFactory) -> None:
    proxy = proxy_factory("auto")
    client = openai_client(proxy.proxy_url, proxy.ca_path)
    run = uniq("deleted")

    def ask(text: str) -> str:
        return client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": text}]).choices[0].message.content

    before = ask(f"before the delete {run}")
    (proxy.data_dir / "semula.duckdb").unlink()
    ask(f"after the delete {run}")
    ask(f"after the delete again {run}")
    assert ask(f"before the delete {run}") == before, "recordings in memory still serve hits"
    proxy.stop()
    warnings = [line for line in proxy.output().splitlines() if line.startswith("semula: WARNING: the store file")]
    assert len(warnings) == 1, proxy.describe()
    rows = read_call_log(proxy.data_dir)
    assert [(r["decision"], r["recorded"]) for r in rows] == [
        ("miss", True), ("miss", False), ("miss", False), ("hit", False)], rows
    assert all("was deleted or replaced" in (r["error"] or "") for r in rows[1:3]), rows
