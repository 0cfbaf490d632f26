// The dashboard: three views behind a hash router (#/ sessions, #/session/<id>, #/patterns).
// Reads come from /api/v1/dashboard/*, writes (score, evaluate) from the service API; live scoring state
// from the WebSocket. Every piece of session data is written as text (see dom.js).

import { api, getJSON, query } from './api.js';
import { barChart, countBars, lineChart, rateChart, rateLines } from './charts.js';
import { append, clear, fmtTime, h, truncate } from './dom.js';
import { Live } from './live.js';

const app = document.getElementById('app');
const ACTIVE = new Set(['pending', 'in_progress']);
const PAGE_SIZE = 25;
const PHASES = {
  analyzing_methodology: 'analysing the methodology',
  identifying_missing_tools: 'identifying missing tools',
};

let view = null; // the current view: { kind, id?, dispose(), onRoute?(route) }

// ---------------------------------------------------------------------------------------------------
// Shared pieces

/**
 * The alert score badge: "N/100", "Not scored", "Scoring…" while active, "Scoring failed" in red. A score has no
 * colour of its own: colours say verdicts (pass, fail, inconclusive, error, smoke), never a score band.
 */
export function scoreBadge(scoringStatus, totalScore) {
  let cls = 'none';
  let text = 'Not scored';
  if (ACTIVE.has(scoringStatus)) {
    cls = 'active';
    text = 'Scoring…';
  } else if (totalScore !== null && totalScore !== undefined) {
    cls = 'scored';
    text = `${totalScore}/100`;
  } else if (['failed', 'timed_out', 'cancelled'].includes(scoringStatus)) {
    cls = 'error';
    text = `Scoring ${scoringStatus.replace('_', ' ')}`;
  }
  return h('span', {
    class: `badge score-badge ${cls}`,
    dataset: { testid: 'score-badge', state: scoringStatus || 'not_scored', score: totalScore ?? '' },
    text,
  });
}

/**
 * The run's judgement: its latest evaluation's overall score (0-1), "Judging…" while one runs, else why there is none.
 * Score, coverage and verdict all come from the service (the verdict model): nothing is decided here. The colour
 * is the verdict's, never the score's: a failed verdict red, judged with no failure green (how much was judged
 * goes beside it: `coverageNote`).
 * A finished evaluation that no judge judged shows "Not judged", never a score.
 */
export function judgementBadge(evaluationStatus, overall, smoke = false, coverage = null, failed = false) {
  let cls = 'none';
  let text = 'Not judged';
  if (overall !== null && overall !== undefined) {
    cls = failed ? 'bad' : 'good';
    text = overall.toFixed(2);
  } else if (ACTIVE.has(evaluationStatus)) {
    cls = 'active';
    text = 'Judging…';
  } else if (['failed', 'timed_out', 'cancelled'].includes(evaluationStatus)) {
    cls = 'error';
    text = `Judging ${evaluationStatus.replace('_', ' ')}`;
  }
  return h('span', {
    class: `badge judgement-badge ${cls}${smoke ? ' is-smoke' : ''}`,
    title: coverage
      ? `Overall score of the latest failure-mode evaluation: ${coverage.label} (0.50 and above: passed, only minor findings cost; below 0.50: a mode failed, below 0.25 by a check)`
      : 'Overall score of the latest failure-mode evaluation (0.50 and above: passed, only minor findings cost; below 0.50: a mode failed, below 0.25 by a check)',
    dataset: { testid: 'judgement-badge', state: evaluationStatus || 'not_judged', overall: overall ?? '', coverage: coverage ? coverage.label : '' },
    text,
  });
}

/** Every judge that ran gave a verdict (the coverage's own counts, as the verdict model's `Coverage.complete`). */
function fullyJudged(coverage) {
  return coverage.applied > 0 && coverage.judged === coverage.applied;
}

/** Beside a score that is not every judge's: how much was judged ("checks only, 8 of 11 judges"); else nothing. */
export function coverageNote(coverage, overall) {
  if (!coverage || fullyJudged(coverage) || overall === null || overall === undefined) return null;
  return h('span', { class: 'coverage muted small', dataset: { testid: 'coverage' }, title: `${coverage.judged} of ${coverage.applied} judges gave a verdict; ${coverage.inconclusive} inconclusive, ${coverage.errors} errored${coverage.smoke ? `, ${coverage.smoke} smoke` : ''}` }, coverage.label);
}

/** Whether a judgement (the service's view of an evaluation) holds a failed verdict. */
function judgementFailed(j) {
  return Boolean(j) && (j.failure_modes.length > 0 || j.verdicts.some((v) => v.status === 'fail'));
}

/** A verdict in one word, as the service's verdict model gave it: pass, fail, inconclusive, error or smoke. */
function verdictWord(v) {
  return v.status;
}

/** A grey mark for a score made by the embedded model: a smoke test of the pipeline, not a verdict. */
function smokeBadge(smoke) {
  if (!smoke) return null;
  return h('span', { class: 'badge smoke', dataset: { testid: 'smoke' }, title: 'Made by the embedded model, too small to judge: a smoke test, not a verdict' }, 'smoke');
}

function errorBox(message) {
  return h('div', { class: 'error', role: 'alert', dataset: { testid: 'error' } }, message);
}

/** An issue field as text: lists of words joined, anything else structured as JSON. */
function fieldText(value) {
  if (typeof value === 'string') return value;
  if (Array.isArray(value) && value.every((v) => typeof v === 'string')) return value.length ? value.join(', ') : '—';
  return JSON.stringify(value);
}

function sessionHref(id, tail = '') {
  return `#/session/${encodeURIComponent(id)}${tail}`;
}

function markNav(kind) {
  for (const a of document.querySelectorAll('[data-nav]')) a.classList.toggle('current', a.dataset.nav === kind);
}

// ---------------------------------------------------------------------------------------------------
// Routing

