"""The review page: the open candidates as cards, from the plain dicts `review.show` returns.

Every value that came from a request, an answer or the store is escaped here (`highlight.escape`)
or by `highlight`'s diff; the only markup is this module's own. The page is split in two: a shell
(`shell_html`: no data, served to anyone who names this server) whose nonce'd script takes the token
from the URL's fragment into sessionStorage, and the queue (`queue_html`), which the script fetches
with the token in a header and inserts, so nothing queued is ever sent without the token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from semula.core.tiers import NEAR
from semula.review_web.highlight import escape, field_changes, side_by_side

SHAPE_FIELDS = ("provider", "method", "endpoint", "model", "stream")
KNOWN_TIERS = tuple(t.value for t in NEAR)  # the review queue holds near-match candidates only


@dataclass(frozen=True)
class Filters:
    project: str | None = None
    tier: str | None = None
    min_score: float | None = None

    def admits(self, row: Mapping[str, Any]) -> bool:
        return ((self.tier is None or row.get("tier") == self.tier)
                and (self.min_score is None or float(row.get("score") or 0) >= self.min_score))


@dataclass(frozen=True)
class QueuePage:
    filters: Filters
    projects: Sequence[str]
    tiers: Sequence[str]
    candidates: Sequence[Mapping[str, Any]]  # `review.show` results, best first
    matching: int  # how many open candidates pass the filters (more than shown when the page is full)
    error: str | None = None


def _shape_rows(recorded: Mapping[str, Any] | None, incoming: Mapping[str, Any]) -> str:
    rows = []
    for field in SHAPE_FIELDS:
        old = "(the recording was deleted)" if recorded is None else _shape_value(field, recorded.get(field))
        new = _shape_value(field, incoming.get(field))
        changed = ' class="changed"' if old != new else ""
        rows.append(f"<tr{changed}><th>{escape(field)}</th><td>{escape(old)}</td><td>{escape(new)}</td></tr>")
    return "".join(rows)


def _shape_value(field: str, value: Any) -> str:
    if field == "stream":
        return "stream" if value else "non-stream"
    return str(value)


def _field_rows(candidate: Mapping[str, Any]) -> str:
    changes = field_changes({"params": candidate.get("recorded_params") or {}},
                            {"params": candidate.get("request_params") or {}})
    rows = [f'<tr class="changed"><th>{escape(c.path)}</th><td><code>{escape(c.recorded)}</code></td>'
            f"<td><code>{escape(c.incoming)}</code></td></tr>" for c in changes]
    old_system, new_system = candidate.get("recorded_system") or "", candidate.get("request_system") or ""
    if old_system != new_system:
        left, right = side_by_side(old_system, new_system)
        rows.append(f'<tr class="changed"><th>system</th><td class="text">{left}</td><td class="text">{right}</td></tr>')
    return "".join(rows)


def _notes(candidate: Mapping[str, Any]) -> str:
    notes = []
    if candidate.get("shape_differs"):
        notes.append(f"shapes differ ({candidate['shape_differs']}): this pairing can never be served")
    if own := candidate.get("own_recordings"):
        notes.append(f"this request has its own recording #{own[0]}: approving is refused (it would never be served)")
    return "".join(f'<p class="note">{escape(n)}</p>' for n in notes)


def candidate_html(candidate: Mapping[str, Any]) -> str:
    left, right = side_by_side(candidate.get("recorded_text") or "", candidate.get("request_text") or "")
    fields = _field_rows(candidate)
    answer_what = "recorded answer" if candidate.get("answer_format") == "text" else "recorded answer (the body)"
    own_answer = candidate.get("own_answer")
    own = (f'<section><h3>this request\'s own answer</h3><pre class="text">{escape(own_answer)}</pre></section>'
           if own_answer else '<section><h3>this request\'s answer</h3><p class="muted">none recorded: approving '
                              "serves it the recorded answer</p></section>")
    cid = int(candidate["id"])
    return f"""
