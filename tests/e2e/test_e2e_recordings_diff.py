"""`semula recordings diff` on a real git repository: recordings a real proxy wrote, committed on main; a
branch adds one (an error answer), re-records one with a new answer, removes one and re-records one
with a changed prompt. The diff, as a reviewer and a CI gate read it, in text, Markdown and JSON.
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

# Each call: (kind, prompt). The official SDKs, as a user's tests call them.
CALLS = """
import json, sys
import anthropic, openai
oa = openai.OpenAI(api_key="sk-test-diff", base_url="https://api.openai.com/v1", max_retries=0)
an = anthropic.Anthropic(api_key="sk-ant-test-diff", base_url="https://api.anthropic.com", max_retries=0)
for kind, prompt in json.loads(sys.argv[1]):
    messages = [{"role": "user", "content": prompt}]
    if kind == "plain":
        oa.chat.completions.create(model="gpt-4o-mini", messages=messages)
    elif kind == "stream":
        list(oa.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True))
    elif kind == "anthropic":
        an.messages.create(model="claude-haiku-5-5", max_tokens=64, messages=messages)
    elif kind == "bad-temperature":
        try:
            oa.chat.completions.create(model="gpt-4o-mini", messages=messages, temperature=-1)
        except openai.BadRequestError:
            pass
print("DONE")
"""


def record(calls: list[tuple[str, str]], data: Path, folder: Path, confdir: Path, port: int, cwd: Path) -> None:
    argv = [*semula_cmd(), "exec", "--mode", "auto", "--data-dir", str(data), "--recordings", str(folder),
            *proxy_test_args(confdir, port), "--", sys.executable, "-c", CALLS, json.dumps(calls)]
    res = subprocess.run(argv, capture_output=True, text=True, env=clean_env(), timeout=180, cwd=cwd)
    assert res.returncode == 0 and "DONE" in res.stdout, f"exit {res.returncode}\n{res.stdout}\n{res.stderr}"


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd, check=True,
                          capture_output=True, text=True)
    return done.stdout


def diff(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return semula_fork.run([*semula_cmd(), "recordings", "diff", *args], env=clean_env(COLUMNS="200"), timeout=120,
                            cwd=cwd)


def recording_files(folder: Path) -> dict[str, Path]:
    """Each recording by the prompt it records."""
    out = {}
    for path in folder.rglob("*.json"):
        if path.name.startswith("_"):
            continue
        document = json.loads(path.read_text())
        messages = document["request"]["messages"]
        out[messages[-1]["text"]] = path
    return out


def test_a_branch_s_recordings_diff_reads_as_a_review_and_gates_ci(
        tmp_path: Path, fake_provider: FakeProvider, mitm_confdir: Path) -> None:
    repo, data = tmp_path / "project", tmp_path / "data"
    repo.mkdir()
    folder = repo / "semula-recordings"
    word = uniq("diff")
    kept, changed, removed, reprompted = (f"{word} {name}" for name in ("kept", "changed", "removed", "reprompted"))
    record([("plain", kept), ("plain", changed), ("anthropic", removed), ("stream", reprompted)],
           data, folder, mitm_confdir, fake_provider.port, repo)
    files = recording_files(folder)
    assert set(files) == {kept, changed, removed, reprompted}, files
    git("init", "-q", "-b", "main", ".", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "recordings", cwd=repo)
    git("checkout", "-q", "-b", "feature", cwd=repo)

    # The branch: one added (a 400 the request caused), one answer changed in place, one removed, one re-recorded
    # with a changed prompt (a new file; the old one deleted).
    added, new_prompt = f"{word} added", f"{word} reprompted, now politely"
    record([("bad-temperature", added), ("stream", new_prompt)], data, folder, mitm_confdir, fake_provider.port, repo)
    document = json.loads(files[changed].read_text())
    old_answer = document["response"]["body_json"]["choices"][0]["message"]["content"]
    document["response"]["body_json"]["choices"][0]["message"]["content"] = "A different answer entirely."
    document["response"]["answer_text"] = "A different answer entirely."
    files[changed].write_text(json.dumps(document, ensure_ascii=False, indent=2) + "\n")
    files[removed].unlink()
    files[reprompted].unlink()

    # The work tree against the merge base with main (the default), as text.
    text = diff(cwd=repo)
    assert text.returncode == 0, text.stderr
    out = text.stdout
    assert "1 added, 1 removed, 1 re-recorded, 1 request changed; 1 unchanged" in out, out
    assert "merge base with main" in out and "work tree" in out, out
    assert "ERROR ANSWER 400" in out and "answer changed, request the same" in out, out
    assert "message 1 (user) text differs" in out, "a changed prompt is named as the miss message names it"
    assert "+A different" in out and f"-{old_answer.split()[0]}" in out, out
    assert "status 200" in out, "the removed recording's answer is named"

    # The CI gate: opt-in conditions, exit 1 when one holds; 2 for a usage error.
    assert diff("--fail-on", "answer-changed", cwd=repo).returncode == 1
    gate = diff("--fail-on", "unreadable,request-changed", "--fail-on", "error-answer", cwd=repo)
    assert gate.returncode == 1 and "request-changed (1), error-answer (1)" in gate.stderr, gate.stderr
    assert diff("--fail-on", "unreadable", cwd=repo).returncode == 0
    bad = diff("no-such-branch", cwd=repo)
    assert bad.returncode == 2 and "'no-such-branch' is neither a folder nor a git commit" in bad.stderr, bad.stderr
    assert diff("--fail-on", "sometimes", cwd=repo).returncode == 2

    # Committed: two commits compared, as JSON.
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "changes", cwd=repo)
    as_json = diff("main", "feature", "--json", cwd=repo)
    assert as_json.returncode == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    assert report["counts"] == {"added": 1, "removed": 1, "re-recorded": 1, "request changed": 1, "unchanged": 1}
    by_kind = {c["kind"]: c for c in report["changes"]}
    assert by_kind["added"]["error_status"] == 400 and by_kind["added"]["provider"] == "openai"
    assert by_kind["removed"]["provider"] == "anthropic"
    rerecorded = by_kind["re-recorded"]
    assert rerecorded["answer"]["changed"] and rerecorded["answer"]["differences"] == ["text"], rerecorded
    assert rerecorded["request"]["differences"] == [] and rerecorded["answer"]["head"]["text"] == (
        "A different answer entirely.")
    reworded = by_kind["request changed"]
    assert reworded["base_path"] != reworded["head_path"], "paired across a rename: the prompt names the file"
    assert any("message 1 (user) text differs" in d for d in reworded["request"]["differences"]), reworded
    assert "model" in reworded["request"]["same"] and "stream" in reworded["request"]["same"], reworded
    assert report["error_answers"] == [{"path": by_kind["added"]["head_path"], "status": 400}]

    # Markdown for the pull request's comment.
    md = diff("main", "feature", "--format", "markdown", cwd=repo)
    assert md.returncode == 0, md.stderr
    assert md.stdout.startswith("### semula recordings diff") and "#### default / openai" in md.stdout, md.stdout
    assert "```diff" in md.stdout and "⚠️ ERROR ANSWER 400" in md.stdout, md.stdout
    assert len(md.stdout) < 60_000

    # `recordings check` names the committed error answer too.
    check = semula_fork.run([*semula_cmd(), "recordings", "check", str(folder)], env=clean_env(), timeout=120,
                             cwd=repo)
    assert check.returncode == 0 and "answer with an error" in check.stdout, check
    assert by_kind["added"]["head_path"] in check.stdout and ": 400" in check.stdout, check.stdout