function parseRoute() {
  const raw = window.location.hash.replace(/^#/, '') || '/';
  const [path, search = ''] = raw.split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const params = Object.fromEntries(new URLSearchParams(search));
  if (parts[0] === 'session' && parts[1]) {
    const route = { kind: 'session', id: parts[1], tab: 'transcript', step: null };
    if (parts[2] === 'score') route.tab = 'score';
    if (parts[2] === 'judgement') route.tab = 'judgement';
    if (parts[2] === 'step' && parts[3]) route.step = Number(parts[3]);
    return route;
  }
  if (parts[0] === 'patterns') return { kind: 'patterns', params };
  if (parts[0] === 'alerts') return { kind: 'alerts' };
  if (parts[0] === 'traces') return { kind: 'traces' };
  return { kind: 'sessions', params };
}

function route() {
  const r = parseRoute();
  if (view && view.kind === r.kind && view.onRoute && view.accepts(r)) {
    view.onRoute(r);
    return;
  }
  if (view) view.dispose();
  clear(app);
  markNav(r.kind === 'session' ? 'sessions' : r.kind);
  if (r.kind === 'session') view = sessionView(r);
  else if (r.kind === 'patterns') view = patternsView(r.params);
  else if (r.kind === 'alerts') view = alertsView();
  else if (r.kind === 'traces') view = tracesView();
  else view = sessionsView(r.params);
}

window.addEventListener('hashchange', route);
route();

// ---------------------------------------------------------------------------------------------------
// Sessions list

function sessionsView(initial) {
  const state = {
    q: initial.q || '',
    agent: initial.agent || '',
    failure_mode: initial.failure_mode || '',
    min_score: initial.min_score || '',
    max_score: initial.max_score || '',
    scored: initial.scored || '',
    sort: initial.sort || 'date',
    order: initial.order || 'desc',
    offset: Number(initial.offset || 0),
    // set by a click from Patterns (a bar leads to the runs behind it; a bucket's upper edge belongs to the
    // next bucket, as in the histogram); shown and clearable above the table
    judge: initial.judge || '',
    failed: initial.failed || '',
    min_overall: initial.min_overall || '',
    max_overall: initial.max_overall || '',
    prompt_version: initial.prompt_version || '',
    since: initial.since || '',
    until: initial.until || '',
  };
  const FROM_PATTERNS = ['judge', 'failed', 'min_overall', 'max_overall', 'prompt_version', 'since', 'until'];
  let menus = null;
  let pending = null;
  let loads = 0;
  const root = h('section', { class: 'sessions' });
  const filters = h('form', { class: 'filters', dataset: { testid: 'filters' } });
  const errors = h('div');
  const extra = h('div', { class: 'extra-filters', dataset: { testid: 'extra-filters' } });
  const table = h('div', { class: 'table-wrap' });
  const pager = h('div', { class: 'pager' });
  append(root, h('h1', {}, 'Sessions'), filters, extra, errors, table, pager);

  function showExtra() {
    clear(extra);
    const names = { judge: 'judge failed', failed: 'failed', min_overall: 'overall ≥', max_overall: 'overall ≤', prompt_version: 'prompt version', since: 'from', until: 'until' };
    const active = FROM_PATTERNS.filter((k) => state[k]);
    if (!active.length) return;
    append(
      extra,
      h('span', { class: 'muted small' }, 'Also filtered by: '),
      active.map((k) => h('span', { class: 'chip filter' }, `${names[k]} ${state[k]}`)),
      h('button', { type: 'button', class: 'link', onclick: () => { for (const k of FROM_PATTERNS) state[k] = ''; state.offset = 0; load(); } }, 'clear'),
    );
  }
  app.append(root);

  function field(label, control) {
    return h('label', {}, h('span', {}, label), control);
  }

  function input(name, props) {
    const el = h('input', { name, value: state[name], ...props });
    el.addEventListener('change', () => {
      state[name] = el.value.trim();
      state.offset = 0;
      load();
    });
    return el;
  }

  function select(name, options) {
    const el = h('select', { name });
    for (const [value, text] of options) el.append(h('option', { value, selected: state[name] === value }, text));
    el.addEventListener('change', () => {
      state[name] = el.value;
      state.offset = 0;
      load();
    });
    return el;
  }

  function buildFilters(page) {
    clear(filters);
    append(
      filters,
      field('Query id', input('q', { type: 'search', placeholder: 'contains…', size: 14 })),
      field('Agent', select('agent', [['', 'All agents'], ...page.agents.map((a) => [a, a])])),
      field('Failure mode', select('failure_mode', [['', 'Any'], ...page.failure_modes.map((m) => [m, m.replaceAll('_', ' ')])])),
      field('Score from', input('min_score', { type: 'number', min: 0, max: 100, size: 4, placeholder: '0' })),
      field('to', input('max_score', { type: 'number', min: 0, max: 100, size: 4, placeholder: '100' })),
      field('Scored', select('scored', [['', 'Any'], ['true', 'Scored'], ['false', 'Not scored']])),
      field('Sort by', select('sort', [['date', 'Date'], ['score', 'Score']])),
      field('Order', select('order', [['desc', 'Descending'], ['asc', 'Ascending']])),
    );
  }
  filters.addEventListener('submit', (e) => e.preventDefault());

  function row(item) {
    const link = h('a', { href: sessionHref(item.session_id), class: 'query-link' }, truncate(item.query || item.query_id, 140));
    const failedJudges = item.failed_judges.filter((j) => !item.failure_modes.includes(j));
    const modes = item.failure_modes.length || failedJudges.length
      ? h('div', { class: 'modes' }, item.failure_modes.map((m) => h('span', { class: 'chip' }, m.replaceAll('_', ' '))), failedJudges.map((j) => h('span', { class: 'chip judge' }, j)))
      : null;
    // the investigation score applies to alerts only: any other run shows a dash there, never "Not scored"
    const tarsy = item.is_alert || item.total_score !== null
      ? [h('a', { href: sessionHref(item.session_id, '/score') }, scoreBadge(item.scoring_status, item.total_score)), item.total_score !== null ? smokeBadge(item.smoke) : null]
      : [h('span', { class: 'muted', title: 'Not an alert: the investigation scorer does not apply', dataset: { testid: 'no-tarsy' } }, '—')];
    const outdated = item.current_prompt_used === false ? h('span', { class: 'badge outdated', title: 'Scored with older criteria' }, 'outdated') : null;
    return h(
      'tr',
      { dataset: { session: item.session_id, testid: 'session-row' } },
      h('td', {}, link, h('div', { class: 'muted small' }, item.query_id), modes),
      h('td', {}, item.agent || '—'),
      h('td', {}, item.rating === null ? '—' : `${item.rating.toFixed(1)}/5`),
      h('td', {}, h('span', { class: `status ${item.status}` }, item.status.replace('_', ' '))),
      h('td', { class: 'judgement-cell' }, h('a', { href: sessionHref(item.session_id, '/judgement') }, judgementBadge(item.evaluation_status, item.overall_score, item.evaluation_smoke, item.coverage, item.failed_judges.length > 0 || item.failure_modes.length > 0)), coverageNote(item.coverage, item.overall_score), item.overall_score !== null ? smokeBadge(item.evaluation_smoke) : null),
      h('td', { class: 'score-cell' }, tarsy, outdated),
      h('td', { class: 'muted small nowrap' }, fmtTime(item.created_at_us)),
    );
  }

  async function load() {
    const params = { ...state, limit: PAGE_SIZE };
    const hash = `#/${query({ ...state, offset: state.offset || '' })}`;
    if (window.location.hash !== hash && !(hash === '#/' && !window.location.hash)) {
      history.replaceState(null, '', hash);
    }
    let page;
    const mine = ++loads;
    try {
      page = await getJSON(`/api/v1/dashboard/sessions${query(params)}`);
    } catch (e) {
      if (mine === loads) clear(errors).append(errorBox(e.message));
      return;
    }
    if (mine !== loads) return; // a newer request (filter change, live event) is in flight: its answer wins
    clear(errors);
    showExtra();
    if (!menus || menus.agents.join() !== page.agents.join()) {
      menus = page;
      buildFilters(page);
    }
    clear(table);
    if (!page.items.length) {
      table.append(h('p', { class: 'muted empty', dataset: { testid: 'no-sessions' } }, page.total ? 'No sessions on this page.' : 'No sessions match.'));
    } else {
      table.append(
        h(
          'table',
          { class: 'list', dataset: { testid: 'sessions-table' } },
          h('thead', {}, h('tr', {}, ['Query / alert', 'Agent', 'Rating', 'Status', 'Judgement', 'Alert score', 'Created'].map((t) => h('th', {}, t)))),
          h('tbody', {}, page.items.map(row)),
        ),
      );
    }
    clear(pager);
    const first = page.total ? page.offset + 1 : 0;
    const last = page.offset + page.items.length;
    append(
      pager,
      h('button', { type: 'button', disabled: page.offset === 0, onclick: () => { state.offset = Math.max(0, state.offset - PAGE_SIZE); load(); } }, '← Previous'),
      h('span', { dataset: { testid: 'page-info' } }, `${first}–${last} of ${page.total}`),
      h('button', { type: 'button', disabled: last >= page.total, onclick: () => { state.offset += PAGE_SIZE; load(); } }, 'Next →'),
    );
  }

  // Any scoring event may change a badge on this page: re-read the page (coalesced).
  const live = new Live(['sessions'], (event) => {
    if (!event.type || !(event.type.startsWith('scoring.') || event.type.startsWith('evaluation.') || event.type === 'reconnected')) return;
    window.clearTimeout(pending);
    pending = window.setTimeout(load, 150);
  });
  load();
  return {
    kind: 'sessions',
    accepts: () => false,
    dispose() {
      live.close();
      window.clearTimeout(pending);
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// One session

function sessionView(initial) {
  const id = initial.id;
  let data = null;
  let tab = initial.tab;
  let poll = null;
  const seenScores = new Set(); // scorings the WebSocket has reported on
  let loads = 0;
  const root = h('section', { class: 'session' });
  const head = h('div', { class: 'session-head' });
  const actions = h('div', { class: 'actions' });
  const progress = h('div', { class: 'progress', dataset: { testid: 'progress' }, 'aria-live': 'polite' });
  const errors = h('div', { dataset: { testid: 'errors' } });
  const cards = h('div', { class: 'cards' });
  const tabs = h('div', { class: 'tabs', role: 'tablist' });
  const panel = h('div', { class: 'panel' });
  append(root, h('p', {}, h('a', { href: '#/' }, '← All sessions')), head, actions, progress, errors, cards, tabs, panel);
  app.append(root);

  function showError(message) {
    errors.append(errorBox(message));
  }

  function setProgress(text, phase = '') {
    progress.textContent = text;
    progress.dataset.phase = phase;
  }

  async function refresh() {
    const mine = ++loads;
    let fresh;
    try {
      fresh = await getJSON(`/api/v1/dashboard/sessions/${encodeURIComponent(id)}`);
    } catch (e) {
      if (!data) clear(head).append(h('h1', {}, 'Session'));
      showError(e.message);
      return;
    }
    if (mine !== loads) return; // an older read answering late must not undo a newer one
    data = fresh;
    render();
  }

  function render() {
    const active = ACTIVE.has(data.scoring_status);
    clear(head);
    append(
      head,
      h('h1', { dataset: { testid: 'session-query' } }, data.query),
      h(
        'div',
        { class: 'meta' },
        h('span', { class: 'labelled' }, h('span', { class: 'muted' }, 'judgement '), judgementBadge(data.evaluation_status, data.judgement ? data.judgement.overall_score : null, data.judgement ? data.judgement.smoke : false, data.judgement ? data.judgement.coverage : null, judgementFailed(data.judgement)), data.judgement ? coverageNote(data.judgement.coverage, data.judgement.overall_score) : null),
        data.is_alert || data.score ? scoreBadge(data.scoring_status, data.score ? data.score.score.total_score : null) : null,
        h('span', {}, `agent: ${data.agent || '—'}`),
        data.prompt_version ? h('span', {}, `prompt: ${data.prompt_version}`) : null,
        h('span', {}, `status: ${data.status}`),
        h('span', {}, data.rating ? `rating: ${data.rating.mean}/5` : 'not rated'),
        h('span', { class: 'muted' }, `query id: ${data.query_id}`),
        h('span', { class: 'muted' }, fmtTime(data.created_at_us)),
      ),
    );
    clear(actions);
    const rescore = Boolean(data.latest_scoring);
    const judging = ACTIVE.has(data.evaluation_status);
    // the main action: the failure-mode judges for any run, and the investigation scorer too for an alert
    append(
      actions,
      h(
        'button',
        { type: 'button', class: 'primary', disabled: judging || active, dataset: { testid: 'judge-button' }, onclick: judgeRun, title: `${data.is_alert ? 'Run the investigation scorer and the judges' : 'Run the judges'}: ${data.service_judges.join(', ')}` },
        judging || active ? 'Judging…' : data.evaluation_status ? 'Judge again' : 'Judge run',
      ),
      data.is_alert
        ? h(
          'button',
          { type: 'button', disabled: active, dataset: { testid: 'score-button' }, onclick: () => score(rescore) },
          active ? 'Scoring…' : data.score ? 'Re-score' : 'Score session',
        )
        : null,
      data.is_alert
        ? h(
          'button',
          { type: 'button', disabled: judging, dataset: { testid: 'evaluate-button' }, onclick: evaluate },
          judging ? 'Judging…' : data.evaluation_status ? 'Re-run failure-mode judges only' : 'Failure-mode judges only',
        )
        : null,
    );
    if (!active && !ACTIVE.has(data.evaluation_status)) stopPoll();
    else startPoll();
    if (!active && progress.dataset.phase && progress.dataset.phase !== 'done') setProgress('');

    clear(cards);
    if (data.alert_data !== null && data.alert_data !== undefined) {
      let alert;
      if (typeof data.alert_data === 'object' && !Array.isArray(data.alert_data)) {
        alert = h('dl', { class: 'alert-fields', dataset: { testid: 'alert' } });
        for (const [k, v] of Object.entries(data.alert_data)) alert.append(h('dt', {}, k), h('dd', {}, typeof v === 'string' ? v : JSON.stringify(v)));
      } else {
        alert = h('pre', { class: 'text', dataset: { testid: 'alert' } }, typeof data.alert_data === 'string' ? data.alert_data : JSON.stringify(data.alert_data, null, 2));
      }
      cards.append(h('div', { class: 'card' }, h('h2', {}, 'Alert'), alert));
    } else {
      cards.append(h('div', { class: 'card' }, h('h2', {}, 'Query'), h('pre', { class: 'text' }, data.query)));
    }
    cards.append(
      h('div', { class: 'card' }, h('h2', {}, 'Final answer'), h('pre', { class: 'text', dataset: { testid: 'final-answer' } }, data.final_answer ?? '(no answer)')),
    );
    if (data.expected_outputs && data.expected_outputs.length) {
      // what the reference says the agent had to tell the user (checked by reference_check)
      cards.append(h('div', { class: 'card' }, h('h2', {}, 'Required outputs'), h('p', { dataset: { testid: 'expected-outputs' } }, data.expected_outputs.map((o) => JSON.stringify(o)).join(', '))));
    }
    renderTabs();
  }

  function renderTabs() {
    clear(tabs);
    const scoreLabel = data.score ? `Alert score ${data.score.score.total_score}/100` : 'Alert score';
    const j = data.judgement;
    const judgementLabel = j && j.overall_score !== null ? `Judgement ${j.overall_score.toFixed(2)}` : j && j.coverage ? 'Judgement (not judged)' : 'Judgement';
    const tabsShown = [['transcript', `Transcript (${data.steps.length} steps)`], ['judgement', judgementLabel]];
    if (data.is_alert || data.score) tabsShown.push(['score', scoreLabel]);
    for (const [key, label] of tabsShown) {
      tabs.append(
        h(
          'a',
          { role: 'tab', class: tab === key ? 'tab current' : 'tab', 'aria-selected': String(tab === key), href: sessionHref(id, key === 'transcript' ? '' : `/${key}`), dataset: { tab: key } },
          label,
        ),
      );
    }
    clear(panel);
    panel.append(tab === 'score' ? scorePanel() : tab === 'judgement' ? judgementPanel() : transcriptPanel());
  }

  /** Steps cited by a failed verdict: step number → the judges that cite it. */
  function citedSteps() {
    const cited = new Map();
    for (const v of (data.judgement ? data.judgement.verdicts : [])) {
      if (verdictWord(v) !== 'fail') continue;
      for (const issue of v.issues) for (const n of issue.steps) cited.set(n, [...(cited.get(n) || []), v.judge]);
    }
    return cited;
  }

  function judgementPanel() {
    const box = h('div', { class: 'judgement-panel', dataset: { testid: 'judgement-panel' } });
    const j = data.judgement;
    if (!j) {
      box.append(h('p', { class: 'muted' }, ACTIVE.has(data.evaluation_status) ? 'Judging…' : 'The failure-mode judges have not run on this session yet: "Judge run" runs them.'));
      return box;
    }
    const head = h(
      'div',
      { class: 'total' },
      judgementBadge(j.status, j.overall_score, j.smoke, j.coverage, judgementFailed(j)),
      smokeBadge(j.smoke),
      h('span', { class: 'muted' }, ` overall score · ${j.model || 'no model'} · ${fmtTime(j.completed_at_us)}`),
    );
    box.append(head);
    if (j.coverage) box.append(h('p', { class: 'coverage-line', dataset: { testid: 'judgement-coverage' } }, j.overall_score === null ? `Not judged: no judge gave a verdict (${j.coverage.applied} ran: ${j.coverage.inconclusive} inconclusive, ${j.coverage.errors} errored${j.coverage.smoke ? `, ${j.coverage.smoke} smoke` : ''}).` : `Judged by ${j.coverage.label}.`));
    box.append(h('p', { class: 'muted small', dataset: { testid: 'judges-run' } }, `Judges asked: ${j.judges.join(', ')}. Ran: ${j.judges_run.length ? j.judges_run.join(', ') : 'none'}.`));
    if (ACTIVE.has(j.status)) box.append(h('p', { class: 'muted' }, 'Judging…'));
    if (j.error) box.append(errorBox(`Evaluation ${j.status.replace('_', ' ')}: ${j.error}`));
    const cats = Object.entries(j.category_scores);
    if (cats.length) {
      const grid = h('div', { class: 'breakdown', dataset: { testid: 'categories' } });
      for (const [name, value] of cats) {
        grid.append(h('div', { class: 'cat' }, h('span', {}, name.replaceAll('_', ' ')), h('progress', { max: 1, value }), h('span', { class: 'pts' }, value.toFixed(2))));
      }
      box.append(h('h3', {}, 'Category scores'), grid);
    }
    box.append(h('h3', {}, 'Failure modes'));
    box.append(j.failure_modes.length ? h('div', { class: 'modes' }, j.failure_modes.map((m) => h('a', { class: 'chip', href: `#/?failure_mode=${encodeURIComponent(m)}`, title: 'Every run with this failure mode' }, m.replaceAll('_', ' ')))) : h('p', { class: 'muted' }, 'None.'));
    if (j.why) box.append(whyBox(j.why));
    // one block per judge (a judge of several failure modes, like the reference check, lists each mode inside)
    const byJudge = new Map();
    for (const v of j.verdicts) byJudge.set(v.judge, [...(byJudge.get(v.judge) || []), v]);
    box.append(h('h3', {}, `Verdicts (${byJudge.size} judge${byJudge.size === 1 ? '' : 's'})`));
    const list = h('div', { dataset: { testid: 'verdicts' } });
    for (const [judge, modes] of byJudge) {
      const word = (j.judge_statuses && j.judge_statuses[judge]) || verdictWord(modes[0]);
      const several = modes.length > 1;
      const parts = [];
      for (const v of modes) {
        const mode = v.failure_mode && v.failure_mode !== v.judge ? v.failure_mode.replaceAll('_', ' ') : '';
        if (several) {
          parts.push(h('div', { class: 'mode-line', dataset: { mode: v.failure_mode || '' } }, h('span', { class: `tag ${verdictWord(v).replace(' ', '-')}` }, verdictWord(v)), ` ${mode}`, v.score !== null ? h('span', { class: 'muted small' }, ` score ${v.score.toFixed(2)}`) : null));
        }
        if (v.error) parts.push(h('pre', { class: 'text why' }, v.error));
        for (const issue of v.issues) parts.push(issueBox(issue));
      }
      const first = modes[0];
      const single = !several && first.score !== null ? h('span', { class: 'muted small' }, ` score ${first.score.toFixed(2)}`) : null;
      const mode = !several && first.failure_mode && first.failure_mode !== judge ? h('span', { class: 'muted small' }, ` · ${first.failure_mode.replaceAll('_', ' ')}`) : null;
      list.append(
        h(
          'div',
          { class: `verdict ${word.replace(' ', '-')}`, dataset: { judge, verdict: word, testid: 'verdict' } },
          h('div', { class: 'verdict-head' }, h('strong', {}, judge), h('span', { class: `tag ${word.replace(' ', '-')}` }, word), single, mode),
          first.reasoning ? h('pre', { class: 'text reasoning' }, first.reasoning) : null,
          parts,
        ),
      );
    }
    if (!j.verdicts.length) list.append(h('p', { class: 'muted' }, 'This evaluation has no per-judge verdicts.'));
    box.append(list);
    return box;
  }

  /** One finding: its fields, and links to the steps it cites. */
  function issueBox(issue) {
    const fields = h('dl', {});
    for (const [k, val] of Object.entries(issue.fields)) fields.append(h('dt', {}, k.replaceAll('_', ' ')), h('dd', {}, fieldText(val)));
    const cites = issue.steps.length
      ? h('p', { class: 'cites' }, 'Cites: ', issue.steps.map((n) => h('a', { href: sessionHref(id, `/step/${n}`), class: 'step-link', dataset: { step: n } }, `step ${n}`)))
      : null;
    return h('div', { class: 'issue-fields' }, fields, cites);
  }

  /**
   * Why the score is what it is, as the service's explanation (`core.explain`) says: each verdict that cost
   * points with its findings (a pass's minor ones too), each verdict not counted, each judge skipped, with why.
   */
  function whyBox(why) {
    const items = [];
    const label = (c) => (c.failure_mode && c.failure_mode !== c.judge ? `${c.judge} · ${c.failure_mode.replaceAll('_', ' ')}` : c.judge);
    for (const c of why.costs) {
      const findings = c.findings.map((f) => h('li', {}, h('span', { class: 'sev' }, f.severity || 'finding'), ` ${f.text}`, f.steps.length ? h('span', { class: 'cites' }, ' (', f.steps.map((n) => h('a', { href: sessionHref(id, `/step/${n}`), class: 'step-link', dataset: { step: n } }, `step ${n}`)), ')') : null));
      items.push(h('li', { class: `cost ${c.status}`, dataset: { judge: c.judge, testid: 'cost' } }, h('span', { class: `tag ${c.status}` }, c.status), ' ', h('strong', {}, label(c)), c.score !== null ? ` ${c.score.toFixed(2)}` : '', c.why && !c.findings.length ? h('span', { class: 'muted' }, ` ${c.why}`) : null, findings.length ? h('ul', {}, findings) : null));
    }
    for (const c of why.not_counted) {
      items.push(h('li', { class: `uncounted ${c.status.replace(' ', '-')}`, dataset: { judge: c.judge, testid: 'not-counted' } }, h('span', { class: `tag ${c.status.replace(' ', '-')}` }, c.status), ' ', h('strong', {}, label(c)), `: not counted in the score.${c.why ? ` ${c.why}` : ''}`));
    }
    for (const [name, reason] of Object.entries(why.skipped)) {
      items.push(h('li', { class: 'skipped', dataset: { judge: name, testid: 'skipped' } }, h('span', { class: 'tag skipped' }, 'skipped'), ' ', h('strong', {}, name), `: ${reason}`));
    }
    const full = !why.costs.length && !why.not_counted.length;
    const head = why.overall_score === null ? 'Not judged: no judge gave a pass/fail verdict.' : full ? `${why.overall_score.toFixed(2)}: every verdict passed without a finding.` : `Why ${why.overall_score.toFixed(2)}:`;
    return h('div', { class: 'why-score', dataset: { testid: 'why' } }, h('h3', {}, head), items.length ? h('ul', {}, items) : null);
  }

  function transcriptPanel() {
    const list = h('ol', { class: 'steps', dataset: { testid: 'transcript' } });
    const cited = citedSteps();
    for (const step of data.steps) {
      const title = [`[${step.number}]`, step.kind.replace('_', ' '), step.speaker ? `(${step.speaker})` : '', step.tool_name || ''].filter(Boolean).join(' ');
      const body = h('pre', { class: 'text' }, step.text);
      let item;
      if (step.kind === 'tool_call' || step.kind === 'tool_result' || step.kind === 'thinking' || step.kind === 'system') {
        item = h('details', {}, h('summary', {}, h('strong', {}, title), ' ', h('span', { class: 'muted' }, truncate(step.text, 90))), body);
      } else {
        item = h('div', {}, h('div', { class: 'step-title' }, h('strong', {}, title)), body);
      }
      const by = cited.get(step.number);
      const flag = by ? h('span', { class: 'flag', title: `Cited by a failed verdict of ${by.join(', ')}` }, `cited by ${[...new Set(by)].join(', ')}`) : null;
      list.append(h('li', { id: `step-${step.number}`, class: `step ${step.kind}${by ? ' flagged' : ''}`, dataset: { step: step.number } }, flag, item));
    }
    return list;
  }

  function focusStep(n) {
    const el = document.getElementById(`step-${n}`);
    if (!el) return;
    const details = el.querySelector('details');
    if (details) details.open = true;
    for (const old of document.querySelectorAll('.step.cited')) old.classList.remove('cited');
    el.classList.add('cited');
    el.scrollIntoView({ block: 'center' });
  }

  function scorePanel() {
    const box = h('div', { class: 'score-panel', dataset: { testid: 'score-panel' } });
    const latest = data.latest_scoring;
    if (latest && latest.status !== 'completed' && !ACTIVE.has(latest.status)) {
      box.append(errorBox(`Latest scoring ${latest.status.replace('_', ' ')}: ${latest.error_message || 'no reason given'}`));
      if (latest.raw_output) {
        box.append(h('details', { class: 'raw-output' }, h('summary', {}, 'What the model answered'), h('pre', { class: 'text', dataset: { testid: 'raw-output' } }, latest.raw_output)));
      }
    }
    if (!data.score) {
      box.append(h('p', { class: 'muted' }, ACTIVE.has(data.scoring_status) ? 'Scoring in progress…' : 'This session has not been scored yet.'));
    } else {
      const { score, breakdown, missing_tools: tools } = data.score;
      const total = h('div', { class: 'total' }, scoreBadge('completed', score.total_score), smokeBadge(score.smoke), h('span', { class: 'muted' }, ` ${score.variant} scorer · ${score.model || 'model unknown'} · ${fmtTime(score.completed_at_us)}`));
      if (!score.current_prompt_used) {
        total.append(h('span', { class: 'badge outdated', dataset: { testid: 'outdated' }, title: `criteria hash ${score.prompt_hash.slice(0, 12)} is not today's` }, 'outdated criteria'));
      } else {
        total.append(h('span', { class: 'badge current-criteria', title: score.prompt_hash }, 'current criteria'));
      }
      box.append(total);
      const grid = h('div', { class: 'breakdown', dataset: { testid: 'breakdown' } });
      // the rubric's categories come with the session (`categories`): the page keeps no list of them
      for (const { key, label, points: max } of data.categories) {
        const points = breakdown ? breakdown[key] : undefined;
        grid.append(
          h('div', { class: 'cat' }, h('span', {}, label), h('progress', { max, value: points ?? 0 }), h('span', { class: 'pts' }, points === undefined ? '—' : `${points}/${max}`)),
        );
      }
      box.append(h('h3', {}, 'Breakdown'), grid);
      box.append(h('h3', {}, 'Score analysis'), h('pre', { class: 'text', dataset: { testid: 'score-analysis' } }, score.score_analysis || ''));
      box.append(h('h3', {}, 'Missing tools'));
      if (tools.length) box.append(h('div', { class: 'modes' }, tools.map((t) => h('span', { class: 'chip tool' }, t))));
      box.append(h('pre', { class: 'text', dataset: { testid: 'missing-tools' } }, score.missing_tools_analysis || ''));
      if (score.alternative_approaches && score.alternative_approaches.length) {
        box.append(h('h3', {}, 'Alternative approaches'));
        for (const a of score.alternative_approaches) {
          box.append(h('div', { class: 'issue' }, h('strong', {}, a.name || ''), h('p', {}, a.description || ''), h('ol', {}, (a.steps || []).map((st) => h('li', {}, st)))));
        }
      }
    }
    box.append(h('h3', {}, 'Failure modes'), issuesBlock());
    box.append(h('h3', {}, 'Score history'), historyTable());
    return box;
  }

  function issuesBlock() {
    const block = h('div', { dataset: { testid: 'issues' } });
    if (!data.evaluation_status) {
      block.append(h('p', { class: 'muted' }, 'The failure-mode judges have not run on this session.'));
      return block;
    }
    if (data.evaluation_error) block.append(errorBox(`Evaluation ${data.evaluation_status}: ${data.evaluation_error}`));
    if (ACTIVE.has(data.evaluation_status)) block.append(h('p', { class: 'muted' }, 'Judging…'));
    if (!data.issues.length && data.evaluation_status === 'completed') block.append(h('p', { class: 'muted' }, 'No issues found.'));
    for (const issue of data.issues) {
      const fields = h('dl', {});
      for (const [k, v] of Object.entries(issue.fields)) {
        fields.append(h('dt', {}, k.replaceAll('_', ' ')), h('dd', {}, fieldText(v)));
      }
      const cites = issue.steps.length
        ? h('p', { class: 'cites' }, 'Cites: ', issue.steps.map((n) => h('a', { href: sessionHref(id, `/step/${n}`), class: 'step-link', dataset: { step: n } }, `step ${n}`)))
        : null;
      block.append(h('div', { class: 'issue', dataset: { mode: issue.failure_mode } }, h('strong', {}, issue.failure_mode.replaceAll('_', ' ')), h('span', { class: 'muted small' }, ` (${issue.source})`), fields, cites));
    }
    return block;
  }

  function historyTable() {
    if (!data.history.length) return h('p', { class: 'muted' }, 'No scorings yet.');
    return h(
      'table',
      { class: 'list small', dataset: { testid: 'history' } },
      h('thead', {}, h('tr', {}, ['Started', 'Status', 'Score', 'Criteria', 'Triggered by', 'Error'].map((t) => h('th', {}, t)))),
      h(
        'tbody',
        {},
        data.history.map(({ score: sc }) =>
          h(
            'tr',
            {},
            h('td', { class: 'nowrap' }, fmtTime(sc.started_at_us)),
            h('td', {}, sc.status.replace('_', ' ')),
            h('td', {}, scoreBadge(sc.status, sc.total_score), smokeBadge(sc.smoke)),
            h('td', {}, sc.current_prompt_used ? 'current' : h('span', { class: 'badge outdated' }, 'outdated criteria')),
            h('td', {}, sc.score_triggered_by),
            h('td', { class: 'muted' }, sc.error_message || ''),
          ),
        ),
      ),
    );
  }

  async function score(force) {
    clear(errors);
    setProgress('Requesting a scoring…', 'requested');
    try {
      const { data: out, status } = await api(`/api/v1/scoring/sessions/${encodeURIComponent(id)}/score`, { method: 'POST', body: { force_rescore: force } });
      // the WebSocket may already have told us more than this answer does: keep the newer news
      if (!seenScores.has(out.score_id)) {
        if (status === 202) setProgress(out.status === 'in_progress' ? 'Scoring… in progress' : 'Scoring… queued', out.status);
        else setProgress('');
      }
    } catch (e) {
      setProgress('');
      showError(e.message);
    }
    await refresh();
  }

  async function judgeRun() {
    clear(errors);
    const jobs = [api(`/api/v1/sessions/${encodeURIComponent(id)}/evaluate`, { method: 'POST', body: { force: Boolean(data.evaluation_status) } })];
    if (data.is_alert) jobs.push(api(`/api/v1/scoring/sessions/${encodeURIComponent(id)}/score`, { method: 'POST', body: { force_rescore: Boolean(data.latest_scoring) } }));
    for (const outcome of await Promise.allSettled(jobs)) if (outcome.status === 'rejected') showError(outcome.reason.message);
    if (tab === 'transcript') {
      tab = 'judgement';
      history.replaceState(null, '', sessionHref(id, '/judgement'));
    }
    await refresh();
  }

  async function evaluate() {
    clear(errors);
    try {
      await api(`/api/v1/sessions/${encodeURIComponent(id)}/evaluate`, { method: 'POST', body: { force: Boolean(data.evaluation_status) } });
    } catch (e) {
      showError(e.message);
    }
    await refresh();
  }

  // A safety net for events missed (another service process ran the job): re-read while a job is active.
  function startPoll() {
    if (!poll) poll = window.setInterval(refresh, 4000);
  }
  function stopPoll() {
    window.clearInterval(poll);
    poll = null;
  }

  const live = new Live([`session:${id}`], (event) => {
    if (event.type === 'reconnected') return void refresh();
    if (event.session_id !== id) return;
    if (event.score_id) seenScores.add(event.score_id);
    switch (event.type) {
      case 'scoring.started':
        setProgress('Scoring… started', 'started');
        if (data) {
          data.scoring_status = 'in_progress';
          render();
        }
        break;
      case 'scoring.progress':
        setProgress(`Scoring… ${PHASES[event.phase] || event.phase}`, event.phase);
        break;
      case 'scoring.completed':
        setProgress(`Scored: ${event.total_score}/100`, 'done');
        refresh();
        break;
      case 'scoring.failed':
        setProgress('', '');
        showError(`Scoring ${String(event.status || 'failed').replace('_', ' ')}: ${event.error_message || 'no reason given'}`);
        refresh();
        break;
      case 'evaluation.started':
      case 'evaluation.completed':
        refresh();
        break;
      case 'evaluation.failed':
        showError(`Failure-mode judges ${event.status || 'failed'}: ${event.error_message || 'no reason given'}`);
        refresh();
        break;
      default:
        break;
    }
  });

  refresh().then(() => {
    if (initial.step) showStep(initial.step);
  });

  function showStep(n) {
    if (tab !== 'transcript') {
      tab = 'transcript';
      if (data) renderTabs();
    }
    focusStep(n);
  }

  return {
    kind: 'session',
    id,
    accepts: (r) => r.id === id,
    onRoute(r) {
      if (!data) return;
      if (r.step) {
        showStep(r.step);
      } else if (r.tab !== tab) {
        tab = r.tab;
        renderTabs();
      }
    },
    dispose() {
      live.close();
      stopPoll();
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// Patterns

function patternsView(initial = {}) {
  const root = h('section', { class: 'patterns' });
  app.append(root);
  let pending = null;
  const state = {
    agent: initial.agent || '',
    prompt_version: initial.prompt_version || '',
    since: initial.since || '',
    until: initial.until || '',
    judge: initial.judge || '',
    bucket: initial.bucket || 'day',
    group: initial.group || 'all',
    include_smoke: initial.include_smoke || '',
  };

  /** The session list behind a bar: the same filters, plus what the bar counts. */
  function listHref(extra) {
    const base = { agent: state.agent, prompt_version: state.prompt_version, since: state.since, until: state.until };
    return `#/${query({ ...base, ...extra })}`;
  }

  function filterBar(p) {
    const form = h('form', { class: 'filters', dataset: { testid: 'pattern-filters' } });
    form.addEventListener('submit', (e) => e.preventDefault());
    const pick = (name, label, options) => {
      const el = h('select', { name });
      for (const [value, text] of options) el.append(h('option', { value, selected: state[name] === value }, text));
      el.addEventListener('change', () => { state[name] = el.value; load(); });
      return h('label', {}, h('span', {}, label), el);
    };
    const day = (name, label) => {
      const el = h('input', { type: 'date', name, value: state[name] });
      el.addEventListener('change', () => { state[name] = el.value; load(); });
      return h('label', {}, h('span', {}, label), el);
    };
    append(
      form,
      pick('agent', 'Agent', [['', 'All agents'], ...p.agents.map((a) => [a, a])]),
      pick('prompt_version', 'Prompt version', [['', 'All versions'], ...p.prompt_versions.map((v) => [v, v])]),
      pick('judge', 'Judge', [['', 'All judges'], ...p.judges.map((j) => [j, j])]),
      day('since', 'From'),
      day('until', 'Until'),
      pick('bucket', 'Per', [['day', 'day'], ['week', 'week']]),
      pick('group', 'Lines', [['all', 'all runs'], ['agent', 'per agent'], ['prompt_version', 'per prompt version']]),
    );
    return form;
  }

  function card(title, note, chart) {
    return h('figure', { class: 'card' }, h('figcaption', {}, title, note ? h('span', { class: 'muted small' }, ` ${note}`) : null), chart);
  }

  async function load() {
    const hash = `#/patterns${query(state.bucket === 'day' && state.group === 'all' ? { ...state, bucket: '', group: '' } : state)}`;
    if (window.location.hash !== hash) history.replaceState(null, '', hash);
    let p;
    try {
      p = await getJSON(`/api/v1/dashboard/patterns${query(state)}`);
    } catch (e) {
      clear(root).append(h('h1', {}, 'Patterns'), errorBox(e.message));
      return;
    }
    clear(root);
    const judgeNote = state.judge ? `judge ${state.judge} only` : '';
    append(
      root,
      h('h1', {}, 'Patterns'),
      filterBar(p),
      h(
        'p',
        { class: 'muted', dataset: { testid: 'pattern-counts' } },
        `${p.evaluated_sessions} judged run(s) · ${p.scored_sessions} scored alert(s). Only verdicts under today's criteria count. Click a bar or a point for the runs behind it.`,
      ),
      h(
        'label',
        { class: 'muted small', dataset: { testid: 'smoke-toggle' } },
        h('input', { type: 'checkbox', name: 'include_smoke', checked: Boolean(state.include_smoke), onchange: (e) => { state.include_smoke = e.target.checked ? 'true' : ''; load(); } }),
        state.include_smoke ? ' Smoke results (embedded model) included' : ` Include smoke results from the embedded model (${p.smoke_left_out} left out)`,
      ),
      h(
        'div',
        { class: 'grid' },
        card('Pass rate per judge', '(passed of its verdicts)', rateChart(p.judge_pass_rates, { name: 'judge-pass-rates', axis: 'verdicts that passed', tone: 'good', emptyText: 'No judge verdicts under the current criteria.', href: (r) => listHref({ judge: r.label }) })),
        card('Failure rate per failure mode', '(runs that failed it, of the runs judged on it)', rateChart(p.mode_failure_rates, { name: 'mode-failure-rates', axis: 'runs that failed', tone: 'bad', emptyText: 'No failure-mode verdicts under the current criteria.', href: (r) => listHref({ failure_mode: r.label }) })),
        card(`Failed runs per ${state.bucket}`, judgeNote || '(runs with a failed verdict, of the runs judged)', rateLines(p.failure_trend, { name: 'failure-trend', emptyText: 'No judged runs in this range.', href: (pt, group) => listHref({ since: pt.period, until: pt.until, failed: state.judge ? '' : 'true', judge: state.judge, ...(state.group === 'all' || group === '(none)' ? {} : { [state.group]: group }) }) })),
        card('Overall score distribution', '(latest evaluation of each run)', countBars(p.overall_histogram, { name: 'overall-histogram', axis: 'overall score (0-1)', emptyText: state.judge ? 'Not shown for one judge (the overall score combines them all).' : 'No judged runs yet.', href: (b) => { const [lo, hi] = b.label.split('-'); return listHref({ min_overall: lo, max_overall: hi === '1.0' ? hi : (parseFloat(hi) - 0.0001).toFixed(4) }); } })),
      ),
      h('h2', { class: 'section' }, 'Alert investigations (investigation scorer)'),
      h(
        'div',
        { class: 'grid' },
        card('Score distribution', '', countBars(p.histogram, { name: 'histogram', axis: 'score (0-100)', emptyText: 'No alert scores under the current criteria yet.', href: (b) => { const [lo, hi] = b.label.split('-'); return listHref({ min_score: lo, max_score: hi }); } })),
        card('Mean score per day', '', lineChart(p.trend, { name: 'trend' })),
        card('Failure modes (runs)', '', barChart(p.failure_modes.map((b) => ({ ...b, label: b.label.replaceAll('_', ' ') })), { name: 'failure-modes', emptyText: 'No failure-mode evaluations under the current criteria.' })),
        card('Most frequent missing tools', '', barChart(p.missing_tools, { name: 'missing-tools', emptyText: 'No missing tools reported.' })),
      ),
    );
    root.dataset.loaded = 'true';
  }

  const live = new Live(['sessions'], (event) => {
    if (event.type === 'scoring.completed' || event.type === 'evaluation.completed' || event.type === 'reconnected') {
      window.clearTimeout(pending);
      pending = window.setTimeout(load, 300);
    }
  });
  load();
  return {
    kind: 'patterns',
    accepts: () => false,
    dispose() {
      live.close();
      window.clearTimeout(pending);
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// Alerts

function metricText(m) {
  const name = m.metric === 'mean_score' ? 'mean score' : `${m.metric.replace(/^failure_rate:/, '').replaceAll('_', ' ')} failure rate`;
  return `${name}: ${m.baseline_value.toFixed(2)} → ${m.current_value.toFixed(2)} (${m.current_n} vs ${m.baseline_n} runs, p=${m.p_value.toPrecision(2)})`;
}

function alertsView() {
  const root = h('section', { class: 'alerts' });
  app.append(root);
  let pending = null;

  async function load() {
    let alerts;
    try {
      alerts = await getJSON('/api/v1/alerts?limit=200');
    } catch (e) {
      clear(root).append(h('h1', {}, 'Alerts'), errorBox(e.message));
      return;
    }
    clear(root);
    append(
      root,
      h('h1', {}, 'Alerts'),
      h('p', { class: 'muted' }, 'An alert fires when an agent version\'s recent runs are significantly worse than its baseline (or its predecessor\'s).'),
    );
    if (!alerts.length) root.append(h('p', { class: 'muted', dataset: { testid: 'no-alerts' } }, 'No degradation alerts.'));
    const list = h('ul', { class: 'alert-list' });
    for (const a of alerts) {
      list.append(
        h(
          'li',
          { class: `card alert ${a.status}`, dataset: { testid: 'degradation-alert', status: a.status } },
          h('strong', {}, `${a.agent} · ${a.prompt_version}`),
          h('span', { class: `badge ${a.status === 'firing' ? 'bad' : 'muted'}` }, a.status),
          h('span', { class: 'muted small' }, ` fired ${fmtTime(a.fired_at_us)}` + (a.resolved_at_us ? ` · resolved ${fmtTime(a.resolved_at_us)}` : '')),
          h('ul', {}, ...a.metrics.map((m) => h('li', {}, metricText(m)))),
          h('p', { class: 'muted small' }, a.baseline_version === a.prompt_version ? 'Baseline: this version\'s first runs.' : `Baseline: version ${a.baseline_version}.`),
        ),
      );
    }
    root.append(list);
    root.dataset.loaded = 'true';
  }

  const live = new Live(['alerts'], (event) => {
    if (event.type.startsWith('alerts.') || event.type === 'reconnected') {
      window.clearTimeout(pending);
      pending = window.setTimeout(load, 200);
    }
  });
  load();
  return {
    kind: 'alerts',
    accepts: () => false,
    dispose() {
      live.close();
      window.clearTimeout(pending);
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// Traces: every OTLP trace sent to /v1/traces, newest first: accepted ones with the runs they gave (a link to
// each session), rejected ones with why (what POST /v1/traces also answered in partial_success)

function tracesView() {
  const root = h('section', { class: 'traces' });
  app.append(root);

  async function load() {
    let page;
    try {
      page = await getJSON('/api/v1/traces?limit=100');
    } catch (e) {
      clear(root).append(h('h1', {}, 'Traces'), errorBox(e.message));
      return;
    }
    clear(root);
    const rejected = page.items.filter((t) => t.status === 'rejected').length;
    append(
      root,
      h('h1', {}, 'Traces'),
      h(
        'p',
        { class: 'muted' },
        `Traces sent to /v1/traces (${page.total} in all; ${rejected} of these rejected), newest first: the runs each gave, or why it gave none.`,
      ),
    );
    if (!page.items.length) root.append(h('p', { class: 'muted', dataset: { testid: 'no-traces' } }, 'No traces yet.'));
    if (page.items.length && !rejected) root.append(h('p', { class: 'muted', dataset: { testid: 'no-rejected-traces' } }, 'No rejected traces.'));
    const list = h('ul', { class: 'alert-list' });
    for (const t of page.items) {
      const bad = t.status === 'rejected';
      const badge = { ingested: 'good', rejected: 'bad' }[t.status] || 'muted';
      const runs = (t.runs || []).map((r) =>
        h('li', {}, h('a', { href: `#/session/${encodeURIComponent(r.session_id)}` }, r.agent || r.session_id), h('span', { class: 'muted small' }, ` ${r.sampled ? 'judged' : 'not sampled'}: ${r.reason}`)),
      );
      list.append(
        h(
          'li',
          { class: bad ? 'card alert' : 'card', dataset: { testid: bad ? 'rejected-trace' : 'trace', traceId: t.trace_id, status: t.status } },
          h('strong', {}, t.trace_id),
          h('span', { class: `badge ${badge}` }, t.status),
          h('span', { class: 'muted small' }, ` ${t.span_count} span(s) · ${fmtTime(t.updated_at_us)}`),
          bad
            ? h('p', { class: 'small', dataset: { testid: 'rejected-reason' } }, t.error || 'no reason recorded')
            : runs.length
              ? h('ul', { class: 'small', dataset: { testid: 'trace-runs' } }, ...runs)
              : h('p', { class: 'small muted' }, t.error || (t.status === 'pending' ? 'waiting for the rest of the trace' : 'no run')),
        ),
      );
    }
    root.append(list);
    root.dataset.loaded = 'true';
  }

  load();
  return { kind: 'traces', accepts: () => false, dispose() {} };
}
