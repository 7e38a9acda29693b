"""What the benchmarks share: the machine, percentiles, the shared folder, child processes
(fake provider, proxies), the synthetic chat workload, seeding a store, and the results JSON.

Benchmarks measure and write a JSON of figures; scripts/bench/render.py turns it into
benchmark/results/<name>.md. Only public semula APIs are used.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import platform
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmark" / "results"
sys.path.insert(0, str(REPO / "addon"))
sys.path.append(str(REPO / "tests" / "support"))  # shared_paths: where ../shared (corpus, models) is

import shared_paths  # noqa: E402

corpus_file, shared_dir = shared_paths.corpus_file, shared_paths.shared_dir  # the one rule, also for the tests

# --- the machine, the shared folder, results ---------------------------------------------------


def git(*argv: str) -> str:
    try:
        return subprocess.run(["git", *argv], cwd=REPO, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine(**extra: str) -> dict[str, str]:
    """CPU model, cores, RAM, OS, Python, key package versions, the commit measured, load."""
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    cpu = next((ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines() if ln.startswith("model name")), "unknown")
    meminfo = Path("/proc/meminfo").read_text() if Path("/proc/meminfo").exists() else ""
    kb = next((int(ln.split()[1]) for ln in meminfo.splitlines() if ln.startswith("MemTotal")), 0)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    import duckdb

    dirty = git("status", "--porcelain", "--", "addon")
    return {
        "CPU": cpu, "cores": f"{os.cpu_count()} logical ({usable} usable)", "RAM": f"{kb / 2**20:.1f} GiB",
        "OS": f"{platform.system()} {platform.release()}", "Python": platform.python_version(),
        "duckdb": duckdb.__version__,
        "commit": (git("rev-parse", "--short", "HEAD") or "unknown") + (" + uncommitted addon/ changes" if dirty else ""),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load average at start": loadavg(), **extra,
    }


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def shared_path(*parts: str) -> Path:
    shared = shared_dir()
    if shared is None:
        raise SystemExit("no shared folder: set SEMULA_SHARED_DIR (or clone next to ../shared)")
    return shared.joinpath(*parts)


def write_json(path: Path, data: dict[str, Any]) -> Path:
    def clean(x: Any) -> Any:
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {str(k): clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(clean(data), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def command(name: str, argv: list[str] | None) -> str:
    """The command that ran benchmark `name` with `argv` (its main's), as a results file names it."""
    return " ".join(["scripts/bench.py", name, *(sys.argv[1:] if argv is None else argv)])


def finish(name: str, data: dict[str, Any], out: Path | None, json_out: Path | None, quick: bool = False) -> None:
    """Write the figures (JSON) and the rendered results file (a quick run's go to /tmp by default)."""
    from bench import render

    out = out or (Path(tempfile.gettempdir()) / "semula-bench" if quick else RESULTS) / f"{name}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    json_path = write_json(json_out or out.with_suffix(".json"), {"benchmark": name, **data})
    out.write_text(render.render(name, json.loads(json_path.read_text())), encoding="utf-8")
    log(f"wrote {json_path} and {out}")


_T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - _T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


# --- figures ----------------------------------------------------------------------------------


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile (nan for no values)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def summary(values: list[float], ps: tuple[int, ...] = (50, 95, 99)) -> dict[str, float]:
    return {"n": len(values), **{f"p{p}": pct(values, p) for p in ps}, "max": max(values, default=float("nan"))}


def ms_since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


# --- child processes: fake provider and proxies -----------------------------------------------


def run_in_work_dir(body: Any, prefix: str, keep: bool, stopping: str) -> int:
    """`body(procs, work)` with its child processes always stopped and its work dir removed (unless
    `keep`); SIGTERM and Ctrl-C stop them too (exit 130, `stopping` logged)."""
    procs, work = Processes(), Path(tempfile.mkdtemp(prefix=prefix))
    previous = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        return body(procs, work)
    except KeyboardInterrupt:
        log(f"interrupted: {stopping}")
        return 130
    finally:
        procs.stop_all()
        signal.signal(signal.SIGTERM, previous)
        if keep:
            log(f"work dir kept: {work}")
        else:
            import shutil

            shutil.rmtree(work, ignore_errors=True)


class Processes:
    """Every child a benchmark starts, so that all of them are stopped on any exit."""

    def __init__(self) -> None:
        self.live: dict[subprocess.Popen, Any] = {}

    def start(self, argv: list[str], log_path: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
        out = open(log_path, "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO,
                                env={**os.environ, **(env or {})}, start_new_session=True)
        self.live[proc] = out
        return proc

    def stop(self, proc: subprocess.Popen, timeout: float = 30.0) -> int | None:
        """SIGINT first (mitmproxy runs its `done` hooks: semula flushes its call log), then kill."""
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.live.pop(proc).close()
        return proc.returncode

    def stop_all(self) -> None:
        for proc in list(self.live):
            self.stop(proc, timeout=10.0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def wait_ready(proc: subprocess.Popen, log_path: Path, marker: str | None, port: int | None,
               timeout: float = 90.0) -> str:
    """Wait until `marker` is in the child's output and `port` (if given) accepts; return the marker line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log_path.read_text(errors="replace")
        line = next((ln for ln in text.splitlines() if marker in ln), None) if marker else ""
        if line is not None and (port is None or port_open(port)):
            return line
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[:4]} exited with {proc.returncode}:\n{text[-3000:]}")
        time.sleep(0.05)
    raise RuntimeError(f"{proc.args[:4]} not ready after {timeout:.0f} s")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_idle(pid: int, timeout: float = 60.0, window: float = 0.5, busy: float = 0.10) -> float:
    """Wait until the process used < `busy` cores for two windows in a row; return the seconds waited."""
    started, quiet = time.monotonic(), 0
    while time.monotonic() - started < timeout and quiet < 2:
        before = cpu_seconds(pid)
        time.sleep(window)
        quiet = quiet + 1 if (cpu_seconds(pid) - before) / window < busy else 0
    return time.monotonic() - started


def start_fake_provider(procs: Processes, work: Path, *extra: str) -> tuple[subprocess.Popen, int]:
    """tests/support/fakeprovider.py on a free port (TLS, its own certificates in work/fakecerts); `extra`: its flags."""
    log_path = work / "fakeprovider.log"
    proc = procs.start([sys.executable, str(REPO / "tests" / "support" / "fakeprovider.py"), "--port", "0",
                        "--cert-dir", str(work / "fakecerts"), *extra], log_path)
    line = wait_ready(proc, log_path, "fakeprovider ready port=", None)
    return proc, int(line.rsplit("=", 1)[1])


def start_semula_proxy(procs: Processes, work: Path, data_dir: Path, confdir: Path, mode: str = "replay",
                       name: str = "semula") -> tuple[subprocess.Popen, int]:
    """`semula proxy` on a free port; returns once it says it is ready and its port accepts."""
    port = free_port()
    log_path = work / f"{name}.log"
    proc = procs.start([sys.executable, "-m", "semula", "proxy", "--mode", mode, "--listen-host", "127.0.0.1",
                        "--listen-port", str(port), "--data-dir", str(data_dir), "--set", f"confdir={confdir}"],
                       log_path, {"PYTHONPATH": str(REPO / "addon")})
    wait_ready(proc, log_path, "semula ready", port)
    return proc, port


def ensure_ca(confdir: Path) -> Path:
    """mitmproxy's CA in `confdir`, created the way mitmproxy creates it."""
    from mitmproxy.certs import CertStore

    if not (confdir / "mitmproxy-ca-cert.pem").exists():
        confdir.mkdir(parents=True, exist_ok=True)
        CertStore.from_store(str(confdir), "mitmproxy", 2048)
    return confdir / "mitmproxy-ca-cert.pem"


def join_rebuilds(timeout: float = 600.0) -> None:
    """Wait for the full-text index's background rebuild threads (found by name)."""
    deadline = time.monotonic() + timeout
    for thread in threading.enumerate():
        if "rebuild" in thread.name:
            thread.join(max(0.0, deadline - time.monotonic()))


def settle_index(cache: Any) -> float:
    """Bring a Cache's full-text index up to date (public calls only); return the seconds it took."""
    t0 = time.perf_counter()
    join_rebuilds()
    cache.lexical.maybe_rebuild(wait=True)  # a no-op unless the index is stale and no rebuild runs
    join_rebuilds()
    return time.perf_counter() - t0


# --- a synthetic, varied chat workload (Zipf-drawn words) --------------------------------------

NOUNS = """account address agent algorithm analysis answer apartment application approach area argument article
assistant audience author backup balance bank battery benefit bill book border branch budget bug building business
cable calendar campaign candidate capacity car card career case category cause century chapter character chart check
child choice city claim class client climate clinic cluster code colleague column comment committee community company
comparison component computer concept condition conference connection contract control cost council country course
court customer dashboard data database date deadline decision delivery department deployment description design detail
developer device diagram diet difference dinner director discount disease document domain draft driver economy editor
education effect election email employee energy engine engineer error estimate event evidence example exercise
experience experiment factor family feature feedback field figure file film finance flight folder food forecast format
framework friend function fund game garden goal government grade graph group growth guide habit hardware health history
holiday hospital hotel house idea image impact incident income index industry input insurance interface interview
invoice issue item job journey key kitchen knowledge label language laptop law layer leader lesson letter level library
license limit link list loan location lunch machine manager map market meeting member memory menu message method metric
model module month mortgage movie museum network newsletter node note number object office option order organization
outcome output owner package page paper parent partner password patient payment performance period permission person
phone photo plan platform player policy portfolio position post price priority problem process product profile program
project proposal protocol provider purchase quality query question queue quote rate recipe record region release report
request research resource response restaurant result review risk role route rule salary sample schedule school score
screen script season section security sensor server service session setting share shipment signal skill software
solution source speech sprint staff stage standard statement station status step stock storage store story strategy
stream student study subject subscription summary supplier support survey system table target task team teacher
template tenant test theme thread ticket timeline title tool topic town traffic training transaction trip update
upgrade user value vendor version video village visitor volume warehouse weather website week window worker workflow
workshop year""".split()
VERBS = """accept add adjust allow analyse approve arrange assess assign avoid build calculate cancel change check choose
clean collect compare compile complete configure confirm connect contain convert copy create debug decide define delete
deliver deploy describe design detect develop discuss display download draft edit enable estimate evaluate explain
export extract filter find fix follow forecast format generate handle highlight identify ignore implement import improve
include increase install investigate join keep launch list load maintain manage measure merge migrate monitor move
negotiate notify open optimise organise outline parse plan prepare present prevent print prioritise process protect
publish rank read receive recommend reduce refactor register reject release remove rename repair replace report request
reschedule resolve restore review rewrite run save scan schedule select send share simplify sort split start store
submit suggest summarise support test track train transfer translate update upgrade upload validate verify visit
write""".split()
ADJECTIVES = """accurate active annual anonymous automatic available average basic brief broken busy careful cheap clean
clear cold common complete complex concise confidential consistent critical current daily dark default detailed
different difficult digital direct due early easy efficient empty encrypted entire essential exact existing expensive
external fair familiar fast final financial flexible formal free fresh friendly full general global good great green
healthy heavy helpful hidden high historical important internal large late legal light likely local long low main major
manual medical minor missing mobile modern monthly narrow natural necessary negative new normal obvious official old
online open optional original overdue personal physical polite popular positive possible practical precise previous
primary private professional public quick quiet rare raw ready real recent regional regular relevant remote reliable
safe secure senior separate serious shared short simple single slow small smart social special stable standard strict
strong successful suitable technical temporary tight typical unique unusual urgent useful valid visual warm weekly whole
wide wrong yearly young""".split()
ADVERBS = """quickly carefully clearly briefly usually often rarely always never already recently currently properly
exactly slightly mostly fully partly simply directly manually automatically regularly""".split()
SYLLABLES = ("bar cor dal fen gri hol ket lum mor nav pel quin ros sal tor vel wyn zor bel cas dor".split(),
             "a e i o u ia io ea".split(), "ton ville ford mark berg dale sen ria nix tek via lo ra mont son ley well".split())
CITIES = "Berlin Lisbon Hyderabad Toronto Nairobi Osaka Lima Oslo Austin Krakow Seoul Dublin".split()
LANGUAGES = "French German Spanish Italian Portuguese Japanese Dutch Polish Korean Hindi".split()
SENTENCES = (
    "The {adj} {noun} {verb} the {noun} of the {name} {noun}.", "Our {noun} {verb} {adv} when the {noun} is {adj}.",
    "We {verb} {num} {noun}s for the {adj} {noun} in {city}.",
    "{name} said the {noun} was {adj} and the {noun} {verb} too late.",
    "Please keep the {noun} {adj}, because the {name} {noun} {verb} it every {noun}.",
    "The {noun} from {name} {verb} {num} {adj} {noun}s last {noun}.", "It should not {verb} the {adj} {noun} or the {noun}.",
    "I think the {noun} {verb} the {adj} {noun} better than the {noun} does.",
)
TEMPLATES = (
    "Summarize the following notes about the {noun} {noun} for a {adj} {noun} in {num} sentences. {filler}",
    "Write a {adj} email to the {name} team explaining why the {noun} {verb} the {noun}. {filler}",
    "Can you explain how a {noun} {verb} the {noun} when the {noun} is {adj}? {filler}",
    "Translate this paragraph into {lang}: {filler}",
    "Give me {num} ideas for a {adj} {noun} that {verb} our {noun}. Context: {filler}",
    "Review this {noun} and suggest how to {verb} the {adj} {noun}. {filler}",
    "What is the difference between a {noun} and a {adj} {noun} in {name}? {filler}",
    "Rewrite the text below so that it sounds more {adj}. {filler}",
    "I am planning a trip to {city} with my {noun}. {filler} What should we {verb} first?",
    "Classify this customer message as positive, negative or neutral. {filler}",
    "Extract every {noun}, {noun} and date from this text. {filler}",
    "Draft a {adj} {noun} for the {name} {noun} meeting on {city} {noun}. {filler}",
    "Help me {verb} the {noun} in our {name} {noun}; {filler}",
    "List the risks of the {adj} {noun} and how to {verb} them. {filler}",
)
SYSTEM_PROMPTS = ("You are a helpful assistant.", "You are a concise assistant for an operations team. Answer in plain text.")
PROJECT = "bench"


def _inflect(rng: random.Random, word: str, kind: str) -> str:
    if kind not in ("noun", "verb"):
        return word
    r, plural = rng.random(), "es" if word.endswith(("s", "x", "ch", "sh")) else "s"
    if kind == "noun":
        return word + plural if r < 0.3 else word
    if r < 0.2:
        return word + ("d" if word.endswith("e") else "ed")
    if r < 0.35:
        return (word[:-1] if word.endswith("e") else word) + "ing"
    return word + plural if r < 0.5 else word


class Vocabulary:
    """~3k word forms: real nouns/verbs/adjectives with inflections plus made-up names, Zipf-weighted."""

    def __init__(self, seed: int = 7):
        rng = random.Random(seed)
        names = sorted({a + b + c for a, b, c in itertools.product(*SYLLABLES)})
        rng.shuffle(names)
        self.lists = {}
        for kind, words in (("noun", NOUNS), ("verb", VERBS), ("adj", ADJECTIVES), ("name", names[:1500])):
            shuffled = list(words)
            rng.shuffle(shuffled)
            self.lists[kind] = (shuffled, list(itertools.accumulate(1.0 / (r + 1) for r in range(len(shuffled)))))

    def pick(self, rng: random.Random, kind: str) -> str:
        words, cum = self.lists[kind]
        return _inflect(rng, rng.choices(words, cum_weights=cum)[0], kind)

    def any_word(self, rng: random.Random) -> str:
        return self.pick(rng, rng.choice(("noun", "noun", "verb", "adj", "name")))

    def fill(self, template: str, rng: random.Random) -> str:
        slots = {"noun": lambda: self.pick(rng, "noun"), "verb": lambda: self.pick(rng, "verb"),
                 "adj": lambda: self.pick(rng, "adj"), "name": lambda: self.pick(rng, "name").capitalize(),
                 "adv": lambda: rng.choice(ADVERBS), "num": lambda: str(rng.choice((2, 3, 4, 5, 10, 12, 25))),
                 "city": lambda: rng.choice(CITIES), "lang": lambda: rng.choice(LANGUAGES), "filler": lambda: ""}
        out = []
        for part in template.split("{"):
            slot, _, rest = part.partition("}") if "}" in part else ("", "", part)
            out.append((slots[slot]() if slot else "") + rest)
        return "".join(out)

    def prompt(self, rng: random.Random) -> str:
        """An instruction template plus filler sentences, ~20-60 words."""
        target, template = rng.randint(20, 60), rng.choice(TEMPLATES)
        count, sentences = len(self.fill(template.replace("{filler}", ""), rng).split()), []
        while count < target:
            sentences.append(self.fill(rng.choice(SENTENCES), rng))
            count += len(sentences[-1].split())
        prefix, _, suffix = template.partition("{filler}")
        return (self.fill(prefix, rng) + " ".join(sentences) + self.fill(suffix, rng)).strip()

    def paraphrase(self, prompt: str, rng: random.Random) -> str:
        """The prompt with 1-3 words replaced, dropped or inserted."""
        words = prompt.split()
        for _ in range(rng.randint(1, 3)):
            i, op = rng.randrange(len(words)), rng.random()
            if op < 0.6:
                words[i] = self.any_word(rng)
            elif op < 0.8 and len(words) > 5:
                del words[i]
            else:
                words.insert(i, rng.choice(("really", "please", "also", "just", self.any_word(rng))))
        return " ".join(words)


def bench_key() -> Any:
    """The fingerprint key of requests canonicalised outside a store (the bench prompts hold no secret)."""
    from semula.core.redact import FingerprintKey

    return FingerprintKey(b"semula-bench-fingerprint-salt-32")


def canonical_for(prompt: str, variant: int) -> Any:
    """An OpenAI chat request for `prompt`, canonicalised by semula's own adapter."""
    from semula.engine.evaluate import canonical_of

    body = {"model": ("gpt-4o-mini", "gpt-4o")[variant % 2], "temperature": 0,
            "messages": [{"role": "system", "content": SYSTEM_PROMPTS[variant % 2]}, {"role": "user", "content": prompt}]}
    return canonical_of({"provider": "openai", "path": "/v1/chat/completions", "body": body}, bench_key())


def answer_body(i: int, text: str | None = None) -> bytes:
    return json.dumps({
        "id": f"chatcmpl-bench{i:07d}", "object": "chat.completion", "created": 1_700_000_000 + i, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text or f"synthetic answer #{i}"}}],
        "usage": {"prompt_tokens": 60, "completion_tokens": 5, "total_tokens": 65},
    }).encode()


