"""`semula recordings diff` on a hostile pull request, run as the real command on a real git repository.

The branch's files are anybody's: a file over the size cap, links to /etc/passwd and to /etc, bad JSON, a
key planted in a field the validator quotes and in an answer's body, and (written with git's plumbing, as
no checkout would) names a work tree cannot hold: `..`, a backslash, a submodule posing as a recording.
Each is listed as unreadable with the loader's reason; the diff never crashes, never reads outside the
folder, and no output carries the key.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import semula_fork
from e2e_helpers import clean_env, semula_cmd
from entries import chat, new_entry
from semula.recordings.folder import recording_from_entry, relpath_of
from semula.recordings.format import dumps
from semula.store.types import Entry

pytestmark = pytest.mark.e2e

PLANTED = "sk-live-PLANTEDdiffKEY0123456789abcdefABCDEF0123"
FOLDER = "semula-recordings"


def git(*args: str, cwd: Path, stdin: str | None = None) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd, check=True,
                          capture_output=True, text=True, input=stdin)
    return done.stdout.strip()


def write_recording(folder: Path, prompt: str, answer: str) -> str:
    entry = Entry.of(new_entry(chat(prompt), project="default",
                               body=json.dumps({"choices": [{"message": {"content": answer}}]}).encode()))
    rel = relpath_of(entry)
    (folder / rel).parent.mkdir(parents=True, exist_ok=True)
    (folder / rel).write_text(dumps(recording_from_entry(entry)))
    return rel


def plant_unplaceable_names(repo: Path) -> None:
    """Add `..`, `a\\b.json` and a submodule `sub.json` to the branch's folder: git's plumbing takes them."""
    empty = git("hash-object", "-w", "--stdin", cwd=repo, stdin="{}")
    folder_tree = git("rev-parse", f"HEAD:{FOLDER}", cwd=repo)
    lines = git("ls-tree", folder_tree, cwd=repo).splitlines()
    lines += [f"100644 blob {empty}\t..", f"100644 blob {empty}\ta\\b.json",
              f"160000 commit {git('rev-parse', 'HEAD', cwd=repo)}\tsub.json"]
    new_folder = git("mktree", cwd=repo, stdin="\n".join(lines) + "\n")
    root = [line for line in git("ls-tree", "HEAD", cwd=repo).splitlines() if not line.endswith(f"\t{FOLDER}")]
    root.append(f"040000 tree {new_folder}\t{FOLDER}")
    tree = git("mktree", cwd=repo, stdin="\n".join(root) + "\n")
    commit = git("commit-tree", tree, "-p", "HEAD", "-m", "hostile names", cwd=repo)
    git("update-ref", "refs/heads/feature", commit, cwd=repo)


def diff(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return semula_fork.run([*semula_cmd(), "recordings", "diff", *args],
                            env=clean_env(SEMULA_RECORDING_MAX_MB="1", COLUMNS="250"), timeout=120, cwd=cwd)


def test_hostile_files_on_the_branch_are_listed_unreadable_and_nothing_leaks(tmp_path: Path) -> None:
    repo = tmp_path / "project"
    folder = repo / FOLDER
    folder.mkdir(parents=True)
    kept = write_recording(folder, "a question that stays", "an answer that stays")
    git("init", "-q", "-b", "main", ".", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "recordings", cwd=repo)
    git("checkout", "-q", "-b", "feature", cwd=repo)

    secret_answer = write_recording(folder, "a question whose answer holds a key", f"your key is {PLANTED}")
    directory = folder / "default" / "openai"
    (directory / "huge.json").write_text('{"pad": "' + "x" * (3 * 1024 * 1024) + '"}')
    os.symlink("/etc/passwd", directory / "passwd.json")
    os.symlink("/etc", directory / "etc")
    (directory / "broken.json").write_text('{"format": "semula-recording/1", ')
    planted = json.loads((folder / kept).read_text())
    (directory / "planted.json").write_text(json.dumps({**planted, "host": PLANTED}))  # quoted by the validator
    (directory / "key-named-project.json").write_text(json.dumps({**planted, "project": PLANTED}))  # a valid name
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "hostile", cwd=repo)
    plant_unplaceable_names(repo)

    outputs = []
    for args in (("main", "feature"), ("main", "feature", "--json"), ("main", "feature", "--format", "markdown"),
                 ("main",)):
        done = diff(*args, cwd=repo)
        assert done.returncode == 0, (args, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        outputs.append(done.stdout + done.stderr)
    everything = "\n".join(outputs)
    assert PLANTED not in everything and "PLANTEDdiff" not in everything, "a planted key reached the output"
    assert "root:" not in everything, "a link out of the folder was read"

    report = json.loads(diff("main", "feature", "--json", cwd=repo).stdout)
    unreadable = {item["path"]: item["problem"] for item in report["unreadable"]}
    assert "over the 1 MB cap" in unreadable["default/openai/huge.json"], unreadable
    assert unreadable["default/openai/passwd.json"] == "a symbolic link out of the recordings folder"
    assert "symbolic link to a directory" in unreadable["default/openai/etc"], unreadable
    assert "not JSON" in unreadable["default/openai/broken.json"], unreadable
    assert "is not one of openai's hosts" in unreadable["default/openai/planted.json"], unreadable
    assert "not a plain path" in unreadable[".."] and "not a plain path" in unreadable["a\\b.json"], unreadable
    assert "submodule" in unreadable["sub.json"], unreadable
    assert all(item["side"] == "head" for item in report["unreadable"])
    added = {c["head_path"]: c for c in report["changes"] if c["kind"] == "added"}
    assert set(added) == {secret_answer, "default/openai/key-named-project.json"}, "the good new files are compared"
    assert "[REDACTED]" in added[secret_answer]["answer"]["head"]["text"], added
    assert added["default/openai/key-named-project.json"]["project"] == "[REDACTED]"

    gate = diff("main", "feature", "--fail-on", "unreadable", cwd=repo)
    assert gate.returncode == 1 and "unreadable (8)" in gate.stderr, gate.stderr
    reverse = diff("feature", "main", "--fail-on", "unreadable", cwd=repo)
    assert reverse.returncode == 0, "files only the base cannot read do not fail a gate on the head"
    assert "unreadable (base)" in reverse.stderr and PLANTED not in reverse.stdout + reverse.stderr
