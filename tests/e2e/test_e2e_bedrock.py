"""AWS Bedrock through boto3 records in auto and replays offline with no AWS credentials.

boto3 runs in a child process with the environment `semula exec` gives a run (`session.run.run_env`).
In auto it holds planted credentials (a session token and a secret key) and signs with SigV4; the fake
checks that an `authorization` header is there, as Bedrock does. Replay then runs from a fresh proxy with
every provider host mapped to a closed port, a fresh data dir, a clean copy of the recordings folder and
no AWS variables at all: semula's placeholders let boto3 sign offline. `converse`, `converse_stream`
(its raw event-stream bytes hashed) and `invoke_model_with_response_stream` give the same answers, nothing
reaches the fake, and no signature, session token or secret key is in any file or console line. A
Converse prompt drifted by a word is a miss that names its nearest recording. The AWS SDK for
JavaScript (v3) makes a Converse call through the same two proxies when npm can install it.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, ProxyHandle, clean_env, read_call_log, uniq

pytestmark = pytest.mark.e2e

SESSION_TOKEN = "IQoJb3JpZ2luX2VjPLANTED" + secrets.token_urlsafe(48)
SECRET_KEY = "wJalrPLANTED" + secrets.token_urlsafe(24)
ACCESS_KEY = "ASIAPLANTEDKEY000001"
AWS_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION",
                 "AWS_DEFAULT_REGION", "AWS_EC2_METADATA_DISABLED", "AWS_CA_BUNDLE", "AWS_BEARER_TOKEN_BEDROCK")
MODEL = "anthropic.claude-3-haiku-20240307-v1:0"

CLIENT = r'''
import hashlib, json, sys
import boto3
from botocore.eventstream import EventStreamBuffer

run, miss = sys.argv[1:3]
client = boto3.client("bedrock-runtime", region_name="us-east-1")
model = "anthropic.claude-3-haiku-20240307-v1:0"
out = {}
def ask(text):
    return {"messages": [{"role": "user", "content": [{"text": text}]}], "system": [{"text": "Answer briefly."}],
            "inferenceConfig": {"maxTokens": 64, "temperature": 0}}
answer = client.converse(modelId=model, **ask(f"bedrock converse hello {run}"))
answer.pop("ResponseMetadata")
out["converse"] = answer
stream = client.converse_stream(modelId=model, **ask(f"bedrock converse stream {run}"))
raw = b"".join(stream["stream"]._raw_stream.stream())  # the event-stream bytes as received
buffer = EventStreamBuffer()
buffer.add_data(raw)  # botocore checks every CRC
out["converse_stream"] = [hashlib.sha256(raw).hexdigest(), [m.headers[":event-type"] for m in buffer]]
body = json.dumps({"anthropic_version": "bedrock-2023-05-31", "max_tokens": 64,
                   "messages": [{"role": "user", "content": f"bedrock invoke stream {run}"}]})
events = client.invoke_model_with_response_stream(modelId=model, body=body)["body"]
out["invoke_stream"] = [json.loads(e["chunk"]["bytes"]) for e in events]
if miss == "1":  # one word more: near the recording, never served for it
    try:
        client.converse(modelId=model, **ask(f"bedrock converse hello {run} please"))
        out["miss"] = "served"
    except client.exceptions.ClientError as e:
        out["miss"] = [e.response["Error"]["Code"], e.response["Error"]["Message"]]
print(json.dumps(out))
'''


NODE_CLIENT = r"""
import { BedrockRuntimeClient, ConverseCommand } from "@aws-sdk/client-bedrock-runtime";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { HttpsProxyAgent } from "https-proxy-agent";