def new_entry(canonical: Any, i: int, project: str = PROJECT, host: str = "api.openai.com", status: int = 200,
              headers: list[tuple[str, str]] | None = None, body: bytes | None = None) -> Any:
    """The NewEntry the addon records for this request (through the addon's own `recording_of`)."""
    from semula.core.settings import ProjectSettings
    from semula.providers.base import Usage
    from semula.recordings.entry import Answer, recording_of

    answer = Answer(host=host, body=body if body is not None else answer_body(i), status=status,
                    headers=headers or [("content-type", "application/json")], usage=Usage(60, 5),
                    upstream_ms=250.0 + i % 100)
    return recording_of(project, canonical, ProjectSettings(), answer)


def workload(n: int) -> tuple[Vocabulary, list[str], list[Any]]:
    """n distinct prompts and their entries."""
    vocab, prompts, entries, seen, i = Vocabulary(), [], [], set(), 0
    while len(entries) < n:
        prompt = vocab.prompt(random.Random(i))
        entry = new_entry(canonical_for(prompt, i), i)
        i += 1
        if entry.request_fp not in seen:
            seen.add(entry.request_fp)
            prompts.append(prompt)
            entries.append(entry)
    return vocab, prompts, entries


def seeded_store(data_dir: Path | str, entries: list[Any]) -> tuple[Any, dict[str, int], float]:
    """A store holding `entries`, their ids by request_fp, and the seconds that took."""
    from semula.store.selection import StoreSpec, open_store

    t0 = time.perf_counter()
    from semula.core.request.canonical import FINGERPRINT_VERSION

    store = open_store(StoreSpec.parse(None, data_dir))
    bulk_insert(store, entries)
    store.set_fingerprint_version(FINGERPRINT_VERSION)  # made by this code: nothing for the engine to redo
    return store, dict(store.con.execute("SELECT request_fp, id FROM entries").fetchall()), time.perf_counter() - t0


