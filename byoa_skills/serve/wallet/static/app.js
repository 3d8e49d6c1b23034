// The wallet page: consents, sites, activity, engine and pairings, kept current over one
// WebSocket. Every text that came from a site or a manifest is set as text, never as markup,
// and a character that cannot be seen (a bidi control, a zero-width character) is shown as a
// marked ⟨U+XXXX⟩, never applied: the engine writes them so, and visibleText does it again.
'use strict';

const VIEWS = ['requests', 'sites', 'activity', 'engine', 'pairings'];
const consents = new Map();
let live = null;
let signedIn = false;
let oldestActivity = null;

// -- small helpers -------------------------------------------------------------------------

function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'text') node.replaceChildren(visibleText(String(value)));
    else if (name === 'className') node.className = value;
    else if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : visibleText(String(child)));
  }
  return node;
}

// The characters never shown as themselves (as the engine's shown_text.py): controls but a
// line break and a tab, format characters (bidi controls, zero-width characters, U+FEFF),
// surrogates, private use, unassigned, line and paragraph separators, other default-ignorables.
const HIDDEN = '[\\p{Cc}\\p{Cf}\\p{Cs}\\p{Co}\\p{Cn}\\p{Zl}\\p{Zp}\\u034F\\u115F\\u1160\\u17B4\\u17B5'
  + '\\u180B-\\u180F\\u3164\\uFE00-\\uFE0F\\uFFA0\\u{E0100}-\\u{E01EF}]';
const MARKED = new RegExp('⟨U\\+[0-9A-F]{4,6}⟩|' + HIDDEN, 'giu');

// ``text`` as nodes: plain text, with each hidden character (or the engine's marker for one)
// as a marked span that reads ⟨U+202E⟩.
function visibleText(text) {
  const fragment = document.createDocumentFragment();
  let at = 0;
  for (const match of text.matchAll(MARKED)) {
    const found = match[0];
    if (found === '\n' || found === '\t') continue;
    if (match.index > at) fragment.append(text.slice(at, match.index));
    const marker = found.startsWith('⟨') ? found
      : '⟨U+' + found.codePointAt(0).toString(16).toUpperCase().padStart(4, '0') + '⟩';
    const span = document.createElement('span');
    span.className = 'hidden-char';
    span.title = 'A character that cannot be seen';
    span.textContent = marker;
    fragment.append(span);
    at = match.index + found.length;
  }
  if (at < text.length) fragment.append(text.slice(at));
  return fragment;
}

function say(text) {
  document.getElementById('status').replaceChildren(visibleText(text));
}

async function api(path, options = {}) {
  const init = { method: options.method || 'GET', credentials: 'same-origin', headers: {} };
  if (options.body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(options.body);
  }
  const response = await fetch('/wallet/api/' + path, init);
  let body = {};
  try { body = await response.json(); } catch (error) { body = { ok: false }; }
  if (response.status === 401) {
    signedIn = false;
    show('signin');
  }
  return { status: response.status, body };
}

function facts(pairs) {
  const list = el('dl', { className: 'facts' });
  for (const [term, value] of pairs) {
    if (value === undefined || value === null || value === '') continue;
    list.append(el('dt', { text: term }), el('dd', {}, value));
  }
  return list;
}

// The heading of a site: the form of its host the engine chose (the xn-- form of a name that
// mixes alphabets), the origin with the other form beside it, and the engine's warning.
function originHeading(view, level) {
  const headed = view.headingHost || view.unicodeHost || view.host;
  const heading = el(level, {}, el('span', { className: 'origin-host', dir: 'ltr', text: headed }));
  const full = el('p', { className: 'origin-full' }, view.origin);
  if (headed !== view.host) full.append(' (written ', el('bdi', { className: 'other-host', text: view.host }), ')');
  else if (view.unicodeHost && view.unicodeHost !== view.host) {
    full.append(' (in Unicode ', el('bdi', { className: 'other-host', text: view.unicodeHost }), ')');
  }
  const lines = [heading, full];
  if (view.hostWarning) lines.push(el('p', { className: 'host-warning', text: view.hostWarning }));
  return lines;
}

function limitsText(limits) {
  const parts = Object.entries(limits || {}).map(([name, value]) => name + ' ' + value);
  return parts.length ? parts.join(', ') : 'none stated';
}

// -- views ---------------------------------------------------------------------------------