// Node's http ignores HTTPS_PROXY: the SDK's handler gets a proxy agent; NODE_EXTRA_CA_CERTS trusts semula's CA.
const [modelId, text] = process.argv.slice(2);
const client = new BedrockRuntimeClient({
  requestHandler: new NodeHttpHandler({ httpsAgent: new HttpsProxyAgent(process.env.HTTPS_PROXY) }), maxAttempts: 1,
});
const answer = await client.send(new ConverseCommand({ modelId, messages: [{ role: "user", content: [{ text }] }] }));
console.log(JSON.stringify({ output: answer.output, usage: answer.usage, stopReason: answer.stopReason }));
"""


@pytest.fixture(scope="module")
def node_project(tmp_path_factory: pytest.TempPathFactory) -> Path | str:
    """A scratch npm project with the Bedrock Runtime client, or why there is none."""
    npm = shutil.which("npm")
    if not npm or not shutil.which("node"):
        return "node/npm not installed"
    project = tmp_path_factory.mktemp("node-bedrock")
    try:
        res = subprocess.run([npm, "install", "@aws-sdk/client-bedrock-runtime", "https-proxy-agent", "--no-audit",
                              "--no-fund", "--loglevel=error", "--prefer-offline"], cwd=project, capture_output=True,
                             text=True, timeout=180, env=clean_env())
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"npm install failed: {e}"
    if res.returncode != 0:
        return f"npm install failed: {res.stderr[-300:]}"
    (project / "converse.mjs").write_text(NODE_CLIENT)
    return project


def run_node(node_project: Path | str, proxy: ProxyHandle, run: str, env: dict[str, str]) -> Any:
    if isinstance(node_project, str):
        return None
    result = subprocess.run(["node", "converse.mjs", MODEL, f"bedrock node {run}"], cwd=node_project,
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, f"{result.stderr}\n{proxy.describe()}"
    return json.loads(result.stdout.strip().splitlines()[-1])

def client_env(proxy: ProxyHandle, credentials: dict[str, str], tmp: Path) -> dict[str, str]:
    """What `semula exec` gives a run, on a machine whose only AWS settings are `credentials`."""
    from semula.session.clientenv import applied
    from semula.session.run import run_env

    nowhere = str(tmp / "no-aws-files")  # the machine's own ~/.aws is not this test's
    base = {**{k: v for k, v in clean_env().items() if k not in AWS_VARIABLES},
            "AWS_SHARED_CREDENTIALS_FILE": nowhere, "AWS_CONFIG_FILE": nowhere, **credentials}
    return applied(base, run_env(proxy.mode, (), "127.0.0.1", proxy.port, proxy.confdir, base))


def run_boto3(proxy: ProxyHandle, run: str, env: dict[str, str], miss: bool = False) -> dict[str, Any]:
    result = subprocess.run([sys.executable, "-c", CLIENT, run, "1" if miss else "0"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, f"{result.stderr}\n{proxy.describe()}"
    return json.loads(result.stdout.strip().splitlines()[-1])

def leaks(paths: list[Path], texts: list[str], needles: list[str]) -> list[str]:
    found = []
    for root in paths:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            data = path.read_bytes()
            found += [f"{n[:16]!r} in {path}" for n in needles if n.encode() in data]
    for i, text in enumerate(texts):
        found += [f"{n[:16]!r} in console {i}" for n in needles if n in text]
    return found


@pytest.fixture(scope="module")
def recorded(module_proxy_factory: ProxyFactory, fake_provider: FakeProvider, node_project: Path | str,
             tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("bedrock")
    run, folder = uniq("bedrock"), tmp / "semula-recordings"
    fake_provider.reset()
    recorder = module_proxy_factory("auto", extra_args=("--recordings", str(folder)))
    env = client_env(recorder, {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                                "AWS_SESSION_TOKEN": SESSION_TOKEN, "AWS_REGION": "us-east-1"}, tmp)
    answers = run_boto3(recorder, run, env)
    node = run_node(node_project, recorder, run, env)
    calls = fake_provider.requests()
    recorder.stop()  # flushes the call log
    rows = read_call_log(recorder.data_dir)
    return {"run": run, "folder": folder, "tmp": tmp, "answers": answers, "node": node, "calls": calls,
            "rows": rows, "recorder": recorder}


@pytest.fixture(scope="module")
def replayed(module_proxy_factory: ProxyFactory, fake_provider: FakeProvider, node_project: Path | str,
             recorded: dict[str, Any]) -> dict[str, Any]:
    """A fresh proxy in replay on a clean copy of the folder, the provider gone, no AWS variables at all."""
    clean = recorded["tmp"] / "clean-recordings"
    shutil.copytree(recorded["folder"], clean)
    before = fake_provider.count()
    replayer = module_proxy_factory("replay", module_proxy_factory.new_data_dir("fresh"), upstream="gone",
                                    extra_args=("--recordings", str(clean)))
    env = client_env(replayer, {}, recorded["tmp"])
    answers = run_boto3(replayer, recorded["run"], env, miss=True)
    node = run_node(node_project, replayer, recorded["run"], env)
    miss_logged = replayer.pump.wait_for(lambda out: "converse" in out and "miss" in out, 20)
    replayer.stop()
    return {"answers": answers, "node": node, "env": env, "reached_fake": fake_provider.count() - before,
            "miss_logged": miss_logged, "replayer": replayer, "clean": clean}


def test_boto3_records_every_operation(recorded: dict[str, Any]) -> None:
    calls, rows = recorded["calls"], recorded["rows"]
    assert {c["path"].rsplit("/", 1)[-1] for c in calls} == {"converse", "converse-stream", "invoke-with-response-stream"}
    assert len(calls) == 3 + (recorded["node"] is not None), calls
    assert all(c["headers"]["authorization"].startswith("AWS4-HMAC-SHA256") and
               c["headers"]["x-amz-security-token"] == SESSION_TOKEN for c in calls), "boto3 signed with the planted key"
    assert all(r["provider"] == "bedrock" and r["recorded"] for r in rows), rows
    assert {r["completion_tokens"] for r in rows} - {None}, "usage read from the answer and the streams"
    answers = recorded["answers"]
    assert answers["converse"]["output"]["message"]["content"][0]["text"].startswith("fake answer")
    assert answers["converse_stream"][1][-2:] == ["messageStop", "metadata"]
    assert answers["invoke_stream"][-1]["type"] == "message_stop"
    files = sorted(recorded["folder"].rglob("*.json"))
    streams = [json.loads(p.read_text()) for p in files if "stream" in p.parent.name]
    assert len(streams) == 2 and all("body_eventstream" in s["response"] for s in streams), files
    invoke = next(s for s in streams if "invoke" in s["endpoint"])
    assert invoke["response"]["body_eventstream"][-1]["payload"]["bytes"]["type"] == "message_stop", "readable chunks"


def test_boto3_replays_offline_without_credentials(recorded: dict[str, Any], replayed: dict[str, Any]) -> None:
    env = replayed["env"]
    assert env["AWS_ACCESS_KEY_ID"] == "semula-replay-placeholder" and env["AWS_EC2_METADATA_DISABLED"] == "true"
    answers = dict(replayed["answers"])
    code, message = answers.pop("miss")
    assert code == "ResourceNotFoundException" and "no recording matches" in message, message
    assert "Nearest recording" in message, message
    assert answers == recorded["answers"], "the same answers (the same stream bytes), offline"
    assert replayed["reached_fake"] == 0, "replay never reached the provider"
    assert replayed["miss_logged"], replayed["replayer"].describe()


def test_node_sdk_converse_records_and_replays(node_project: Path | str, recorded: dict[str, Any],
                                               replayed: dict[str, Any]) -> None:
    if isinstance(node_project, str):
        pytest.skip(node_project)
    assert recorded["node"]["output"]["message"]["content"][0]["text"].startswith("fake answer"), recorded["node"]
    assert replayed["node"] == recorded["node"]


def test_no_signature_token_or_secret_key_is_written(recorded: dict[str, Any], replayed: dict[str, Any]) -> None:
    signatures = [m.group(1) for c in recorded["calls"]
                  for m in [re.search(r"Signature=([0-9a-f]{64})", c["headers"]["authorization"])] if m]
    assert len(signatures) == len(recorded["calls"]) >= 3
    found = leaks([recorded["folder"], replayed["clean"], recorded["recorder"].data_dir, replayed["replayer"].data_dir],
                  [recorded["recorder"].output(), replayed["replayer"].output()], [SESSION_TOKEN, SECRET_KEY, *signatures])
    assert not found, found
