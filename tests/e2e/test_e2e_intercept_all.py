"""`semula exec --intercept-all`, end to end: the run's clients trust semula's CA alone (a one-certificate
bundle), a provider call is recorded and then replayed as before, and an HTTPS host semula does not intercept
still answers through the proxy (decrypted, forwarded untouched, streamed), a 16 MB download byte for byte, and
is never recorded nor counted. Without the flag, the bundle holds the public roots and semula's CA.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from e2e_helpers import FakeProvider, clean_env, proxy_test_args, semula_cmd, uniq
from fake_binary import big_file

pytestmark = pytest.mark.e2e

OTHER = "downloads.semula-test-other.example"  # not a provider: mapped to the fake, which serves /media/NAME
SCRIPT = """
import hashlib, json, os, sys, httpx, openai
bundle = open(os.environ["SSL_CERT_FILE"]).read()
client = openai.OpenAI(max_retries=0)
raw = client.chat.completions.with_raw_response.create(
    model="gpt-4o-mini", messages=[{"role": "user", "content": sys.argv[1]}])
other = httpx.get(f"https://{sys.argv[2]}/media/cat.png", timeout=30)
big = httpx.get(f"https://{sys.argv[2]}/v1/files/file-big16384-dl/content", timeout=60)
print(json.dumps({"certificates": bundle.count("BEGIN CERTIFICATE"), "decision": raw.headers.get("x-semula-decision"),
                  "answer": raw.parse().choices[0].message.content, "other_status": other.status_code,
                  "other_bytes": len(other.content), "other_png": other.content[:4] == b"\\x89PNG",
                  "big": hashlib.sha256(big.content).hexdigest()}))
"""


def semula_exec(data_dir: Path, confdir: Path, upstream_port: int, recordings: Path, mode: str, prompt: str,
                *flags: str) -> dict[str, object]:
    argv = [*semula_cmd(), "exec", "--data-dir", str(data_dir), "--mode", mode, "--recordings", str(recordings),
            *proxy_test_args(confdir, upstream_port), "--set", f"map_remote=|//{OTHER}/|//127.0.0.1:{upstream_port}/",
            *flags, "--", sys.executable, "-c", SCRIPT, prompt, OTHER]
    done = subprocess.run(argv, capture_output=True, text=True, env=clean_env(OPENAI_API_KEY="sk-test-intercept-all"),
                          timeout=180)
    assert done.returncode == 0, (done.stdout, done.stderr, (data_dir / "proxy.log").read_text(errors="replace"))
    result = json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])
    result["summary"] = done.stderr
    return result


def test_intercept_all_gives_clients_semulas_ca_alone_and_relays_other_hosts_unrecorded(
        tmp_path: Path, fake_provider: FakeProvider, mitm_confdir: Path) -> None:
    prompt, recordings = uniq("intercept all"), tmp_path / "recordings"
    first = semula_exec(tmp_path / "data", mitm_confdir, fake_provider.port, recordings, "auto", prompt,
                        "--intercept-all")
    assert first["certificates"] == 1, first
    assert first["decision"] == "miss" and first["other_status"] == 200 and first["other_png"], first
    assert "1 call" in str(first["summary"]), first["summary"]  # the other host's GET is not semula's call
    assert first["big"] == hashlib.sha256(big_file("/v1/files/file-big16384-dl/content") or b"").hexdigest()
    files = list((recordings / "default").rglob("*.json"))
    assert len(files) == 1 and "openai" in str(files[0]), files

    again = semula_exec(tmp_path / "data", mitm_confdir, fake_provider.port, recordings, "auto", prompt,
                        "--intercept-all")
    assert again["decision"] == "hit" and again["answer"] == first["answer"], again


def test_without_the_flag_only_provider_hosts_are_decrypted(
        tmp_path: Path, fake_provider: FakeProvider, mitm_confdir: Path) -> None:
    result = subprocess.run(
        [*semula_cmd(), "exec", "--data-dir", str(tmp_path / "data"), "--mode", "auto", "--no-recordings",
         *proxy_test_args(mitm_confdir, fake_provider.port), "--", sys.executable, "-c",
         "import os; print(os.environ.get('SSL_CERT_FILE', 'unset'), len(os.listdir(os.environ['SSL_CERT_DIR'])))"],
        capture_output=True, text=True, env=clean_env(), timeout=120)
    assert result.returncode == 0, result.stderr
    cert_file, certificates = result.stdout.strip().splitlines()[-1].split()
    assert cert_file == "unset" and int(certificates) > 100  # the public roots, and semula's CA, as a directory
