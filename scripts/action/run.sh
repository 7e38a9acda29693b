#!/usr/bin/env bash
# The shell logic of semula's GitHub Action (action.yml at the repository root), one subcommand per step,
# so that a test can run each step on a machine without GitHub (tests/e2e/test_e2e_action.py).
#
#   run.sh install   pip install semula (INPUT_SEMULA: empty = the action's own checkout, a folder, a version,
#                    or any pip requirement), with the analysis extra when INPUT_REPORT is true; then INPUT_SETUP
#   run.sh test      INPUT_COMMAND under `semula exec --mode INPUT_MODE`, then `semula report`; collects the
#                    call log and the report into INPUT_ARTIFACTS and writes the step outputs; always exits 0
#                    (the action's last step fails the job with the command's exit code, after the uploads)
#   run.sh diff      on a pull request: `semula recordings diff BASE HEAD --format markdown`, posted (or updated)
#                    as one comment with the gh CLI; a missing command or a refused comment is a warning
#
# Inputs arrive as INPUT_* environment variables (never spliced into the script by the runner: no injection;
# not SEMULA_*: semula refuses a SEMULA_ variable a typo away from one it reads).
# Outputs go to $GITHUB_OUTPUT when set (a test points it at a file).
set -euo pipefail

COMMENT_MARKER="<!-- semula-recordings-diff -->"

warn() { echo "::warning title=semula::$*"; }
output() { [[ -n "${GITHUB_OUTPUT:-}" ]] && echo "$1=$2" >> "$GITHUB_OUTPUT"; return 0; }
truthy() { [[ "${1,,}" =~ ^(true|yes|on|1)$ ]]; }

install() {
    local root extras="" spec="${INPUT_SEMULA:-}"
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    truthy "${INPUT_REPORT:-true}" && extras="[analysis]"
    if [[ -z "$spec" ]]; then
        # The action's own checkout, editable: `semula report` runs the notebooks of its analysis/ folder.
        python -m pip install -q -e "$root$extras"
    elif [[ -d "$spec" ]]; then
        python -m pip install -q -e "$spec$extras"
    elif [[ "$spec" =~ ^[0-9] ]]; then
        python -m pip install -q "semula$extras==$spec"
    else
        python -m pip install -q "$spec"
    fi
    semula --version
    if [[ -n "${INPUT_SETUP:-}" ]]; then
        bash -c "$INPUT_SETUP"
    fi
}

run_tests() {
    [[ -n "${INPUT_COMMAND:-}" ]] || { echo "semula: the command input is empty: say what runs the tests, e.g. pytest -q" >&2; exit 2; }
    local temp="${RUNNER_TEMP:-${TMPDIR:-/tmp}}"
    local data_dir="${INPUT_DATA_DIR:-$temp/semula-data}"
    local artifacts="${INPUT_ARTIFACTS:-$temp/semula-artifacts}"
    local -a exec_args=(--mode "${INPUT_MODE:-replay}" --data-dir "$data_dir")
    if [[ -n "${INPUT_RECORDINGS:-}" ]]; then
        exec_args+=(--recordings "$INPUT_RECORDINGS")
    fi
    if [[ -n "${INPUT_EXEC_ARGS:-}" ]]; then
        local -a more
        mapfile -t more < <(printf '%s\n' "$INPUT_EXEC_ARGS" | sed '/^[[:space:]]*$/d')  # one argument a line
        exec_args+=("${more[@]}")
    fi

    local code=0
    semula exec "${exec_args[@]}" -- bash -c "$INPUT_COMMAND" || code=$?
    output exit-code "$code"

    mkdir -p "$artifacts"
    if [[ -d "$data_dir/calls" ]]; then
        cp -R "$data_dir/calls" "$artifacts/calls"
    else
        warn "no call log in $data_dir/calls: the command made no call through semula"
    fi
    if truthy "${INPUT_REPORT:-true}"; then
        if semula report --data-dir "$data_dir" --out "$artifacts/semula-report.html" --quiet; then
            output report "$artifacts/semula-report.html"
        else
            warn "semula report failed (above); the call log is still uploaded"
        fi
    fi
    output artifacts "$artifacts"
    echo "semula: command exited $code; artifacts in $artifacts"
}

diff_base() {
    # A pull_request run checks out a merge commit: its first parent is the base it was merged onto. A shallow
    # clone still has the commit object naming it, and GitHub serves a commit by its id.
    if [[ -n "${INPUT_DIFF_BASE:-}" ]]; then
        echo "$INPUT_DIFF_BASE"
        return
    fi
    local parent
    parent="$(git cat-file -p HEAD | sed -n 's/^parent //p' | head -n 1)"
    if [[ -n "$parent" && "$(git cat-file -p HEAD | grep -c '^parent ')" -ge 2 ]]; then
        git cat-file -e "$parent^{commit}" 2>/dev/null || git fetch -q --no-tags --depth=1 origin "$parent"
        echo "$parent"
    elif [[ -n "${GITHUB_BASE_REF:-}" ]]; then
        git fetch -q --no-tags --depth=1 origin "$GITHUB_BASE_REF"
        git rev-parse FETCH_HEAD
    else
        return 1
    fi
}

post_comment() {
    # One comment per pull request, found by its marker and edited on later runs.
    local body_file="$1" repo="${GITHUB_REPOSITORY:?}" pr="${INPUT_PR_NUMBER:?}" existing
    existing="$(gh api "repos/$repo/issues/$pr/comments" --paginate \
        --jq ".[] | select(.body | startswith(\"$COMMENT_MARKER\")) | .id" | head -n 1)"
    if [[ -n "$existing" ]]; then
        gh api --method PATCH "repos/$repo/issues/comments/$existing" -F "body=@$body_file" >/dev/null
    else
        gh api --method POST "repos/$repo/issues/$pr/comments" -F "body=@$body_file" >/dev/null
    fi
}

recordings_diff() {
    if ! semula recordings diff --help >/dev/null 2>&1; then
        warn "this semula has no 'semula recordings diff': no recordings diff posted"
        return 0
    fi
    local base temp="${RUNNER_TEMP:-${TMPDIR:-/tmp}}"
    if ! base="$(diff_base)"; then
        warn "no base to compare the recordings with (not a pull request checkout): no diff posted"
        return 0
    fi
    local body="$temp/semula-recordings-diff.md" markdown="$temp/semula-recordings-diff.out"
    local code=0
    # Its exit code (a CI gate's) is an output; the comment is posted whatever it says.
    semula recordings diff "$base" HEAD --format markdown > "$markdown" || code=$?
    output diff-exit-code "$code"
    if [[ ! -s "$markdown" ]]; then
        echo "semula: the recordings did not change"
        return 0
    fi
    { echo "$COMMENT_MARKER"; cat "$markdown"; } > "$body"
    output diff "$body"
    if [[ -n "${GITHUB_STEP_SUMMARY:-}" ]]; then
        cat "$markdown" >> "$GITHUB_STEP_SUMMARY"
    fi
    if [[ -z "${INPUT_PR_NUMBER:-}" ]]; then
        warn "no pull request number: the diff is in the job summary only"
    elif ! post_comment "$body"; then
        warn "could not comment on the pull request (a fork's token is read-only; the workflow needs pull-requests: write): the diff is in the job summary"
    fi
}

case "${1:-}" in
    install) install ;;
    test) run_tests ;;
    diff) recordings_diff ;;
    *) echo "usage: $0 install|test|diff" >&2; exit 2 ;;
esac
