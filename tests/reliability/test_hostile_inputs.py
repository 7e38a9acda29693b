"""A recordings folder from a pull request is untrusted input: each probe a hostile contributor (or a bad
day) could bring, against a real `semula proxy`, real files, links and FIFOs, and real clients.

Every test asserts that nothing outside the folder changed (the surrounding tree is hashed before and
after), that a bad file is named and costs only itself, and that the good recordings keep serving.
The admin file and the Postgres store have their own files (test_hostile_admin.py, test_hostile_postgres.py).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import semula_fork
from e2e_helpers import FakeProvider, clean_env, curl, semula_cmd, uniq

pytestmark = pytest.mark.e2e

PLANTED_KEY = "sk-proj-PLANTEDhostileKEY0123456789abcdefABCDEFxyz"
CHAT = "https://api.openai.com/v1/chat/completions"


def chat(prompt: str) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": prompt}]}


def ask(proxy: Any, prompt: str) -> Any:
    return curl(CHAT, proxy_url=proxy.proxy_url, ca_path=proxy.ca_path, data=chat(prompt),
                headers=["authorization: Bearer sk-test-not-a-real-key"])


def answer(result: Any) -> str:
    assert result.status == 200, (result.status, result.body, result.stderr)
    return json.loads(result.body)["choices"][0]["message"]["content"]


def tree_hash(root: Path, skip: Path) -> dict[str, str]:
    """Every file under `root` but those under `skip` (the recordings folder and the data dirs), by content."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_relative_to(skip) or path.is_symlink() or not path.is_file():
            continue
        out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def recording_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.json") if not any(part.startswith(("_", ".")) for part in
                                                                p.relative_to(folder).parts))


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return semula_fork.run([*semula_cmd(), *args], env=clean_env(), timeout=120, cwd=cwd)


def no_traceback(res: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in res.stdout + res.stderr, res.stdout + res.stderr


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory, fake_provider: FakeProvider, mitm_confdir: Path,
           dead_port: int) -> dict[str, Any]:
    """A folder of three real recordings (recorded through the proxy), and each one's prompt and answer."""
    from conftest import ProxyFactory

    factory = ProxyFactory(fake_provider, mitm_confdir, dead_port, tmp_path_factory)
    folder = tmp_path_factory.mktemp("golden") / "semula-recordings"
    prompts = [uniq(f"hostile golden {i}") for i in range(3)]
    try:
        proxy = factory("auto", extra_args=("--recordings", str(folder)))
        answers = {p: answer(ask(proxy, p)) for p in prompts}
    finally:
        factory.stop_all()
    files = {}
    for path in recording_files(folder):
        data = json.loads(path.read_text())
        files[data["request"]["messages"][-1]["text"]] = path.relative_to(folder).as_posix()
    assert set(files) == set(prompts)
    return {"folder": folder, "prompts": prompts, "answers": answers, "files": files}


