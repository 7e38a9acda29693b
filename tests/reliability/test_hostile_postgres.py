"""A hostile Postgres under a real `semula proxy`: frozen (SIGSTOP), a NUL byte in a prompt or model,
a wrong password, and a server out of connection slots.

A frozen server accepts TCP (its kernel does) but never answers: a miss must still go upstream within
the watchdog's bound (`postgres.connect.FROZEN_BOUND_SECONDS`), the console must say "lost the Postgres
store" once, and the store must come back by itself after SIGCONT. A server that refuses the
connection (password, too many clients) is named with its own reason, never the password, and a
store command exits non-zero with one line. The servers here are this module's own (not the
session's), since they get frozen and reconfigured.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import psycopg
import pytest
from conftest import ProxyFactory
from e2e_helpers import openai_client, run_semula, uniq

import entries
import pg_helpers
from semula.store.postgres.connect import FROZEN_BOUND_SECONDS, POOL_WAIT_SECONDS
from semula.store.postgres.store import PgStore
from semula.store.types import StoreError

pytestmark = pytest.mark.e2e
MODEL = "gpt-4o-mini"
PASSWORD_USER = "semula_pw"
RIGHT_PASSWORD = "right-horse-battery"
WRONG_PASSWORD = "wrong-staple-8c1f"
# What a call may take beyond the store's bound: the proxy, the fake provider, a busy test machine.
SLACK_SECONDS = 2.5
FAST_SECONDS = 2.0  # a call that must not wait for the store at all (fail fast), with the same slack
PATIENCE_SECONDS = 30  # a safety net for polls, never the measure


def _start_server() -> pg_helpers.PostgresServer:
    try:
        return pg_helpers.start_postgres()
    except pg_helpers.PostgresUnavailable as e:
        reason = f"PostgreSQL tests cannot run: {e}"
        if pg_helpers.required():
            pytest.fail(f"{reason} ({pg_helpers.REQUIRE_ENV}=1 requires them)", pytrace=False)
        pytest.skip(reason)


@pytest.fixture(scope="module")
def server() -> Iterator[pg_helpers.PostgresServer]:
    """This module's own server, with a role that must give a password (scram) on loopback."""
    server = _start_server()
    try:
        with psycopg.connect(server.url(), autocommit=True) as con:
            con.execute(f"CREATE ROLE {PASSWORD_USER} LOGIN SUPERUSER PASSWORD '{RIGHT_PASSWORD}'")
        hba = server.data / "pg_hba.conf"
        hba.write_text(f"host all {PASSWORD_USER} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        with psycopg.connect(server.url(), autocommit=True) as con:
            con.execute("SELECT pg_reload_conf()")
        yield server
    finally:
        pg_helpers.discard(server)


def server_pids(server: pg_helpers.PostgresServer) -> list[int]:
    """The postmaster and every process it started (backends, background workers)."""
    postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
    pids = [postmaster]
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = (open(f"/proc/{name}/stat").read()).rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(stat[1]) == postmaster:
            pids.append(int(name))
    return pids


@contextmanager
def frozen(server: pg_helpers.PostgresServer) -> Iterator[None]:
    pids = server_pids(server)
    stopped = []
    try:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:  # a backend that ended since it was listed
                continue
            stopped.append(pid)
        yield
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass


def ask(client, text: str, model: str = MODEL):
    raw = client.chat.completions.with_raw_response.create(model=model, messages=[{"role": "user", "content": text}])
    return raw.headers, raw.parse().choices[0].message.content


def timed_ask(client, text: str, model: str = MODEL):
    started = time.monotonic()
    headers, answer = ask(client, text, model)
    return headers, answer, time.monotonic() - started


def poll(condition, what: str, output=lambda: "") -> None:
    deadline = time.monotonic() + PATIENCE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"{what} never happened\n{output()[-3000:]}"
        time.sleep(0.05)


def listening(url: str) -> bool:
    """Whether a proxy's follower holds its LISTEN connection on this database."""
    database = url.rsplit("/", 1)[1]
    with psycopg.connect(url, autocommit=True) as con:
        return con.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = 'semula' "
                           "AND query LIKE 'LISTEN%%'", [database]).fetchone()[0] > 0


def password_url(server: pg_helpers.PostgresServer, database: str, password: str) -> str:
    return f"postgresql://{PASSWORD_USER}:{password}@127.0.0.1:{server.port}/{database}"


def assert_one_line_failure(result, *needles: str, secret: str | None = None) -> None:
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert "Traceback" not in out, out
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out
    for needle in needles:
        assert needle in lines[0], out
    if secret:
        assert secret not in out, out


# --- (a) frozen -----------------------------------------------------------------------------------