def bulk_insert(store: Any, entries: list[Any]) -> None:
    """One INSERT of the values `DuckDBStore.upsert_entry` writes for each NewEntry (`Cache.record` costs
    10-40 ms a row; the benchmarks then check that the rows are served as exact hits)."""
    store.upsert_entries(entries)


def miss_decision(cache: Any, canonical: Any, project: str = PROJECT) -> tuple[float, str, Any]:
    """The whole decision as the addon takes it for a request: (ms, outcome, NearSearch or None)."""
    from semula.core.bypass import near_bypass
    from semula.core.request.canonical import normalised_fingerprint, request_fingerprint
    from semula.core.cascade import NearQuery

    settings = cache.settings_for(project)
    rfp, nfp = request_fingerprint(canonical), normalised_fingerprint(canonical, *settings.fingerprint_inputs)
    t0 = time.perf_counter()
    match = cache.match(project, rfp, nfp)
    if match is not None:
        return ms_since(t0), f"served ({match.tier})", None
    bypass = near_bypass(canonical, settings)
    near = cache.searcher.search(NearQuery(project, canonical, rfp, nfp, settings, bypass.reason if bypass else None))
    ms = ms_since(t0)
    if near.served is not None:
        return ms, f"served ({near.served.tier})", near
    if near.queued:
        return ms, "review (" + "+".join(sorted({c.verdict.tier for c in near.queued})) + ")", near
    return ms, "miss", near


class Timers:
    """Wraps public methods of live objects with accumulating timers (undone by `undo`)."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.last: dict[str, Any] = {}
        self._undo: list[Any] = []

    def wrap(self, owner: Any, attr: str, name: str | None = None) -> Timers:
        name, original = name or attr, getattr(owner, attr)

        def timed(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                self.last[name] = original(*a, **k)
                return self.last[name]
            finally:
                self.ms[name] = self.ms.get(name, 0.0) + ms_since(t0)
                self.calls[name] = self.calls.get(name, 0) + 1

        setattr(owner, attr, timed)
        self._undo.append(lambda: setattr(owner, attr, original) if isinstance(owner, type(sys))
                          else owner.__dict__.pop(attr, None))
        return self

    def take(self) -> dict[str, float]:
        out, self.ms = self.ms, {}
        return out

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()