@pytest.fixture
def workspace(tmp_path: Path, golden: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A copy of the golden folder in `tmp_path/repo`, with files beside it whose hashes must not change."""
    repo = tmp_path / "repo"
    folder = repo / "semula-recordings"
    shutil.copytree(golden["folder"], folder, symlinks=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "precious.txt").write_text("do not touch\n")
    (repo / "README.md").write_text("a project\n")
    before = tree_hash(tmp_path, folder)
    yield {"repo": repo, "folder": folder, "outside": outside, **{k: v for k, v in golden.items() if k != "folder"}}
    after = tree_hash(tmp_path, folder)
    added = {k for k in after.keys() - before.keys() if not k.startswith(("exported/", "data", "repo/.git/", "elsewhere/linked-target/"))}
    changed = {k for k in before if before[k] != after.get(k)}
    assert not changed and not added, f"outside the recordings folder: changed {changed}, added {added}"


def load(folder: Path, rel: str) -> dict[str, Any]:
    return json.loads((folder / rel).read_text())


def save(folder: Path, rel: str, data: Any) -> None:
    path = folder / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


def replay_proxy(proxy_factory: Any, folder: Path, data_dir: Path | None = None) -> Any:
    return proxy_factory("replay", data_dir, upstream="gone", extra_args=("--recordings", str(folder)))


def assert_good_ones_serve(proxy: Any, ws: dict[str, Any], prompts: list[str] | None = None) -> None:
    for prompt in prompts or ws["prompts"]:
        assert answer(ask(proxy, prompt)) == ws["answers"][prompt]


# ------------------------------------------------------------------ 1. path traversal


def test_a_provider_that_climbs_out_is_refused_and_export_stays_inside(
        workspace: dict[str, Any], proxy_factory: Any, tmp_path: Path) -> None:
    ws = workspace
    folder = ws["folder"]
    first = ws["prompts"][0]
    hostile = load(folder, ws["files"][first])
    hostile["provider"] = hostile["request"]["provider"] = "../../../../elsewhere"
    hostile["request"]["messages"][-1]["text"] = "climb out"
    save(folder, "default/openai/v1-chat-completions/climb-out.json", hostile)
    check = run_cli("recordings", "check", str(folder))
    no_traceback(check)
    assert check.returncode == 1 and "climb-out.json" in check.stderr and "provider" in check.stderr
    proxy = replay_proxy(proxy_factory, folder)
    assert_good_ones_serve(proxy, ws)
    assert "climb-out.json" in proxy.output()
    proxy.stop()
    exported = tmp_path / "exported"
    res = run_cli("export", str(exported), "--data-dir", str(proxy.data_dir))
    no_traceback(res)
    assert res.returncode == 0, res.stderr
    assert len(recording_files(exported)) == 3
    assert all(p.resolve().is_relative_to(exported.resolve()) for p in exported.rglob("*"))


def test_a_manifest_path_that_climbs_out_is_never_deleted(workspace: dict[str, Any], proxy_factory: Any) -> None:
    ws = workspace
    proxy = replay_proxy(proxy_factory, ws["folder"])
    proxy.stop()
    manifest = proxy.data_dir / "recordings-manifest.json"
    data = json.loads(manifest.read_text())
    rel, info = next(iter(data["files"].items()))
    data["files"]["../../elsewhere/precious.txt"] = info
    manifest.write_text(json.dumps(data))
    res = run_cli("entries", "delete", str(info["entry_id"]), "--data-dir", str(proxy.data_dir))
    no_traceback(res)
    assert (ws["outside"] / "precious.txt").exists()


# ------------------------------------------------------------------ 3. response splitting


def test_a_header_with_crlf_never_reaches_the_client(workspace: dict[str, Any], proxy_factory: Any) -> None:
    ws = workspace
    folder = ws["folder"]
    target = ws["prompts"][1]
    data = load(folder, ws["files"][target])
    data["response"]["headers"].append("x-note: fine\r\nset-cookie: injected=1")
    save(folder, ws["files"][target], data)
    check = run_cli("recordings", "check", str(folder))
    assert check.returncode == 1 and "control character" in check.stderr, check.stderr
    proxy = replay_proxy(proxy_factory, folder)
    assert_good_ones_serve(proxy, ws, [p for p in ws["prompts"] if p != target])
    result = ask(proxy, target)
    assert "set-cookie" not in result.headers and "injected" not in json.dumps(result.headers)
    assert result.status != 200  # its file is skipped: a replay miss, named
    assert ws["files"][target].split("/")[-1] in proxy.output()


# ------------------------------------------------------------------ 4. a linked directory


def test_a_linked_directory_is_never_written_through(workspace: dict[str, Any], proxy_factory: Any) -> None:
    ws = workspace
    folder = ws["folder"]
    endpoint_dir = folder / "default" / "openai" / "v1-chat-completions"
    moved = ws["outside"] / "linked-target"
    shutil.move(str(endpoint_dir), str(moved))
    os.symlink(moved, endpoint_dir)
    before = sorted(p.name for p in moved.iterdir())
    proxy = proxy_factory("auto", extra_args=("--recordings", str(folder)))
    new_prompt = uniq("through the link")
    assert answer(ask(proxy, new_prompt))
    deadline = time.monotonic() + 5
    while "symbolic link" not in proxy.output() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(p.name for p in moved.iterdir()) == before, "a recording was written through the link"
    assert "symbolic link" in proxy.output()
    check = run_cli("recordings", "check", str(folder))
    assert check.returncode == 1 and "symbolic link to a directory" in check.stderr


# ------------------------------------------------------------------ 5 and 11. malformed and unservable files

MUTATIONS: dict[str, Any] = {
    "tokens-text": lambda d: d["usage"].__setitem__("prompt_tokens", "ten"),
    "usage-list": lambda d: d.__setitem__("usage", [1]),
    "upstream-fast": lambda d: d.__setitem__("upstream_ms", "fast"),
    "status-true": lambda d: d["response"].__setitem__("status", True),
    "status-huge": lambda d: d["response"].__setitem__("status", 99999),
    "status-negative": lambda d: d["response"].__setitem__("status", -5),
    "body-number": lambda d: (d["response"].pop("body_json", None), d["response"].__setitem__("body_text", 5)),
    "header-space": lambda d: d["response"]["headers"].append("bad name: x"),
    "header-colon": lambda d: d["response"]["headers"].append(":authority: x"),
    "header-unicode": lambda d: d["response"]["headers"].append("x-naïve: x"),
    "model-number": lambda d: d.__setitem__("model", 5),
}


def test_each_malformed_file_costs_only_itself(workspace: dict[str, Any], proxy_factory: Any) -> None:
    ws = workspace
    folder = ws["folder"]
    source = load(folder, ws["files"][ws["prompts"][0]])
    for name, mutate in MUTATIONS.items():
        data = copy.deepcopy(source)
        data["request"]["messages"][-1]["text"] = f"mutated {name}"
        mutate(data)
        save(folder, f"default/openai/v1-chat-completions/bad-{name}.json", data)
    (folder / "default/openai/v1-chat-completions/bad-nested.json").write_text("[" * 200_000 + "]" * 200_000)
    check = run_cli("recordings", "check", str(folder))
    no_traceback(check)
    named = {line.split(": ", 1)[0].rsplit("/", 1)[-1] for line in check.stderr.splitlines() if "bad-" in line}
    assert named == {f"bad-{n}.json" for n in [*MUTATIONS, "nested"]}, check.stderr
    assert check.returncode == 1 and "3 recording(s) load" in check.stdout
    proxy = replay_proxy(proxy_factory, folder)
    assert_good_ones_serve(proxy, ws)
    output = proxy.output()
    assert "store unavailable" not in output
    assert all(f"bad-{n}.json" in output for n in MUTATIONS)
    proxy.stop()
    imported = run_cli("import", str(folder), "--data-dir", str(proxy.data_dir.parent / "imported"))
    no_traceback(imported)
    assert imported.returncode == 1 and "3 loaded" in imported.stdout, imported.stdout + imported.stderr


# ------------------------------------------------------------------ 6. every stored recording reaches its file


def test_a_recording_whose_file_failed_is_written_later(workspace: dict[str, Any], proxy_factory: Any,
                                                        golden: dict[str, Any]) -> None:
    ws = workspace
    folder = ws["folder"]
    prompt = ws["prompts"][2]
    rel = ws["files"][prompt]
    (folder / rel).unlink()
    (folder / rel).mkdir()  # the rename onto it fails, like a full disk or a read-only folder would
    (folder / rel / "keep").write_text("x")
    stale = folder / "default" / ".tmp-0123abcd-interrupted.json"
    stale.write_text("")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    data_dir = proxy_factory.new_data_dir()
    proxy = proxy_factory("auto", data_dir, extra_args=("--recordings", str(folder)))
    assert not stale.exists(), "a crashed write's temporary file is removed at start"
    assert ".tmp-*" in (folder / ".gitignore").read_text()
    assert answer(ask(proxy, prompt))  # recorded again (its file was gone), but the write fails
    deadline = time.monotonic() + 5
    while "could not be written" not in proxy.output() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "could not be written" in proxy.output()
    proxy.stop()
    shutil.rmtree(folder / rel)
    proxy = proxy_factory("replay", data_dir, upstream="gone", extra_args=("--recordings", str(folder)))
    assert (folder / rel).is_file(), proxy.output()
    assert "written that had no file yet" in proxy.output()
    assert answer(ask(proxy, prompt))


# ------------------------------------------------------------------ 7. git checkout under a running proxy


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout


def test_a_branch_switch_serves_that_branchs_recordings(workspace: dict[str, Any], proxy_factory: Any,
                                                        fake_provider: FakeProvider) -> None:
    ws = workspace
    repo, folder = ws["repo"], ws["folder"]
    changed, moved = ws["prompts"][0], ws["prompts"][1]
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "main", cwd=repo)
    git("checkout", "-qb", "other", cwd=repo)
    other_answer = "the other branch's answer"
    data = load(folder, ws["files"][changed])
    data["response"]["body_json"]["choices"][0]["message"]["content"] = other_answer
    save(folder, ws["files"][changed], data)
    fresh = uniq("only on the other branch")
    extra = load(folder, ws["files"][moved])
    extra["request"]["messages"][-1]["text"] = fresh
    (folder / ws["files"][moved]).unlink()
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "other", cwd=repo)
    git("checkout", "-q", "main", cwd=repo)
    proxy = proxy_factory("auto", extra_args=("--recordings", str(folder)))
    assert answer(ask(proxy, changed)) == ws["answers"][changed]
    # The fresh prompt's file: recorded on the other branch by a proxy there, committed.
    other_data = proxy_factory.new_data_dir("other-data")
    git("checkout", "-q", "other", cwd=repo)
    recorder = proxy_factory("auto", other_data, extra_args=("--recordings", str(folder)))
    fresh_answer = answer(ask(recorder, fresh))
    recorder.stop()
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "fresh", cwd=repo)
    git("checkout", "-q", "main", cwd=repo)
    deadline = time.monotonic() + 20  # the running proxy's watch sees main again (a hit: nothing forwarded)
    while answer(ask(proxy, changed)) != ws["answers"][changed] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert answer(ask(proxy, changed)) == ws["answers"][changed], proxy.describe()
    calls = fake_provider.count()
    git("checkout", "-q", "other", cwd=repo)
    assert answer(ask(proxy, fresh)) == fresh_answer  # at once, before any poll: the miss looked at its file
    assert fake_provider.count() == calls, "went upstream for a recording the branch has"
    deadline = time.monotonic() + 10
    while answer(ask(proxy, changed)) != other_answer and time.monotonic() < deadline:
        time.sleep(0.2)
    assert answer(ask(proxy, changed)) == other_answer
    assert fake_provider.count() == calls
    assert git("status", "--porcelain", cwd=repo).strip() == "", "a committed file was overwritten"


# ------------------------------------------------------------------ 9. two files for one request


def test_two_files_for_one_request_are_named_and_the_other_takes_over(
        workspace: dict[str, Any], proxy_factory: Any) -> None:
    ws = workspace
    folder = ws["folder"]
    prompt = ws["prompts"][0]
    rel = ws["files"][prompt]
    twin = load(folder, rel)
    twin["response"]["body_json"]["choices"][0]["message"]["content"] = "the twin's answer"
    twin_rel = rel.replace(".json", "-twin.json")
    save(folder, twin_rel, twin)
    check = run_cli("recordings", "check", str(folder))
    assert check.returncode == 1 and "same request" in check.stderr, check.stderr
    data_dir = proxy_factory.new_data_dir()
    proxy = replay_proxy(proxy_factory, folder, data_dir)
    served = answer(ask(proxy, prompt))
    assert "same request" in proxy.output()
    proxy.stop()
    winner = rel if served == ws["answers"][prompt] else twin_rel
    assert winner == min(rel, twin_rel)
    (folder / winner).unlink()
    proxy = replay_proxy(proxy_factory, folder, data_dir)
    other = answer(ask(proxy, prompt))
    assert other != served and other in (ws["answers"][prompt], "the twin's answer")


# ------------------------------------------------------------------ 10. FIFOs and devices


def test_a_fifo_and_a_link_to_a_device_are_never_read(workspace: dict[str, Any], proxy_factory: Any) -> None:
    ws = workspace
    folder = ws["folder"]
    endpoint = folder / "default" / "openai" / "v1-chat-completions"
    os.mkfifo(endpoint / "pipe.json")
    os.symlink("/dev/zero", endpoint / "zero.json")
    started = time.monotonic()
    proxy = replay_proxy(proxy_factory, folder)
    assert time.monotonic() - started < 20
    assert_good_ones_serve(proxy, ws)
    assert "pipe.json" in proxy.output() and "zero.json" in proxy.output()
    check = run_cli("recordings", "check", str(folder))
    assert check.returncode == 1 and "pipe.json" in check.stderr and "zero.json" in check.stderr


# ------------------------------------------------------------------ 14. a key inside a file's request


def test_a_key_in_a_files_request_is_never_stored_or_printed(workspace: dict[str, Any], proxy_factory: Any) -> None:
    ws = workspace
    folder = ws["folder"]
    rel = ws["files"][ws["prompts"][0]]
    data = load(folder, rel)
    data["request"]["messages"][-1]["text"] += f" key {PLANTED_KEY}"
    data["request"]["headers"].append(["authorization", f"Bearer {PLANTED_KEY}"])
    save(folder, rel, data)
    proxy = replay_proxy(proxy_factory, folder)
    assert_good_ones_serve(proxy, ws, ws["prompts"][1:])
    proxy.stop()
    listed = run_cli("entries", "list", "--json", "--data-dir", str(proxy.data_dir))
    entry_ids = [str(row["id"]) for row in json.loads(listed.stdout)]
    assert len(entry_ids) == 3, listed.stdout
    shown = "".join(run_cli("entries", "show", e, "--data-dir", str(proxy.data_dir)).stdout for e in entry_ids)
    assert PLANTED_KEY not in shown + proxy.output()
    for path in proxy.data_dir.rglob("*"):
        if path.is_file():
            assert PLANTED_KEY.encode() not in path.read_bytes(), path


# ------------------------------------------------------------------ 15. file modes


def test_recordings_follow_the_umask(tmp_path: Path, proxy_factory: Any) -> None:
    folder = tmp_path / "semula-recordings"
    old = os.umask(0o022)
    try:
        proxy = proxy_factory("auto", extra_args=("--recordings", str(folder)))
        answer(ask(proxy, uniq("umask")))
        proxy.stop()
    finally:
        os.umask(old)
    files = recording_files(folder)
    assert files
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
        for parent in path.relative_to(folder).parents:
            if str(parent) != ".":
                assert stat.S_IMODE((folder / parent).stat().st_mode) == 0o755, parent