<article class="card" id="c-{cid}" data-id="{cid}" data-project="{escape(str(candidate.get('project')))}"
 data-tier="{escape(str(candidate.get('tier')))}" tabindex="-1">
 <header><b>#{cid}</b> · project <b>{escape(str(candidate.get('project')))}</b> · tier
  <b class="tier">{escape(str(candidate.get('tier')))}</b> · score <b class="score">{float(candidate.get('score') or 0):.3f}</b>
  · recording #{int(candidate.get('entry_id') or 0)} · <span class="status">{escape(str(candidate.get('status')))}</span></header>
 <p class="guard">guard: <b>{escape(candidate.get('guard_reason') or 'pass')}</b> · not served because:
  {escape(str(candidate.get('reason') or ''))}</p>
 {_notes(candidate)}
 <div class="sides">
  <section><h3>recorded request</h3><pre class="text recorded">{left}</pre></section>
  <section><h3>this request</h3><pre class="text incoming">{right}</pre></section>
 </div>
 <table class="fields"><tr><th></th><th>recorded</th><th>this request</th></tr>
  {_shape_rows(candidate.get('recorded_shape'), candidate.get('request_shape') or {})}{fields}</table>
 <div class="sides">
  <section><h3>{answer_what}</h3><pre class="text answer">{escape(str(candidate.get('answer') or ''))}</pre></section>
  {own}
 </div>
 <p class="actions"><button type="button" class="approve" data-action="approve">approve (a)</button>
  <button type="button" class="reject" data-action="reject">reject (r)</button>
  <span class="result" role="status"></span></p>
</article>"""


def _options(values: Sequence[str], chosen: str | None, everything: str) -> str:
    out = [f'<option value=""{" selected" if chosen is None else ""}>{escape(everything)}</option>']
    for value in values:
        selected = " selected" if value == chosen else ""
        out.append(f'<option value="{escape(value)}"{selected}>{escape(value)}</option>')
    return "".join(out)


def _filters_html(page: QueuePage) -> str:
    f = page.filters
    projects = sorted({*page.projects, *([f.project] if f.project else [])})
    score = "" if f.min_score is None else f"{f.min_score:g}"
    return f"""<form class="filters" method="get" action="/">
 <label>project <select name="project">{_options(projects, f.project, "all projects")}</select></label>
 <label>tier <select name="tier">{_options(list(page.tiers), f.tier, "all tiers")}</select></label>
 <label>min score <input name="min_score" type="number" min="0" max="1" step="0.01" value="{escape(score)}"></label>
 <button type="submit">filter</button></form>"""


def queue_html(page: QueuePage) -> str:
    """The filters, the summary and the cards: what `GET /api/queue` answers and the shell's script inserts."""
    shown = len(page.candidates)
    if page.error:
        summary = f'<p class="error">{escape(page.error)}</p>'
    elif not shown:
        summary = '<p class="muted" id="empty">no open review candidates match</p>'
    else:
        more = f" (the first {shown}: narrow the filters for the rest)" if page.matching > shown else ""
        summary = f'<p class="muted">{page.matching} open candidate(s){escape(more)} · keys: j/k next/previous, ' \
                  "a approve, r reject</p>"
    cards = "".join(candidate_html(c) for c in page.candidates)
    return f"{_filters_html(page)}{summary}<div class=\"cards\">{cards}</div>"


def shell_html(nonce: str) -> str:
    """The page without data or token: its script loads the queue with the token this tab holds."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>semula review</title>
<meta name="referrer" content="no-referrer"><style nonce="{escape(nonce)}">{STYLE}</style></head>
<body><h1>semula review</h1><p class="muted" id="status" role="status">loading the review queue…</p>
<main></main><script nonce="{escape(nonce)}">{SCRIPT}</script></body></html>"""


STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1rem 2rem;color:#222}
h1{font-size:1.3rem} h3{font-size:.9rem;margin:.2rem 0;color:#555}
.filters label{margin-right:1rem} .muted{color:#777} .error,.note{color:#a40}
.card{border:1px solid #ccc;border-radius:6px;padding:.6rem 1rem;margin:1rem 0}
.card.current{border-color:#36c;box-shadow:0 0 0 2px #36c3}
.card.approved{background:#f0fff0} .card.rejected{background:#fff3f0}
.sides{display:grid;grid-template-columns:1fr 1fr;gap:1rem}
pre.text,td.text{white-space:pre-wrap;word-break:break-word;background:#f7f7f7;padding:.4rem;margin:0;
 max-height:24rem;overflow:auto;font:13px/1.4 ui-monospace,monospace}
del.w{background:#fcc;text-decoration:line-through} ins.w{background:#cfc;text-decoration:none}
table.fields{border-collapse:collapse;margin:.5rem 0} .fields td,.fields th{border:1px solid #ddd;padding:.2rem .5rem;
 text-align:left;vertical-align:top} tr.changed td{background:#fff6d6}
.actions button{margin-right:.5rem;padding:.3rem .9rem} .result{margin-left:1rem;font-weight:600}
"""

SCRIPT = """
(() => {
  const KEY = 'semula-review-token';  // sessionStorage: this tab and this origin (scheme, host, port) only
  const given = new URLSearchParams(location.hash.slice(1)).get('token');
  if (given) {
    sessionStorage.setItem(KEY, given);
    history.replaceState(null, '', location.pathname + location.search);  // out of the address bar and history
  }
  const token = sessionStorage.getItem(KEY);
  const status = document.getElementById('status');
  const main = document.querySelector('main');
  let cards = [];
  let current = -1;
  function select(i) {
    if (!cards.length) return;
    current = Math.max(0, Math.min(cards.length - 1, i));
    cards.forEach((c, n) => c.classList.toggle('current', n === current));
    cards[current].scrollIntoView({block: 'nearest'});
    cards[current].focus({preventScroll: true});
  }
  async function call(path, init) {
    try {
      const response = await fetch(path, {...init, cache: 'no-store', credentials: 'omit',
        headers: {...(init.headers || {}), 'X-Semula-Token': token}});
      return await response.json();
    } catch (e) {
      return {ok: false, error: String(e)};
    }
  }
  async function decide(card, action) {
    if (card.dataset.done) return;
    const buttons = card.querySelectorAll('button');
    const result = card.querySelector('.result');
    buttons.forEach(b => b.disabled = true);
    result.textContent = action === 'approve' ? 'approving…' : 'rejecting…';
    const data = await call('/api/' + action, {method: 'POST', headers: {'Content-Type': 'application/json'},
      body: JSON.stringify({id: Number(card.dataset.id)})});
    if (data.ok) {
      card.dataset.done = action;
      card.classList.add(action === 'approve' ? 'approved' : 'rejected');
      card.querySelector('.status').textContent = action === 'approve' ? 'approved' : 'rejected';
      result.textContent = data.message;
      const next = cards.findIndex((c, n) => n > cards.indexOf(card) && !c.dataset.done);
      if (next >= 0) select(next);
    } else {
      result.textContent = 'error: ' + data.error;
      buttons.forEach(b => b.disabled = false);
    }
  }
  async function load() {
    if (!token) {
      status.textContent = 'no token in this tab: open the URL semula review web printed';
      return;
    }
    const data = await call('/api/queue' + location.search, {method: 'GET'});
    if (!data.ok) {
      status.textContent = 'error: ' + data.error;
      return;
    }
    main.innerHTML = data.html;  // the server's own markup: every stored value in it is escaped
    status.remove();
    cards = Array.from(main.querySelectorAll('article.card'));
    cards.forEach((card, n) => {
      card.addEventListener('click', () => select(n));
      card.querySelectorAll('button[data-action]').forEach(b =>
        b.addEventListener('click', e => { e.stopPropagation(); select(n); decide(card, b.dataset.action); }));
    });
    select(0);
  }
  document.addEventListener('keydown', e => {
    if (e.ctrlKey || e.metaKey || e.altKey || e.target.closest('input,select,textarea')) return;
    if (e.key === 'j') select(current + 1);
    else if (e.key === 'k') select(current - 1);
    else if ((e.key === 'a' || e.key === 'r') && current >= 0) decide(cards[current], e.key === 'a' ? 'approve' : 'reject');
  });
  load();
})();
"""
