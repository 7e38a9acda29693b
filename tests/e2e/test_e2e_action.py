"""semula's GitHub Action (action.yml), checked without GitHub.

GitHub cannot run here, so the action is checked in the three ways that can: its own YAML against the rules of
a composite action (and its steps linted by actionlint as the job of a reusable workflow, whose inputs are the
action's); the example workflow of the docs linted by actionlint, with the action as a local action so the
inputs it passes are checked against action.yml; and the script its steps run (scripts/action/run.sh) run as
the steps run it: a tiny pytest project records against the fake provider, then replays from its committed
recordings with the provider gone, and the artifacts the action would upload (the Parquet call log, the HTML
report) are there.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e_helpers import REPO, FakeProvider, clean_env, proxy_test_args, read_call_log, uniq

pytestmark = pytest.mark.e2e

ACTION = REPO / "action.yml"
SCRIPT = REPO / "scripts" / "action" / "run.sh"
EXAMPLE = REPO / "docs" / "ci" / "workflow.yml"
ACTIONLINT = Path(sys.executable).parent / "actionlint"
SHELLCHECK = Path(sys.executable).parent / "shellcheck"
EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.S)


def action() -> dict[str, Any]:
    return yaml.safe_load(ACTION.read_text())


def expressions(value: Any) -> list[str]:
    """Every `${{ … }}` expression in a YAML value, nested values included."""
    if isinstance(value, dict):
        return [e for v in value.values() for e in expressions(v)]
    if isinstance(value, list):
        return [e for v in value for e in expressions(v)]
    return [m.strip() for m in EXPRESSION.findall(value)] if isinstance(value, str) else []


def test_action_yml_is_a_well_formed_composite_action() -> None:
    spec = action()
    assert spec["name"] and spec["description"]
    assert spec["runs"]["using"] == "composite"
    inputs = spec["inputs"]
    for name, declared in inputs.items():
        assert declared.get("description"), f"input {name} has no description"
        assert declared.get("required") or "default" in declared, f"optional input {name} has no default"
    assert {"command", "mode", "recordings", "python-version", "comment-diff", "semula"} <= inputs.keys()
    assert inputs["mode"]["default"] == "replay"

    steps = spec["runs"]["steps"]
    ids = {step["id"] for step in steps if "id" in step}
    for step in steps:
        assert ("uses" in step) != ("run" in step), step
        if "run" in step:
            assert step.get("shell") == "bash", f"a composite run step needs its shell: {step['name']}"
            # Inputs reach the script through env, never spliced into the shell text (script injection).
            assert not expressions(step["run"]), step["run"]
        for expression in expressions(step):
            for name in re.findall(r"\binputs\.([\w-]+)", expression):
                assert name in inputs, f"step {step['name']!r} reads undeclared input {name}"
            for step_id in re.findall(r"\bsteps\.([\w-]+)\.", expression):
                assert step_id in ids, f"step {step['name']!r} reads unknown step {step_id}"
    for script in re.findall(r"\$GITHUB_ACTION_PATH/(\S+?)\"", ACTION.read_text()):
        assert (REPO / script).is_file(), script
    written = set(re.findall(r"^\s*output ([\w-]+) ", SCRIPT.read_text(), re.M))  # the script's step outputs
    for expression in expressions(spec):
        for step_id, name in re.findall(r"\bsteps\.([\w-]+)\.outputs\.([\w-]+)", expression):
            assert step_id in ids and name in written, f"steps.{step_id}.outputs.{name} is never written"


def actionlint(folder: Path) -> subprocess.CompletedProcess[str]:
    assert ACTIONLINT.exists(), f"actionlint not installed next to {sys.executable} (the dev extra has it)"
    assert SHELLCHECK.exists(), f"shellcheck not installed next to {sys.executable} (the dev extra has it)"
    # With shellcheck on PATH, actionlint also checks the shell of every run: step.
    env = {**os.environ, "PATH": f"{SHELLCHECK.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([str(ACTIONLINT), "-no-color"], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=120)


def test_shellcheck_passes_the_script() -> None:
    assert SHELLCHECK.exists(), f"shellcheck not installed next to {sys.executable} (the dev extra has it)"
    result = subprocess.run([str(SHELLCHECK), str(SCRIPT)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def lint_folder(tmp_path: Path, workflows: dict[str, str]) -> Path:
    """A repository holding action.yml at its root (as `uses: ./` finds it) and these workflows."""
    folder = tmp_path / "repo"
    (folder / ".github" / "workflows").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    shutil.copy2(ACTION, folder / "action.yml")
    for name, text in workflows.items():
        (folder / ".github" / "workflows" / name).write_text(text)
    return folder


def test_actionlint_passes_the_example_workflow_and_the_actions_steps(tmp_path: Path) -> None:
    example = EXAMPLE.read_text()
    uses = re.search(r"uses: (\S+/semula@\S+)", example)
    assert uses, "the example workflow uses the action"
    # As a local action: actionlint then checks the inputs the workflow passes against action.yml.
    local = example.replace(uses.group(1), "./")
    # The action's steps as the job of a reusable workflow whose inputs are the action's: actionlint checks
    # their expressions and the versions of the actions they use.
    spec = action()
    steps_workflow = yaml.safe_dump({
        "name": "action steps",
        "on": {"workflow_call": {"inputs": {name: {"type": "string", "required": False} for name in spec["inputs"]}}},
        "jobs": {"action": {"runs-on": "ubuntu-latest", "steps": spec["runs"]["steps"]}},
    }, sort_keys=False)
    result = actionlint(lint_folder(tmp_path, {"example.yml": local, "steps.yml": steps_workflow}))
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_catches_a_misspelt_input(tmp_path: Path) -> None:
    """The lint above is a real check: an input the action does not declare fails it."""
    local = re.sub(r"uses: \S+/semula@\S+", "uses: ./", EXAMPLE.read_text()).replace("command:", "comand:")
    result = actionlint(lint_folder(tmp_path, {"example.yml": local}))
    assert result.returncode != 0 and 'input "comand" is not defined' in result.stdout, result.stdout


def test_readme_and_docs_show_the_linted_example() -> None:
    for page in (REPO / "README.md", REPO / "docs" / "ci.md"):
        assert EXAMPLE.read_text().strip() in page.read_text(), f"{page.name}'s workflow example is docs/ci/workflow.yml"


# ---------------------------------------------------------------------------
# The script the steps run

PROJECT_TEST = '''
import requests


def test_answer():
    r = requests.post("https://api.openai.com/v1/chat/completions", timeout=30,
                      headers={{"authorization": "Bearer sk-test-action"}},
                      json={{"model": "gpt-4o-mini", "messages": [{{"role": "user", "content": "{prompt}"}}]}})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"].startswith("fake answer")
'''


def run_step(step: str, project: Path, runner: Path, **variables: str) -> tuple[subprocess.CompletedProcess[str],
                                                                             dict[str, str]]:
    """`run.sh STEP` as the action's step runs it: inputs as variables, outputs into $GITHUB_OUTPUT."""
    runner.mkdir(parents=True, exist_ok=True)
    outputs = runner / f"{step}-output"
    outputs.write_text("")
    env = {k: v for k, v in clean_env().items() if k != "SEMULA_RECORDINGS"}
    env.update(RUNNER_TEMP=str(runner), GITHUB_OUTPUT=str(outputs), PYTHONUNBUFFERED="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    env.update(variables)
    result = subprocess.run(["bash", str(SCRIPT), step], cwd=project, env=env, capture_output=True, text=True,
                            timeout=600)
    written = dict(line.split("=", 1) for line in outputs.read_text().splitlines() if "=" in line)
    return result, written


def test_script_records_then_replays_and_collects_the_artifacts(tmp_path: Path, fake_provider: FakeProvider,
                                                                mitm_confdir: Path, dead_port: int) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_llm.py").write_text(PROJECT_TEST.format(prompt=uniq("action replay")))
    command = f"{sys.executable} -m pytest -q -p no:cacheprovider test_llm.py"

    # Locally, once: the call is recorded into the project's recordings folder.
    recorded, outputs = run_step("test", project, tmp_path / "record-runner", INPUT_COMMAND=command,
                                 INPUT_MODE="auto", INPUT_RECORDINGS="semula-recordings", INPUT_REPORT="false",
                                 INPUT_EXEC_ARGS="\n".join(proxy_test_args(mitm_confdir, fake_provider.port)))
    assert recorded.returncode == 0 and outputs["exit-code"] == "0", recorded.stdout + recorded.stderr
    assert list((project / "semula-recordings").glob("**/*.json")), "no recording written"

    # In CI: a fresh runner (empty data dir), the provider gone, replay from the folder.
    runner = tmp_path / "ci-runner"
    replayed, outputs = run_step("test", project, runner, INPUT_COMMAND=command, INPUT_MODE="replay",
                                 INPUT_RECORDINGS="semula-recordings", INPUT_REPORT="true",
                                 INPUT_EXEC_ARGS="\n".join(proxy_test_args(mitm_confdir, dead_port)))
    detail = replayed.stdout + replayed.stderr
    assert replayed.returncode == 0 and outputs["exit-code"] == "0", detail
    artifacts = Path(outputs["artifacts"])
    assert artifacts == runner / "semula-artifacts"
    rows = read_call_log(artifacts)
    assert [(row["mode"], row["decision"]) for row in rows] == [("replay", "hit")], rows
    report = Path(outputs["report"])
    assert report.parent == artifacts and report.stat().st_size > 10_000, detail
    assert "<html" in report.read_text(errors="replace")[:2000].lower()


def test_script_reports_a_failing_command_and_still_collects(tmp_path: Path, mitm_confdir: Path,
                                                             dead_port: int) -> None:
    """A replay miss fails the command; the step itself succeeds (so the uploads run) and says the exit code."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_llm.py").write_text(PROJECT_TEST.format(prompt=uniq("action unrecorded")))
    result, outputs = run_step("test", project, tmp_path / "runner", INPUT_MODE="replay", INPUT_REPORT="false",
                               INPUT_COMMAND=f"{sys.executable} -m pytest -q -p no:cacheprovider test_llm.py",
                               INPUT_EXEC_ARGS="\n".join(proxy_test_args(mitm_confdir, dead_port)))
    assert result.returncode == 0, result.stdout + result.stderr
    assert outputs["exit-code"] == "1", outputs
    rows = read_call_log(Path(outputs["artifacts"]))
    assert [row["decision"] for row in rows] == ["miss"], rows
    assert "report" not in outputs


def test_script_refuses_an_empty_command(tmp_path: Path) -> None:
    result, _ = run_step("test", tmp_path, tmp_path / "runner", INPUT_COMMAND="")
    assert result.returncode != 0 and "command input is empty" in result.stderr, result.stderr


@pytest.mark.parametrize(("spec", "report", "expected"), [
    ("", "true", f"-m pip install -q -e {REPO}[analysis]"),
    ("", "false", f"-m pip install -q -e {REPO}"),
    ("0.2.0", "true", "-m pip install -q semula[analysis]==0.2.0"),
    ("semula>=0.2", "false", "-m pip install -q semula>=0.2"),
    ("FOLDER", "false", "-m pip install -q -e FOLDER"),
])
def test_install_step_installs_what_the_input_names(tmp_path: Path, spec: str, report: str, expected: str) -> None:
    """What `run.sh install` asks pip for (a stub `python` and `semula` note their arguments), then the setup
    command in the same shell environment."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    calls = tmp_path / "calls.log"
    stub(stubs, "python", f'echo "python $*" >> {calls}\n')
    stub(stubs, "semula", f'echo "semula $*" >> {calls}\n')
    folder = tmp_path / "checkout"
    folder.mkdir()
    spec = spec.replace("FOLDER", str(folder))
    result, _ = run_step("install", tmp_path, tmp_path / "runner", INPUT_SEMULA=spec, INPUT_REPORT=report,
                         INPUT_SETUP=f"echo setup ran >> {calls}", PATH=f"{stubs}{os.pathsep}{os.environ['PATH']}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert calls.read_text().splitlines() == [f"python {expected.replace('FOLDER', str(folder))}",
                                              "semula --version", "setup ran"]


# ---------------------------------------------------------------------------
# The recordings diff on a pull request

def git(folder: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def pull_request_checkout(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose HEAD is a merge commit, as a pull_request run checks out: (its folder, the base)."""
    repo = tmp_path / "pr"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    folder = repo / "semula-recordings" / "default" / "openai" / "v1-chat-completions"
    folder.mkdir(parents=True)
    (folder / "kept.json").write_text('{"format": 1}\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-qb", "feature")
    (folder / "added.json").write_text('{"format": 1}\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "feature")
    git(repo, "checkout", "-q", "--detach", base)
    git(repo, "merge", "-q", "--no-ff", "-m", "merge", "feature")
    return repo, base


def stub(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_diff_step_posts_one_comment_and_updates_it(tmp_path: Path) -> None:
    """The step's plumbing, with `semula` and `gh` stubbed: the base is the merge commit's first parent, the
    comment is created once and edited on the next run."""
    repo, base = pull_request_checkout(tmp_path)
    stubs = tmp_path / "bin"
    stubs.mkdir()
    calls = tmp_path / "calls.log"
    stub(stubs, "semula", f'echo "semula $*" >> {calls}\n'
                          '[[ "$*" == *--help* ]] && exit 0\necho "## Recordings\n1 added"\nexit 1\n')
    stub(stubs, "gh", f'echo "gh $*" >> {calls}\n'
                      f'[[ "$*" == *--jq* && -f {tmp_path}/posted ]] && echo 4242\n'
                      f'[[ "$*" == *POST* ]] && touch {tmp_path}/posted\nexit 0\n')
    variables = {"PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}", "GITHUB_REPOSITORY": "o/r",
                 "INPUT_PR_NUMBER": "7", "GH_TOKEN": "ghs-test-token"}
    for _ in range(2):
        result, outputs = run_step("diff", repo, tmp_path / "runner", **variables)
        assert result.returncode == 0, result.stdout + result.stderr
        assert outputs["diff-exit-code"] == "1"
    log = calls.read_text()
    assert f"semula recordings diff {base} HEAD --format markdown" in log
    assert log.count("--method POST repos/o/r/issues/7/comments") == 1, log
    assert "--method PATCH repos/o/r/issues/comments/4242" in log, log
    body = Path(outputs["diff"]).read_text()
    assert body.startswith("<!-- semula-recordings-diff -->") and "1 added" in body


def test_diff_step_on_a_pull_request_that_records_a_call(tmp_path: Path, fake_provider: FakeProvider,
                                                         mitm_confdir: Path) -> None:
    """End to end with the real CLI: the base branch has one recording, the pull request records another (the
    action's test step in auto mode against the fake provider), and the diff step on the merge commit posts
    the diff naming the added recording; a semula without `recordings diff` warns and posts nothing."""
    repo = tmp_path / "pr"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")

    def record(name: str) -> None:
        (repo / name).write_text(PROJECT_TEST.format(prompt=uniq(f"action diff {name}")))
        result, outputs = run_step("test", repo, tmp_path / f"runner-{name}", INPUT_MODE="auto", INPUT_REPORT="false",
                                   INPUT_RECORDINGS="semula-recordings",
                                   INPUT_COMMAND=f"{sys.executable} -m pytest -q -p no:cacheprovider {name}",
                                   INPUT_EXEC_ARGS="\n".join(proxy_test_args(mitm_confdir, fake_provider.port)))
        assert outputs.get("exit-code") == "0", result.stdout + result.stderr
        git(repo, "add", name, "semula-recordings")
        git(repo, "commit", "-qm", f"record {name}")

    record("test_base.py")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-qb", "feature")
    record("test_feature.py")
    git(repo, "checkout", "-q", "--detach", base)
    git(repo, "merge", "-q", "--no-ff", "-m", "merge", "feature")

    stubs = tmp_path / "bin"
    stubs.mkdir()
    calls = tmp_path / "gh.log"
    stub(stubs, "gh", f'echo "gh $*" >> {calls}\n')
    variables = {"PATH": f"{stubs}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                 "GITHUB_REPOSITORY": "o/r", "INPUT_PR_NUMBER": "7"}
    result, outputs = run_step("diff", repo, tmp_path / "runner", **variables)
    assert result.returncode == 0, result.stdout + result.stderr
    has_diff = subprocess.run([sys.executable, "-m", "semula", "recordings", "diff", "--help"],
                              capture_output=True).returncode == 0
    if has_diff:
        assert "diff" in outputs and "POST" in calls.read_text(), result.stdout + result.stderr
        body = Path(outputs["diff"]).read_text()
        assert body.startswith("<!-- semula-recordings-diff -->") and "1 added" in body, body
        assert "action-diff-test-feature" in body and "action-diff-test-base" not in body, body
        assert "sk-test-action" not in body
    else:
        assert "no 'semula recordings diff'" in result.stdout and not calls.exists(), result.stdout
