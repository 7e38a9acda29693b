"""Recordings that travel: record into a folder, commit it, clone it, replay in CI with an empty data dir.

The client script is what a user's test does: the official SDKs with their default clients, which
find the proxy and its CA through the environment `semula exec` sets.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import semula_fork
from e2e_helpers import FakeProvider, clean_env, proxy_test_args, semula_cmd, uniq

pytestmark = pytest.mark.e2e

PLANTED_KEY = "sk-proj-PLANTEDrecordingsKEY0123456789abcdefABCDEF"
CALLS = """
import json, sys
import anthropic, openai
prompt = sys.argv[1]
out = {}
oa = openai.OpenAI(api_key=sys.argv[2], base_url="https://api.openai.com/v1", max_retries=0)
out["plain"] = oa.chat.completions.create(
    model="gpt-4o-mini", messages=[{"role": "user", "content": prompt + " plain"}]).choices[0].message.content
stream = oa.chat.completions.create(model="gpt-4o-mini", stream=True,
                                    messages=[{"role": "user", "content": prompt + " streamed"}])
out["events"] = [c.model_dump(exclude_none=True) for c in stream]
an = anthropic.Anthropic(api_key="sk-ant-test-recordings", base_url="https://api.anthropic.com", max_retries=0)
out["anthropic"] = an.messages.create(model="claude-haiku-5-5", max_tokens=64,
                                      messages=[{"role": "user", "content": prompt + " anthropic"}]).content[0].text
print("RESULT " + json.dumps(out, sort_keys=True))
"""


def run_exec(mode: str, data_dir: Path, recordings: Path, confdir: Path, upstream_port: int, prompt: str,
             cwd: Path) -> dict:
    argv = [*semula_cmd(), "exec", "--mode", mode, "--data-dir", str(data_dir), "--recordings", str(recordings),
            *proxy_test_args(confdir, upstream_port), "--", sys.executable, "-c", CALLS, prompt, PLANTED_KEY]
    res = subprocess.run(argv, capture_output=True, text=True, env=clean_env(), timeout=180, cwd=cwd)
    lines = [line for line in res.stdout.splitlines() if line.startswith("RESULT ")]
    assert res.returncode == 0 and lines, f"exit {res.returncode}\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}"
    return json.loads(lines[-1][len("RESULT "):])


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd, check=True,
                   capture_output=True)


def test_recordings_committed_and_cloned_replay_in_ci_with_an_empty_data_dir(
        tmp_path: Path, fake_provider: FakeProvider, mitm_confdir: Path, dead_port: int) -> None:
    repo = tmp_path / "project"
    repo.mkdir()
    prompt = uniq("travel")
    recorded = run_exec("auto", tmp_path / "local-data", repo / "semula-recordings", mitm_confdir,
                        fake_provider.port, prompt, cwd=repo)
    files = sorted(p for p in (repo / "semula-recordings").rglob("*.json") if not p.name.startswith("_"))
    assert len(files) == 3, files
    for path in (repo / "semula-recordings").rglob("*"):
        if path.is_file():
            assert PLANTED_KEY.encode() not in path.read_bytes(), f"the key reached {path}"
    texts = "\n".join(p.read_text() for p in files)
    assert prompt in texts and recorded["plain"] in texts, "a reviewer must read the prompt and the answer"
    assert (repo / "semula-recordings" / "_semula.json").is_file(), "the salt of secrets' tags travels with the folder"

    git("init", "-q", ".", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "recordings", cwd=repo)
    clone = tmp_path / "ci-checkout"
    git("clone", "-q", str(repo), str(clone), cwd=tmp_path)

    before = fake_provider.count()
    replayed = run_exec("replay", clone / ".semula", clone / "semula-recordings", mitm_confdir, dead_port, prompt,
                        cwd=clone)
    assert replayed == recorded, "the clone must replay identical answers, streamed events included"
    assert fake_provider.count() == before


def semula(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return semula_fork.run([*semula_cmd(), *args], env=clean_env(), timeout=120, cwd=cwd)


def test_bad_files_are_named_and_skipped_check_fails_and_unused_lists_what_the_last_run_did_not_use(
        tmp_path: Path, fake_provider: FakeProvider, mitm_confdir: Path) -> None:
    repo = tmp_path / "project"
    repo.mkdir()
    folder, data = repo / "semula-recordings", tmp_path / "data"
    prompt = uniq("unused")
    run_exec("auto", data, folder, mitm_confdir, fake_provider.port, prompt, cwd=repo)
    good = sorted(p for p in folder.rglob("*.json") if not p.name.startswith("_"))
    conflicted = good[0]
    conflicted.write_text(conflicted.read_text().replace('    "status": 200', '<<<<<<< HEAD\n    "status": 200', 1))

    check = semula("recordings", "check", str(folder), cwd=repo)
    assert check.returncode == 1 and conflicted.name in check.stderr and "conflict marker" in check.stderr, check

    # The next start names the bad file and loads the others; the run uses only two of three recordings.
    argv = [*semula_cmd(), "exec", "--mode", "replay", "--data-dir", str(data), "--recordings", str(folder),
            *proxy_test_args(mitm_confdir, fake_provider.port), "--", sys.executable, "-c", "print('no calls')"]
    res = subprocess.run(argv, capture_output=True, text=True, env=clean_env(), timeout=120, cwd=repo)
    assert res.returncode == 0, res.stderr
    assert f"bad recording {conflicted}: line" in res.stderr and "2 unchanged" in res.stderr, res.stderr

    unused = semula("recordings", "unused", str(folder), "--data-dir", str(data), cwd=repo)
    assert unused.returncode == 0, unused.stderr
    assert "based on " in unused.stderr and " run " in unused.stderr and "partial run" in unused.stderr, unused.stderr
