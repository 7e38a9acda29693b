"""Sidecars, provenance, max_age and unused across shards, through real proxies and the real openai SDK.

One recorder (auto) writes large binary answers (the file-content endpoint, like a TTS answer) as
content-addressed sidecars beside their recordings; a replayer on a clean copy of the folder, with
the provider gone, serves them byte-exact, while each hostile reference (`../../etc/passwd`, an
absolute path, a symbolic link, a wrong hash, a huge size) refuses only its own recording, and an
aged recording under `max_age_policy: fail` is refused with the reason. A second replayer is a
second CI shard: `semula recordings unused --shard A --shard B --fail` is the gate.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import openai
import pytest

from conftest import ProxyFactory
from click.testing import CliRunner

from e2e_helpers import FakeProvider, ProxyHandle, openai_client, uniq

pytestmark = pytest.mark.e2e

SECRET = "sk-proj-" + "Zq7" * 14  # planted in the user-agent: never on disk
UA = f"OpenAI/Python sidecar-test {SECRET}"
SHARED = "file-big200-tts"  # 200 KiB, over the 64 KiB threshold; `?copy=2` gets the same bytes
HOSTILE = {"dotdot": "file-big90-dotdot", "absolute": "file-big91-absolute", "symlink": "file-big92-symlink",
           "hash": "file-big93-hash", "huge": "file-big94-huge"}
OTHER = "file-big100-other"  # used only by the second shard
PROMPT = uniq("sidecars chat")


def client(proxy: ProxyHandle) -> Any:
    return openai_client(proxy.proxy_url, proxy.ca_path, default_headers={"User-Agent": UA})


def content(proxy: ProxyHandle, file_id: str, copy: str | None = None) -> bytes:
    extra = {"extra_query": {"copy": copy}} if copy else {}
    return client(proxy).files.content(file_id, **extra).content


def chat(proxy: ProxyHandle) -> str:
    answer = client(proxy).chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": PROMPT}])
    return answer.choices[0].message.content


def directory_of(folder: Path, file_id: str) -> Path:
    (directory,) = {p.parent for p in folder.rglob("*.json") if f"-{file_id}-" in p.parent.name}
    return directory


def recording_of(folder: Path, file_id: str) -> Path:
    (path,) = directory_of(folder, file_id).glob("*.json")
    return path


def chat_file(folder: Path) -> Path:
    (path,) = [p for p in folder.rglob("*.json") if "chat-completions" in p.parent.name]
    return path


def semula(*args: str) -> Any:
    """The CLI in this process (a subprocess would import semula again: seconds on a busy runner)."""
    from semula.cli import main

    return CliRunner().invoke(main, list(args))


def lines(result: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def recorded(module_proxy_factory: ProxyFactory, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("sidecars") / "recordings"
    proxy = module_proxy_factory("auto", extra_args=("--recordings", str(folder)))
    answers = {"shared": content(proxy, SHARED), "shared2": content(proxy, SHARED, copy="2"),
               "other": content(proxy, OTHER), "chat": chat(proxy)}
    answers |= {name: content(proxy, file_id) for name, file_id in HOSTILE.items()}
    proxy.stop()
    return {"folder": folder, "answers": answers, "data_dir": proxy.data_dir}


def test_large_answers_are_sidecars_shared_by_content_with_provenance(recorded: dict[str, Any]) -> None:
    folder = recorded["folder"]
    shared_dir = directory_of(folder, SHARED)
    assert len(list(shared_dir.glob("*.json"))) == 2, "two recordings: with and without ?copy=2"
    (sidecar,) = shared_dir.glob("*.bin")
    assert sidecar.read_bytes() == recorded["answers"]["shared"] == recorded["answers"]["shared2"]
    assert sidecar.name == f"mp3-{hashlib.sha256(sidecar.read_bytes()).hexdigest()[:16]}.bin"
    for path in shared_dir.glob("*.json"):
        data = json.loads(path.read_text())
        assert path.stat().st_size < 4000 and data["response"]["body_sidecar"]["file"] == sidecar.name
        assert data["provenance"]["user_agent"].startswith("OpenAI/Python sidecar-test")
        assert data["provenance"]["semula"]
    provenance = json.loads(chat_file(folder).read_text())["provenance"]
    assert provenance["answered_model"].startswith("gpt-4o-mini")
    assert len(list(folder.rglob("*.bin"))) == 7
    for path in [*folder.rglob("*"), *recorded["data_dir"].rglob("*")]:
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), f"{path} holds the planted key"


def _spoil(folder: Path, outside: Path) -> None:
    """Each hostile reference in its own recording."""
    for name, file_id in HOSTILE.items():
        path = recording_of(folder, file_id)
        data = json.loads(path.read_text())
        ref = data["response"]["body_sidecar"]
        sidecar = path.parent / ref["file"]
        if name == "dotdot":
            ref["file"] = "../../../../etc/passwd"
        elif name == "absolute":
            ref["file"] = "/etc/passwd"
        elif name == "symlink":
            target = outside / ref["file"]
            shutil.move(sidecar, target)
            sidecar.symlink_to(target)
        elif name == "hash":
            sidecar.write_bytes(sidecar.read_bytes()[:-1] + b"!")
        elif name == "huge":
            ref["size"] = 10**15
        path.write_text(json.dumps(data, indent=2))


def _age_and_expire(folder: Path) -> None:
    path = chat_file(folder)
    data = json.loads(path.read_text())
    data["recorded_at"] = "2020-01-01T00:00:00"
    path.write_text(json.dumps(data, indent=2))
    (folder / "default" / "_settings.json").write_text(json.dumps(
        {"format": "semula-settings/1", "project": "default", "settings": {"max_age": "365d", "max_age_policy": "fail"}}))


@pytest.fixture(scope="module")
def shards(recorded: dict[str, Any], module_proxy_factory: ProxyFactory, fake_provider: FakeProvider,
           tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("copies")
    clean = base / "clean"
    shutil.copytree(recorded["folder"], clean, symlinks=True)
    spoiled = base / "spoiled"
    shutil.copytree(recorded["folder"], spoiled, symlinks=True)
    _spoil(spoiled, base)
    _age_and_expire(spoiled)
    before = fake_provider.count()
    one = module_proxy_factory("replay", module_proxy_factory.new_data_dir("shard1"), upstream="gone",
                               extra_args=("--recordings", str(spoiled)))
    replayed = {"shared": content(one, SHARED), "shared2": content(one, SHARED, copy="2")}
    refusals = {}
    for name, file_id in HOSTILE.items():
        with pytest.raises(openai.NotFoundError) as refused:
            content(one, file_id)
        refusals[name] = str(refused.value)
    with pytest.raises(openai.NotFoundError) as expired:
        chat(one)
    two = module_proxy_factory("replay", module_proxy_factory.new_data_dir("shard2"), upstream="gone",
                               extra_args=("--recordings", str(clean)))
    replayed["other"] = content(two, OTHER)
    for proxy in (one, two):
        proxy.stop()  # waits for the call log's flush
    return {"clean": clean, "spoiled": spoiled, "one": one, "two": two, "replayed": replayed,
            "refusals": refusals, "expired": str(expired.value), "upstream_calls": fake_provider.count() - before}


def test_replay_from_a_clean_copy_is_byte_exact_and_offline(recorded: dict[str, Any], shards: dict[str, Any]) -> None:
    for name, body in shards["replayed"].items():
        assert body == recorded["answers"][name], name
    assert shards["upstream_calls"] == 0


def test_a_hostile_reference_refuses_only_its_own_recording(shards: dict[str, Any]) -> None:
    assert set(shards["refusals"]) == set(HOSTILE)
    assert all("no recording matches" in text for text in shards["refusals"].values())
    output = shards["one"].output()
    for problem in ("not a sidecar name", "symbolic link", "sha256 is not the recording's", "is not a number of bytes"):
        assert problem in output, problem
    check = semula("recordings", "check", str(shards["spoiled"]))
    assert check.exit_code == 1 and ", 5 bad" in check.stdout, check.output
    assert sorted(line.split(":")[0].rsplit("/", 2)[-2] for line in check.stderr.splitlines()) == \
        sorted(f"v1-files-{file_id}-content" for file_id in HOSTILE.values()), check.stderr


def test_max_age_fail_refuses_in_replay_and_stale_lists_it(shards: dict[str, Any]) -> None:
    assert "recording older than max_age 365d" in shards["expired"]
    stale = semula("recordings", "stale", str(shards["spoiled"]), "--json")
    rows = lines(stale)
    assert stale.exit_code == 0 and len(rows) == 1, stale.output
    assert rows[0]["file"] == chat_file(shards["spoiled"]).relative_to(shards["spoiled"]).as_posix()
    assert rows[0]["sdk"].startswith("OpenAI/Python sidecar-test") and rows[0]["model"].startswith("gpt-4o-mini")
    assert rows[0]["age"].endswith("d") and rows[0]["max_age"] == "365d"


def test_unused_across_shards_is_a_ci_gate(shards: dict[str, Any]) -> None:
    one, two, clean = shards["one"].data_dir, shards["two"].data_dir, shards["clean"]
    gate = ("--data-dir", str(two), "--shard", str(one), "--shard", str(two), "--fail", "--json")
    both = semula("recordings", "unused", str(clean), *gate)
    unused = {directory_of(clean, file_id).relative_to(clean).as_posix() for file_id in HOSTILE.values()}
    assert both.exit_code == 1 and {row["file"].rpartition("/")[0] for row in lines(both)} == unused, both.output
    # shard two alone never asked for SHARED (shard one did); OTHER only shard two did; the aged chat was asked for
    trimmed = clean.parent / "trimmed"
    shutil.copytree(clean, trimmed, symlinks=True)
    for file_id in HOSTILE.values():
        shutil.rmtree(directory_of(trimmed, file_id))
    passed = semula("recordings", "unused", str(trimmed), *gate)
    assert passed.exit_code == 0 and lines(passed) == [], passed.output