def test_a_frozen_server_fails_open_within_the_bound_and_comes_back(proxy_factory: ProxyFactory, server) -> None:
    url = server.new_database()
    proxy = proxy_factory("auto", extra_args=("--store", url))
    client = openai_client(proxy.proxy_url, proxy.ca_path)
    known = uniq("Name the longest river in Spain")
    headers, answer = ask(client, known)
    assert headers["x-semula-decision"] == "miss" and headers.get("x-semula-entry"), proxy.output()[-2000:]
    poll(lambda: listening(url), "the proxy's LISTEN connection", proxy.output)

    with frozen(server):
        headers, _, took = timed_ask(client, uniq("Name the highest peak in Portugal"))
        assert headers["x-semula-decision"] == "miss" and not headers.get("x-semula-entry"), headers
        assert took < FROZEN_BOUND_SECONDS + SLACK_SECONDS, f"a miss on a frozen store took {took:.1f} s"
        assert proxy.pump.wait_for(lambda s: "lost the Postgres store" in s, PATIENCE_SECONDS), proxy.output()[-3000:]
        # while the follower knows it is down: later misses do not wait for the store, hits come from memory
        headers, _, took = timed_ask(client, uniq("Name the largest lake in Italy"))
        assert headers["x-semula-decision"] == "miss" and took < FAST_SECONDS, (headers, took)
        headers, again, took = timed_ask(client, known)
        assert headers["x-semula-decision"] == "hit" and again == answer and took < FAST_SECONDS, (headers, took)

    assert proxy.pump.wait_for(lambda s: "is back" in s, PATIENCE_SECONDS), proxy.output()[-3000:]
    fresh = uniq("Name the capital of Slovenia")
    poll(lambda: bool(ask(client, fresh)[0].get("x-semula-entry")), "recording after SIGCONT", proxy.output)
    assert proxy.output().count("lost the Postgres store") == 1, proxy.output()[-3000:]


def test_a_call_on_a_frozen_server_fails_within_the_bound_without_a_follower(server) -> None:
    """The CLI's case: no follower marks the store down, yet every call is bounded, and the store
    answers again after SIGCONT."""
    url = server.new_database()
    store = PgStore.open(url)
    store.follows_changes = False
    try:
        with frozen(server):
            for _ in range(2):
                started = time.monotonic()
                with pytest.raises(StoreError) as raised:
                    store.meta("fingerprint_version")
                took = time.monotonic() - started
                assert "stopped answering" in str(raised.value) or "unreachable" in str(raised.value)
                # with a pooled connection: the watchdog's bound; without one (it was shut): the pool's wait
                assert took < max(FROZEN_BOUND_SECONDS, POOL_WAIT_SECONDS) + SLACK_SECONDS, f"{took:.1f} s"
        poll(lambda: _answers(store), "the store answering after SIGCONT")
    finally:
        store.close()


def _answers(store: PgStore) -> bool:
    try:
        store.meta("fingerprint_version")
        return True
    except StoreError:
        return False


# --- (b) NUL ---------------------------------------------------------------------------------------


def test_a_nul_in_a_prompt_or_model_records_and_hits_on_postgres(proxy_factory: ProxyFactory, server) -> None:
    url = server.new_database()
    recorder = proxy_factory("auto", extra_args=("--store", url))
    client = openai_client(recorder.proxy_url, recorder.ca_path)
    prompt = uniq("Spell\x00this") + " with a NUL \x00 inside"
    nul_model = "gpt-4o-mini\x00x"
    headers, answer = ask(client, prompt)
    assert headers["x-semula-decision"] == "miss" and headers.get("x-semula-entry"), recorder.output()[-2000:]
    headers, model_answer = ask(client, prompt + " (model)", nul_model)
    assert headers.get("x-semula-entry"), recorder.output()[-2000:]
    headers, again = ask(client, prompt)
    assert headers["x-semula-decision"] == "hit" and again == answer

    listed = run_semula("entries", "list", "--store", url, "--json")
    assert listed.returncode == 0, listed.stderr
    texts = {e["model"]: e["last_text"] for e in json.loads(listed.stdout)}
    assert any(prompt in t for t in texts.values()) and nul_model in texts, texts

    # read back from the server by a proxy that never saw the calls: the same answers
    replayer = proxy_factory("replay", extra_args=("--store", url))
    other = openai_client(replayer.proxy_url, replayer.ca_path)
    headers, replayed = ask(other, prompt)
    assert headers["x-semula-decision"] == "hit" and replayed == answer
    headers, replayed = ask(other, prompt + " (model)", nul_model)
    assert headers["x-semula-decision"] == "hit" and replayed == model_answer