function show(view) {
  const wanted = signedIn ? (VIEWS.includes(view) ? view : 'requests') : 'signin';
  for (const name of ['signin', ...VIEWS]) {
    document.getElementById('view-' + name).hidden = name !== wanted;
  }
  for (const link of document.querySelectorAll('nav a')) {
    if (link.dataset.view === wanted) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  if (wanted === 'sites') loadSites();
  if (wanted === 'activity') loadActivity(false);
  if (wanted === 'engine') loadEngine();
  if (wanted === 'pairings') loadPairings();
}

function currentView() {
  const name = location.hash.replace(/^#/, '');
  return VIEWS.includes(name) ? name : 'requests';
}

// -- requests (consents) -------------------------------------------------------------------

function renderConsents() {
  const box = document.getElementById('consents');
  box.replaceChildren();
  for (const consent of consents.values()) box.append(consentCard(consent));
  document.getElementById('no-consents').hidden = consents.size > 0;
  document.getElementById('request-count').textContent = consents.size ? String(consents.size) : '';
  tick();
}

function consentCard(consent) {
  const view = consent.view;
  const titleId = 'consent-' + consent.id;
  const card = el('article', { className: 'card consent', 'aria-labelledby': titleId, 'data-consent': consent.id });
  const [heading, ...below] = originHeading(view, 'h3');
  heading.id = titleId;
  card.append(heading, ...below);
  if (consent.kind === 'call') {
    card.append(el('p', { text: 'wants a call that goes beyond what you allowed:' }));
    const reasons = el('ul');
    for (const reason of view.reasons || []) reasons.append(el('li', { text: reason.message + ' (' + reason.code + ')' }));
    const measured = Object.entries(view.measured || {}).map(([k, v]) => k + ' ' + v).join(', ');
    card.append(facts([['Skill', view.skill], ['Measured', measured], ['Estimated cost', view.estimatedCost]]), reasons);
  } else {
    card.append(el('p', { text: 'asks to use your AI for:' }));
    card.append(el('blockquote', { className: 'purpose', dir: 'auto', text: view.purpose || '(no purpose given)' }));
    const skills = el('ul');
    for (const skill of view.skills || []) {
      const languages = skill.languages && skill.languages.length ? ' in ' + skill.languages.join(', ') : '';
      skills.append(el('li', { text: skill.skill + languages + (skill.required ? ' (required)' : '') }));
    }
    const cost = Object.entries(view.cost || {}).map(([k, v]) => v + ' ' + k.replace(/^per/, 'per ').toLowerCase()).join(', ');
    card.append(facts([
      ['Skills', skills.children.length ? skills : 'nothing new'],
      ['Already allowed', (view.alreadyAllowed || []).join(', ')],
      ['Limits', limitsText(view.limits)],
      ['Privacy', view.privacy],
      ['Expected cost', cost],
    ]));
  }
  card.append(el('p', { className: 'timer', 'data-expires': consent.expiresMs }));
  const answers = el('div', { className: 'answers', role: 'group', 'aria-label': 'Your answer' });
  const labels = consent.kind === 'call'
    ? [['allow', 'Allow this call', 'primary'], ['decline', 'Decline', ''], ['decide-on-my-own', 'Allow and decide on my own', '']]
    : [['allow', 'Allow', 'primary'], ['decline', 'Decline', ''], ['decide-on-my-own', 'Allow and decide on my own', '']];
  for (const [decision, label, kind] of labels) {
    answers.append(el('button', { type: 'button', className: kind, text: label, onclick: () => answer(consent.id, decision) }));
  }
  card.append(answers);
  return card;
}

async function answer(id, decision) {
  const { body } = await api('consents/' + encodeURIComponent(id), { method: 'POST', body: { decision } });
  say(body.ok ? 'Answered: ' + decision.replace(/-/g, ' ') + '.' : 'That request is no longer waiting.');
  consents.delete(id);
  renderConsents();
}

function tick() {
  for (const timer of document.querySelectorAll('.timer[data-expires]')) {
    const left = Math.max(0, Math.round((Number(timer.dataset.expires) - Date.now()) / 1000));
    timer.textContent = 'Declined by itself in ' + left + ' s unless you answer.';
  }
}

// -- sites ---------------------------------------------------------------------------------

async function loadSites() {
  const { body } = await api('sites');
  const box = document.getElementById('sites');
  box.replaceChildren();
  const sites = body.sites || [];
  document.getElementById('no-sites').hidden = sites.length > 0;
  for (const site of sites) box.append(siteCard(site));
}

function siteCard(site) {
  const titleId = 'site-' + btoa(site.origin).replace(/[^A-Za-z0-9]/g, '');
  const card = el('article', { className: 'card site', 'aria-labelledby': titleId, 'data-origin': site.origin });
  const [heading, ...below] = originHeading(site, 'h3');
  heading.id = titleId;
  card.append(heading, ...below);
  card.append(facts([
    ['State', el('span', { className: 'state state-' + site.state, text: site.state })],
    ['First seen', site.firstSeen], ['Last seen', site.lastSeen], ['Note', site.note],
  ]));
  const toggleId = titleId + '-own';
  const toggle = el('input', { type: 'checkbox', id: toggleId, checked: site.decideOnMyOwn,
    onchange: (event) => siteAction(site.origin, 'decide-on-my-own', event.target.checked) });
  card.append(el('div', { className: 'toggle' }, toggle,
    el('label', { for: toggleId, text: 'Decide on my own: its links connect without asking' })));
  const actions = el('div', { className: 'actions', role: 'group', 'aria-label': 'Change ' + site.origin });
  if (site.state === 'active') actions.append(el('button', { type: 'button', text: 'Pause', onclick: () => siteAction(site.origin, 'pause') }));
  else actions.append(el('button', { type: 'button', text: 'Resume', onclick: () => siteAction(site.origin, 'resume') }));
  if (site.state !== 'blocked') actions.append(el('button', { type: 'button', className: 'danger', text: 'Block', onclick: () => siteAction(site.origin, 'block') }));
  actions.append(el('button', { type: 'button', className: 'danger', text: 'Forget', onclick: () => siteAction(site.origin, 'forget') }));
  card.append(actions);
  if (site.grants && site.grants.length) card.append(grantsTable(site));
  else card.append(el('p', { text: 'No live grant.' }));
  return card;
}

function grantsTable(site) {
  const rows = el('tbody');
  for (const grant of site.grants) {
    const record = grant.record || {};
    rows.append(el('tr', { 'data-grant': grant.grantId },
      el('td', { text: grant.grantId.slice(0, 8) + '…' }),
      el('td', { text: (grant.skills || []).join(', ') }),
      el('td', { text: grant.expiresAt }),
      el('td', { text: limitsText(grant.limits) }),
      el('td', { text: String(record.calls ?? 0) }),
      el('td', { text: String(record.inFlight ?? 0) }),
      el('td', { text: (record.spent || '0') + ' of ' + (grant.budget || '-') }),
      el('td', {}, el('button', { type: 'button', text: 'Release', 'aria-label': 'Release grant ' + grant.grantId.slice(0, 8),
        onclick: () => release(grant.grantId) }))));
  }
  const head = el('tr', {}, ...['Grant', 'Skills', 'Expires', 'Limits in force', 'Calls', 'In flight', 'Spent', 'Action']
    .map((name) => el('th', { scope: 'col', text: name })));
  return el('table', {}, el('caption', { text: 'Grants of ' + site.origin }), el('thead', {}, head), rows);
}

async function siteAction(origin, action, on) {
  const { body } = await api('sites', { method: 'POST', body: { origin, action, on } });
  say(body.ok ? (action === 'decide-on-my-own' ? 'Decide on my own is ' + (on ? 'on' : 'off') : action + ': done') + ' for ' + origin + '.' : 'Not done: ' + (body.message || 'error'));
  loadSites();
}

async function release(grantId) {
  const { body } = await api('grants/' + encodeURIComponent(grantId) + '/release', { method: 'POST', body: {} });
  say(body.ok ? 'The grant is released.' : 'That grant had already ended.');
  loadSites();
}

// -- activity ------------------------------------------------------------------------------

function activityFilters() {
  const form = document.getElementById('activity-filter');
  const filters = {};
  for (const name of ['origin', 'skill', 'decision', 'code']) {
    const value = form.elements[name].value.trim();
    if (value) filters[name] = value;
  }
  return filters;
}

function matches(entry, filters) {
  return (!filters.origin || entry.origin === filters.origin)
    && (!filters.skill || entry.skill === filters.skill)
    && (!filters.decision || entry.decision === filters.decision)
    && (!filters.code || entry.outcome === filters.code);
}

function activityRow(entry, fresh) {
  let measured = '';
  if (entry.clipSeconds !== undefined) measured = entry.clipSeconds + ' s';
  else if (entry.textChars !== undefined) measured = entry.textChars + ' chars';
  const row = el('tr', { className: fresh ? 'new' : '' },
    ...[entry.time, entry.kind, entry.origin, entry.skill, entry.decision, entry.outcome, measured,
      entry.latencyMs !== undefined ? entry.latencyMs + ' ms' : '', entry.cost]
      .map((value) => el('td', { text: value === undefined || value === null || value === '' ? '-' : value })));
  return row;
}

async function loadActivity(older) {
  const filters = activityFilters();
  const query = new URLSearchParams(filters);
  if (older && oldestActivity !== null) query.set('before', String(oldestActivity));
  const { status, body } = await api('activity?' + query.toString());
  const rows = document.getElementById('activity-rows');
  if (!older) rows.replaceChildren();
  if (status !== 200) {
    say('Activity: ' + (body.message || 'cannot be read'));
    return;
  }
  const entries = body.entries || [];
  for (const entry of entries) rows.append(activityRow(entry, false));
  if (entries.length) oldestActivity = entries[entries.length - 1].id;
  document.getElementById('no-activity').hidden = rows.children.length > 0;
  document.getElementById('activity-older').hidden = entries.length < 100;
}

function liveActivity(entry) {
  if (document.getElementById('view-activity').hidden) return;
  if (!matches(entry, activityFilters())) return;
  const rows = document.getElementById('activity-rows');
  rows.prepend(activityRow(entry, true));
  document.getElementById('no-activity').hidden = true;
}

// -- engine and pairings -------------------------------------------------------------------

function layoutSource(source) {
  if (source === 'flags') return 'the options serve was started with';
  if (source && source.startsWith('tuned')) return 'measurement on this computer (byoa-bench tune'
    + (source.length > 6 ? ', ' + source.slice(6) : '') + ')';
  return 'the defaults (run byoa-bench tune to measure this computer)';
}

async function loadEngine() {
  const { body } = await api('engine');
  const box = document.getElementById('engine');
  box.replaceChildren();
  const speech = body.speech || {};
  const workers = el('ul');
  for (const worker of speech.workers || []) {
    workers.append(el('li', { text: 'pid ' + worker.pid + (worker.rssMib ? ', ' + worker.rssMib + ' MiB' : '') }));
  }
  box.append(el('h3', { text: 'Speech' }), facts([
    ['Model', speech.model], ['Device', speech.device], ['Backend', speech.backend],
    ['Ready', speech.running ? (speech.ready ? 'yes' : 'not yet') : 'no speech model runs'],
    ['Workers', workers.children.length ? workers
      : (speech.letGo ? 'let go while idle; the next call starts them' : 'none')],
    ['Layout', speech.layout ? speech.layout.workers + ' × ' + speech.layout.threads + ' thread(s), batch '
      + speech.layout.batch + ', encoder window ' + speech.layout.encoderSeconds + ' s, let go after '
      + (speech.layout.idleReleaseSeconds ? speech.layout.idleReleaseSeconds + ' s idle' : 'never') : ''],
    ['Layout chosen by', speech.layout ? layoutSource(speech.layout.source) : ''],
    ['Calls waiting / running', speech.running ? speech.queued + ' / ' + speech.busy : ''],
    ['Workers replaced', speech.restarts],
    ['Engine process', body.frontRssMib ? body.frontRssMib + ' MiB' : ''],
  ]));
  const rows = el('tbody');
  for (const source of body.textSources || []) {
    rows.append(el('tr', {},
      el('td', { text: source.name }), el('td', { text: source.kind || '-' }),
      el('td', {}, el('span', { className: source.up ? 'up' : 'down', text: source.up ? 'up' : 'down' })),
      el('td', { text: source.up ? String(source.models) : (source.problem || '-') })));
  }
  const head = el('tr', {}, ...['Source', 'Kind', 'State', 'Models or problem'].map((name) => el('th', { scope: 'col', text: name })));
  box.append(el('h3', { text: 'Text sources' }),
    el('table', {}, el('caption', { text: 'Text sources' }), el('thead', {}, head), rows));
}

async function loadPairings() {
  const { body } = await api('pairings');
  const box = document.getElementById('pairings');
  box.replaceChildren();
  const pairings = body.pairings || [];
  document.getElementById('no-pairings').hidden = pairings.length > 0;
  if (!pairings.length) return;
  const rows = el('tbody');
  for (const pairing of pairings) {
    rows.append(el('tr', {},
      el('td', { text: pairing.platform }), el('td', { text: (pairing.scope || []).join(', ') }),
      el('td', { text: pairing.mode }), el('td', { text: pairing.paired_at }),
      el('td', {}, el('button', { type: 'button', className: 'danger', text: 'Revoke',
        'aria-label': 'Revoke ' + pairing.platform, onclick: () => revokePairing(pairing.platform) }))));
  }
  const head = el('tr', {}, ...['Platform', 'Scope', 'Mode', 'Paired', 'Action'].map((name) => el('th', { scope: 'col', text: name })));
  box.append(el('table', {}, el('caption', { text: 'Paired platforms' }), el('thead', {}, head), rows));
}

async function revokePairing(platform) {
  const { body } = await api('pairings/' + encodeURIComponent(platform) + '/revoke', { method: 'POST', body: {} });
  say(body.ok ? 'Revoked ' + platform + '.' : 'Not revoked: ' + (body.message || 'error'));
  loadPairings();
}

// -- the live feed -------------------------------------------------------------------------

function connectLive() {
  const scheme = location.protocol === 'https:' ? 'wss://' : 'ws://';
  live = new WebSocket(scheme + location.host + '/wallet/api/live');
  live.addEventListener('message', (message) => {
    let event;
    try { event = JSON.parse(message.data); } catch (error) { return; }
    if (event.type === 'hello') {
      consents.clear();
      for (const consent of event.consents || []) consents.set(consent.id, consent);
      renderConsents();
    } else if (event.type === 'consent') {
      consents.set(event.consent.id, event.consent);
      renderConsents();
      if (currentView() !== 'requests') location.hash = '#requests';
      const view = event.consent.view;
      say('A site is asking: ' + (view.headingHost || view.unicodeHost || event.consent.origin) + '.');
    } else if (event.type === 'consent-closed') {
      if (consents.delete(event.consent.id)) renderConsents();
    } else if (event.type === 'activity') {
      liveActivity(event.entry);
    } else if (event.type === 'sites-changed' && !document.getElementById('view-sites').hidden) {
      loadSites();
    }
  });
  live.addEventListener('close', () => {
    live = null;
    if (signedIn) setTimeout(connectLive, 2000);
  });
}

// -- the store's banner --------------------------------------------------------------------
// While the wallet's store cannot be used, or a pause or block is in force but not yet
// written, a banner above every view says so. It asks for the store's state alone, often.

const STORE_POLL_MS = 5000;

function storeBannerText(store) {
  if (!store || store.ok) return '';
  const lines = [];
  if (store.code) {
    lines.push('The wallet\'s store has a problem (' + store.code + '): ' + store.message + '.');
    if (store.code !== 'store-full') lines.push('Every site is refused until it is fixed; your own calls work.');
  }
  const waiting = store.pendingChanges || 0;
  if (waiting) {
    lines.push(waiting + (waiting === 1 ? ' change' : ' changes') + ' to your sites (pause, block) '
      + (waiting === 1 ? 'is' : 'are') + ' in force now but not yet written: '
      + (waiting === 1 ? 'it is' : 'they are') + ' written as soon as the store takes '
      + (waiting === 1 ? 'it' : 'them') + '.');
  }
  return lines.join(' ');
}

async function refreshStoreBanner() {
  try {
    if (signedIn) {
      const { status, body } = await api('engine?only=store');
      const banner = document.getElementById('store-banner');
      const text = status === 200 ? storeBannerText(body.store) : '';
      banner.textContent = text;
      banner.hidden = !text;
    }
  } finally {
    setTimeout(refreshStoreBanner, STORE_POLL_MS);
  }
}

setTimeout(refreshStoreBanner, 500);

// -- start ---------------------------------------------------------------------------------

async function start() {
  const ticket = location.hash.match(/^#ticket=([A-Za-z0-9_-]{10,100})$/);
  if (ticket) {
    history.replaceState(null, '', location.pathname + '#requests');
    const { body } = await api('session', { method: 'POST', body: { ticket: ticket[1] } });
    if (!body.ok) say('This ticket is used or expired: run byoa-skills wallet for a new one.');
  }
  const { status } = await api('consents');
  signedIn = status === 200;
  if (signedIn) connectLive();
  show(currentView());
  document.body.dataset.ready = signedIn ? 'yes' : 'signin';
}

document.getElementById('activity-filter').addEventListener('submit', (event) => {
  event.preventDefault();
  loadActivity(false);
});
document.getElementById('activity-filter').addEventListener('reset', () => setTimeout(() => loadActivity(false), 0));
document.getElementById('activity-older').addEventListener('click', () => loadActivity(true));
document.getElementById('engine-refresh').addEventListener('click', loadEngine);
window.addEventListener('hashchange', () => {
  show(currentView());
  document.getElementById('main').focus();
});
setInterval(tick, 1000);
start();