def test_the_escaping_is_exact_and_leaves_plain_text_alone() -> None:
    import itertools

    from semula.store.postgres import text as pg_text

    for n in range(1, 5):  # every string of up to four of the characters that matter
        for chars in itertools.product(["\x00", "\uffff", "0", "a"], repeat=n):
            text = "".join(chars)
            encoded = pg_text.encode(text)
            assert "\x00" not in encoded and pg_text.decode(encoded) == text, repr(text)
    assert pg_text.encode("plain text, ünïcode ✓") == "plain text, ünïcode ✓"


def test_nul_and_the_escape_character_round_trip_exactly(server) -> None:
    store = PgStore.open(server.new_database())
    try:
        for n, text in enumerate(["a\x00b", "\uffff0", "\uffff\uffff", "\x00\uffff0\x00", "x\uffff", "\uffff", "plain"]):
            new = entries.new_entry(entries.chat(f"hello {text}"), f"proj\x00{n}", request_fp=f"fp{n}",
                                    normalised_fp=f"nfp{n}")
            new = replace(new, model=f"m\x00{text}", last_text=f"last {text}")
            entry = store.get_entry(store.upsert_entry(new))
            assert entry is not None
            assert (entry.project, entry.model, entry.last_text, entry.canonical, entry.request_fp) == (
                new.project, new.model, new.last_text, new.canonical, new.request_fp)
            assert store.entries_with_normalised_fp(new.project, new.normalised_fp) == [entry.id]
        with psycopg.connect(store.url) as con:  # a value without either character is stored as it is
            assert con.execute("SELECT last_text FROM entries WHERE request_fp = 'fp6'").fetchone()[0] == "last plain"
    finally:
        store.close()


# --- (c) wrong password ------------------------------------------------------------------------------


def test_a_wrong_password_is_named_fails_fast_and_exits_non_zero(proxy_factory: ProxyFactory, server) -> None:
    database = server.new_database().rsplit("/", 1)[1]
    bad = password_url(server, database, WRONG_PASSWORD)
    started = time.monotonic()
    with pytest.raises(StoreError) as raised:
        PgStore.open(bad)
    assert time.monotonic() - started < FAST_SECONDS
    message = str(raised.value)
    assert "password authentication failed" in message and WRONG_PASSWORD not in message and "***" in message
    assert "pool initialization" not in message

    assert_one_line_failure(run_semula("entries", "list", "--store", bad), "password authentication failed",
                            secret=WRONG_PASSWORD)
    assert_one_line_failure(run_semula("config", "show", "--store", bad), "password authentication failed",
                            secret=WRONG_PASSWORD)

    proxy = proxy_factory("auto", extra_args=("--store", bad))
    client = openai_client(proxy.proxy_url, proxy.ca_path)
    for n in range(3):  # forwarded unrecorded ("error": the store is unavailable), none waits for the store
        upstream_before = proxy_factory.fake.count()
        headers, _, took = timed_ask(client, uniq(f"Count to {n + 3}"))
        assert headers["x-semula-decision"] == "error" and not headers.get("x-semula-entry"), headers
        assert proxy_factory.fake.count() == upstream_before + 1
        assert took < FAST_SECONDS, f"call {n} waited {took:.1f} s for a store that cannot open"
    assert "password authentication failed" in proxy.output(), proxy.output()[-3000:]
    assert WRONG_PASSWORD not in proxy.output()

    store = PgStore.open(password_url(server, database, RIGHT_PASSWORD))  # the right one works
    store.close()


# --- (d) too many clients ------------------------------------------------------------------------------


def test_too_many_clients_is_named_and_exits_non_zero() -> None:
    small = _start_server()
    try:
        small.stop()
        small._ctl("-l", str(small.root / "server.log"), "-o",
                   f"-c listen_addresses=127.0.0.1 -c port={small.port} -c unix_socket_directories={small.root} "
                   "-c fsync=off -c max_connections=3 -c superuser_reserved_connections=0", "start")
        url = small.new_database()
        held = []
        try:
            while True:  # every slot taken
                try:
                    held.append(psycopg.connect(url, autocommit=True))
                except psycopg.OperationalError as e:
                    assert "too many clients" in str(e)
                    break
                assert len(held) < 10
            started = time.monotonic()
            with pytest.raises(StoreError) as raised:
                PgStore.open(url)
            assert time.monotonic() - started < FAST_SECONDS
            assert "too many clients" in str(raised.value) and "pool initialization" not in str(raised.value)
            assert_one_line_failure(run_semula("entries", "list", "--store", url), "too many clients")
        finally:
            for con in held:
                con.close()
        store = PgStore.open(url)  # slots free again: it opens
        store.close()
    finally:
        pg_helpers.discard(small)
