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

// -- codes in words ------------------------------------------------------------------------
// Every code the engine can record (an activity entry's outcome, a call consent's reasons, a
// store problem, a text source's problem), with a short sentence a person reads. The page
// shows the sentence beside the code, and the code itself stays, small, to search for it; a
// code not in this table is shown alone. tests/test_wallet_codes.py checks that every code
// the engine exports or the docs list is here.

const CODE_SENTENCES = Object.freeze({
  'ok': 'It worked.',
  // the visitor's answer and the consents waiting
  'declined': 'You declined.',
  'no-answer': 'Nobody answered in time, so the wallet declined.',
  'too-many-consents': 'Too many requests were already waiting for you, so this one was declined.',
  'request-waiting': 'This site already has a request waiting for your answer.',
  'ask-waiting': 'Another call of this site is already waiting for your answer.',
  'asks-for-more': 'Without a click, the site asked for more than you had allowed it; it got nothing.',
  'no-click': 'The page asked without you clicking anything, so you were not asked.',
  'model-not-ticked': 'None of the models you ticked for this site is offered now, so it got no grant.',
  'decide-on-my-own-off': 'You turned off deciding on its own for this site, so the wallet did not go back.',
  'no-wallet-page': 'The wallet could not show you the request, so it was declined.',
  'bad-decision': 'The link came with an answer the wallet does not know.',
  'too-many-links': 'Too many links arrived at once; try again in a moment.',
  'code-seen': 'This link was already used; the site has to make a new one.',
  // the site's state
  'site-paused': 'You paused this site.',
  'site-blocked': 'You blocked this site.',
  'site-unreadable': 'The wallet cannot read its list of sites, so every site is refused for now.',
  'site-not-active': 'The site is paused or blocked, so the wallet did not connect it again.',
  'origin-invalid': 'The site’s address is not one the wallet works with (it must start with https://).',
  'not-this-origin': 'A page tried to use a grant that belongs to another site.',
  // the grant and the rules of a call
  'unknown-grant': 'The site used a grant that has ended or never existed.',
  'grant-expired': 'The site’s grant has expired.',
  'grant-invalid': 'The grant the site asked for breaks the rules.',
  'manifest-invalid': 'The site’s description of what it wants breaks the rules.',
  'manifest-too-large': 'The site’s description of what it wants is too long.',
  'limit-invalid': 'One of the limits the site set is not a number the wallet accepts.',
  'call-invalid': 'The call is not written the way the rules say.',
  'state-invalid': 'The wallet’s record of this grant could not be read.',
  'skill-not-declared': 'The site asked for something it had not said it would use.',
  'skill-not-granted': 'The site asked for something you did not allow.',
  'clip-too-long': 'The recording is longer than you allowed.',
  'text-too-long': 'The text is longer than allowed.',
  'rate-exceeded': 'The site made more calls a minute than you allowed.',
  'too-many-parallel-calls': 'The site ran more calls at once than you allowed.',
  'too-many-pending-calls': 'The site sent calls faster than it read the answers.',
  'budget-exceeded': 'This call would spend more than the site’s budget for the session.',
  'call-cost-high': 'This call costs more than the level you asked to be warned at.',
  'spend-high': 'The site’s spending would pass the level you asked to be warned at.',
  'currency-mismatch': 'The cost is in another currency than the budget.',
  'text-sent': 'This call sends your text, and you asked to be warned of that.',
  'not-local': 'This call would leave your computer, and the site promised it would not.',
  'answer-tokens-exceeded': 'The site asked for a longer answer than you allowed.',
  'model-not-granted': 'The site asked for a model you did not tick.',
  'purpose-doubt': 'This call may not fit the purpose the site gave.',
  'purpose-judge-error': 'The purpose check failed, so you are asked.',
  // the engine
  'unknown-skill': 'The wallet does not know this skill.',
  'skill-unavailable': 'This computer cannot do this now: no model for it is running.',
  'engine-not-ready': 'The speech model was still starting.',
  'not-ready': 'The speech model is still loading.',
  'no-fitting-model': 'No model on this computer can do what the site requires.',
  'queue-full': 'The computer was busy with other calls; try again shortly.',
  'deadline-exceeded': 'It took too long, so it was stopped.',
  'worker-crashed': 'The speech model stopped while working; it was restarted.',
  'transcribe-failed': 'The speech model could not transcribe this recording.',
  'call-failed': 'The call failed.',
  'shutting-down': 'The wallet was shutting down.',
  'unsupported-language': 'The model cannot transcribe that language.',
  'unsupported-option': 'This option does not work with this model.',
  'bad-params': 'The call’s settings are wrong.',
  'bad-request': 'The request is not written the way the wallet reads it.',
  'not-json': 'The message is not data the wallet can read.',
  'message-too-large': 'The message is too large.',
  'unauthorized': 'The program did not have the wallet’s key.',
  'forbidden-host': 'The request used an address the wallet does not answer to.',
  'forbidden-origin': 'A page from another address tried to reach the wallet.',
  'no-session': 'The wallet page is not signed in.',
  'not-registered': 'This platform is not paired with the wallet.',
  'outside-registration-scope': 'The platform asked for something its pairing does not allow.',
  // text
  'bad-messages': 'The text sent is not a list of messages.',
  'unknown-role': 'A message is not from the system, the user or the assistant.',
  'max-tokens-over-limit': 'The site asked for a longer answer than the wallet gives.',
  'model-required': 'The call names no model, and no default model is set.',
  'unknown-source': 'The model’s source is not one of your text sources.',
  'unknown-model': 'That model is not available here.',
  'source-down': 'Your text source did not answer.',
  'upstream-refused': 'Your text source refused the request (a missing key, for one).',
  'upstream-failed': 'Your text source failed.',
  'upstream-malformed': 'Your text source answered something the wallet cannot read.',
  'upstream-error': 'Your text source reported an error in the middle of its answer.',
  'model-mismatch': 'Another model answered than the one asked for, so the answer was dropped.',
  // recordings
  'missing-file': 'No recording was sent.',
  'file-too-large': 'The file is larger than the wallet takes.',
  'audio-too-long': 'The recording is longer than the wallet takes.',
  'uploads-full': 'Too many recordings were already waiting; try again once one is done.',
  'audio-undecodable': 'The file cannot be read as sound.',
  'client-gone': 'The program left before the answer was ready.',
  // audio clips (WAV)
  'bad-input': 'The call did not carry a recording the way the rules say.',
  'wrong-mime': 'The recording is not a WAV file.',
  'too-large': 'The recording is larger than the limit allows.',
  'bad-base64': 'The recording’s encoding is broken.',
  'not-riff': 'The recording is not a WAV file.',
  'not-wave': 'The recording is not a WAV file.',
  'truncated': 'The recording is cut short.',
  'trailing-bytes': 'The recording has extra data at its end.',
  'duplicate-chunk': 'The recording’s file is malformed (a part appears twice).',
  'missing-fmt': 'The recording does not say its format.',
  'bad-fmt': 'The recording’s format description is malformed.',
  'not-pcm': 'The recording is compressed; plain PCM sound is needed.',
  'not-mono': 'The recording has more than one channel; mono is needed.',
  'wrong-rate': 'The recording is not sampled at 16,000 Hz.',
  'wrong-bits': 'The recording is not 16-bit.',
  'bad-block-align': 'The recording’s format description is inconsistent.',
  'bad-byte-rate': 'The recording’s format description is inconsistent.',
  'missing-data': 'The recording holds no sound part.',
  'data-before-fmt': 'The recording’s parts are in the wrong order.',
  'partial-frame': 'The recording ends in the middle of a sample.',
  'empty': 'The recording is empty.',
  'too-long': 'The recording is longer than the limit allows.',
  // links and the direct link
  'link-too-long': 'The link is too long.',
  'not-a-link': 'This is not a wallet link.',
  'has-fragment': 'The link holds a # part that it must not.',
  'repeated-parameter': 'The link names a part twice.',
  'wrong-version': 'The link is for another version of the wallet.',
  'unknown-parameter': 'The link holds a part the wallet does not know.',
  'missing-parameter': 'The link is missing a part.',
  'endpoint-not-wss': 'The site’s address in the link is not a secure one (wss://).',
  'endpoint-invalid': 'The site’s address in the link cannot be read.',
  'endpoint-ip-address': 'The link points to a bare numeric address, not a site’s name.',
  'endpoint-local-name': 'The link points to a name on your own network, not a site.',
  'endpoint-single-label': 'The link points to a name that is not a full site name.',
  'endpoint-private-address': 'The site’s name leads to an address on your own network, so the wallet did not connect.',
  'manifest-not-base64url': 'The site’s description in the link is not encoded the way the rules say.',
  'manifest-not-json': 'The site’s description in the link cannot be read.',
  'manifest-not-object': 'The site’s description in the link is not a description.',
  'session-invalid': 'The link’s one-time code is malformed.',
  'bye': 'The connection ended.',
  'dropped': 'The connection to the site was lost.',
  'malformed': 'The site sent something the wallet cannot read, so it ended the connection.',
  'not-reading': 'The site stopped reading the answers, so the wallet ended the connection.',
  'bad-session': 'The site did not know the link’s one-time code.',
  'manifest-mismatch': 'The site changed its description after you allowed it, so the wallet left.',
  'grant-released': 'The grant was released, so the connection ended.',
  'grant-ended': 'The grant ended (released, blocked, forgotten or expired): the wallet left for good.',
  // the models ticked and the limits you set
  'models-invalid': 'The site’s list of the models it wants is malformed.',
  'models-not-for-skill': 'The site asked for models for a skill that takes none.',
  'too-few-models': 'Fewer models are ticked than the site needs.',
  'too-many-models': 'More models are ticked than the site asks for.',
  'same-company': 'The site asks for models from different companies; two ticked ones are from one.',
  'model-ticked-twice': 'The same model is ticked twice.',
  'model-not-offered': 'None of your text sources offers that model now.',
  'limit-wider': 'A limit can only be made stricter than the site’s, never wider.',
  'unknown-limit': 'That is not a limit you can set.',
  'budget-invalid': 'The budget is an amount and the site’s currency, such as 0.50 USD.',
  'expiry-later': 'A grant can end sooner, not later.',
  'expiry-invalid': 'The end of the grant is given in minutes from now.',
  'choices-invalid': 'What was sent with the answer is malformed.',
  'no-live-grant': 'The site holds no live grant to change.',
  // the purpose judge
  'purpose-fits': 'Your purpose judge found the call fits what the site said it is for.',
  'purpose-unclear': 'Your purpose judge could not tell whether the call fits the site’s purpose.',
  'purpose-mismatch': 'Your purpose judge found the call does not fit the site’s stated purpose, so it was held.',
  'purpose-judge-timeout': 'Your purpose judge gave no opinion in time.',
  'purpose-judge-unreadable': 'Your purpose judge answered something that is not an opinion.',
  'purpose-judge-unavailable': 'Your purpose judge is on, but the source of its model does not answer, so you are asked.',
  'purpose-judge-too-long': 'This call is longer than your purpose judge can read whole, so you are asked.',
  'purpose-judge-spent': 'Your paid purpose judge reached the spend you allow it per day, so you are asked.',
  'judge-invalid': 'That is not a setting of the purpose judge.',
  'no-judge': 'This engine has no purpose judge.',
  // the wallet's store
  'store-unsafe': 'The wallet’s data file or folder could have been changed by someone else.',
  'store-damaged': 'The wallet’s data file is damaged.',
  'store-too-new': 'A newer version of the wallet wrote its data file.',
  'store-read-only': 'The wallet cannot write to its data folder.',
  'store-full': 'The disk is full.',
  'store-unreadable': 'The wallet cannot read its data file.',
});

// ``code``'s sentence, or '' for a code the table does not hold.
function codeSentence(code) {
  return typeof code === 'string' && Object.hasOwn(CODE_SENTENCES, code) ? CODE_SENTENCES[code] : '';
}

// A code as a person reads it: its sentence, the engine's own words about this case
// (``detail``) if any, then the code itself, small and in monospace.
function describedCode(code, detail) {
  const box = el('span', { className: 'outcome' });
  const sentence = codeSentence(code);
  if (sentence) box.append(el('span', { className: 'sentence', text: sentence }), ' ');
  if (detail) box.append(el('span', { className: 'detail', text: detail }), ' ');
  box.append(el('code', { className: 'code', text: code }));
  return box;
}

// -- times as a person reads them ----------------------------------------------------------
// A time reads "just now", "2 min ago", "3 h ago", "yesterday" or a date ("in 23 h" ahead),
// with the exact local date and time in a tooltip on hover and on keyboard focus, and in the
// text a screen reader reads. Each time ages in place every 30 s.

const MINUTE_MS = 60 * 1000;
const HOUR_MS = 60 * MINUTE_MS;
const TIME_REFRESH_MS = 30 * 1000;
const DAY_FORMAT = new Intl.DateTimeFormat(undefined, { day: 'numeric', month: 'short', year: 'numeric' });
const EXACT_FORMAT = new Intl.DateTimeFormat(undefined, { dateStyle: 'full', timeStyle: 'medium' });

function localDay(ms) {
  const date = new Date(ms);
  return Math.round(Date.UTC(date.getFullYear(), date.getMonth(), date.getDate()) / (24 * HOUR_MS));
}

// ``at`` (milliseconds) as a person says it, seen from ``now``.
function relativeTime(at, now = Date.now()) {
  const ahead = at - now;
  if (Math.abs(ahead) < 45 * 1000) return ahead > 0 ? 'in a moment' : 'just now';
  if (ahead > 0) {
    if (ahead < HOUR_MS) return 'in ' + Math.max(1, Math.floor(ahead / MINUTE_MS)) + ' min';
    if (ahead < 48 * HOUR_MS) return 'in ' + Math.floor(ahead / HOUR_MS) + ' h';
    return 'on ' + DAY_FORMAT.format(at);
  }
  const ago = -ahead;
  if (ago < HOUR_MS) return Math.max(1, Math.floor(ago / MINUTE_MS)) + ' min ago';
  const days = localDay(now) - localDay(at);
  if (days === 0 || ago < 6 * HOUR_MS) return Math.floor(ago / HOUR_MS) + ' h ago';
  if (days === 1) return 'yesterday';
  return DAY_FORMAT.format(at);
}

function exactTime(at) {
  return EXACT_FORMAT.format(at);
}

// A focusable <time> for ``value`` (RFC 3339 text or milliseconds); ``value`` as text when it
// is not a time.
function timeEl(value) {
  const at = typeof value === 'number' ? value : Date.parse(value);
  if (!Number.isFinite(at)) return el('span', { text: value === undefined || value === null || value === '' ? '-' : value });
  const exact = exactTime(at);
  return el('time', { className: 'when', datetime: typeof value === 'number' ? new Date(at).toISOString() : value,
    tabindex: '0', 'data-at': at, 'data-exact': exact },
  el('span', { className: 'ago', text: relativeTime(at) }),
  el('span', { className: 'exact', text: ' (' + exact + ')' }));
}

function refreshTimes() {
  const now = Date.now();
  for (const time of document.querySelectorAll('time.when[data-at]')) {
    const ago = time.querySelector('.ago');
    const text = relativeTime(Number(time.dataset.at), now);
    if (ago && ago.textContent !== text) ago.textContent = text;
  }
}

// One tooltip for every time, placed beside the time it tells (fixed, so that a table that
// scrolls sideways never clips it); Escape closes it.
let tipFor = null;

function showTip(time) {
  const tip = document.getElementById('time-tip');
  tipFor = time;
  tip.textContent = time.dataset.exact;
  tip.hidden = false;
  const box = time.getBoundingClientRect();
  const left = Math.max(4, Math.min(box.left, window.innerWidth - tip.offsetWidth - 4));
  const below = box.bottom + 6 + tip.offsetHeight <= window.innerHeight;
  tip.style.left = left + 'px';
  tip.style.top = (below ? box.bottom + 6 : Math.max(4, box.top - tip.offsetHeight - 6)) + 'px';
}

function hideTip() {
  tipFor = null;
  document.getElementById('time-tip').hidden = true;
}

function timeAt(target) {
  return target instanceof Element ? target.closest('time.when') : null;
}

document.addEventListener('focusin', (event) => {
  const time = timeAt(event.target);
  if (time) showTip(time);
  else hideTip();
});
document.addEventListener('focusout', (event) => {
  if (timeAt(event.target) === tipFor) hideTip();
});
document.addEventListener('mouseover', (event) => {
  const time = timeAt(event.target);
  if (time && time !== tipFor) showTip(time);
});
document.addEventListener('mouseout', (event) => {
  const time = timeAt(event.target);
  const into = event.relatedTarget;
  if (!time || time !== tipFor || time === document.activeElement) return;
  if (into instanceof Node && (time.contains(into) || document.getElementById('time-tip').contains(into))) return;
  hideTip();
});
document.getElementById('time-tip').addEventListener('mouseleave', () => {
  if (tipFor && tipFor !== document.activeElement) hideTip();
});
document.addEventListener('keydown', (event) => {
  if (event.key === 'Escape' && tipFor) hideTip();
});
window.addEventListener('scroll', () => { if (tipFor) showTip(tipFor); }, true);
window.addEventListener('resize', () => { if (tipFor) showTip(tipFor); });

// -- grant ids -----------------------------------------------------------------------------
// A grant id is shown by its first 8 characters; Copy puts the whole id on the clipboard, or,
// where the browser will not, shows it whole and selects it for Ctrl+C.

function shortId(id) {
  return id.length > 8 ? id.slice(0, 8) + '…' : id;
}

function grantIdEl(id) {
  if (!id) return el('span', { text: '-' });
  const shown = el('code', { className: 'grant-id', title: id, text: shortId(id) });
  const copy = el('button', { type: 'button', className: 'copy', 'data-copy': id,
    'aria-label': 'Copy grant id ' + shortId(id), onclick: () => copyId(copy, shown) }, 'Copy');
  return el('span', { className: 'id-copy' }, shown, ' ', copy);
}

async function copyId(button, shown) {
  const full = button.dataset.copy;
  try {
    if (!navigator.clipboard || !window.isSecureContext) throw new Error('no clipboard');
    await navigator.clipboard.writeText(full);
    say('Copied the grant id ' + full + '.');
  } catch (error) {
    shown.textContent = full;
    const range = document.createRange();
    range.selectNodeContents(shown);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    say('The grant id ' + full + ' is selected: press Ctrl+C to copy it.');
  }
}

// A table that scrolls sideways inside its own box on a narrow screen (the page never does),
// reachable by keyboard.
function scrolling(table, label) {
  return el('div', { className: 'table-scroll', role: 'region', tabindex: '0', 'aria-label': label }, table);
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

// The readable name of each limit a visitor may set, in the order shown.
const LIMIT_NAMES = Object.freeze({
  maxCallsPerMinute: 'Calls per minute',
  maxParallelCalls: 'Calls at once',
  maxClipSeconds: 'Longest clip (seconds)',
  maxTextChars: 'Longest text (characters)',
  maxAnswerTokens: 'Longest answer (tokens)',
  maxCallSeconds: 'Longest call (seconds)',
});

// A limit's name as the consent form writes it; one the page does not know, in words.
function limitName(name) {
  if (LIMIT_NAMES[name]) return LIMIT_NAMES[name];
  const words = name.replace(/([a-z0-9])([A-Z])/g, '$1 $2').toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

// Limits in the consent form's words and order ("Calls per minute 3"), on a consent and on a
// site's grants alike.
function limitsText(limits) {
  const known = Object.keys(LIMIT_NAMES);
  const rank = (name) => (known.includes(name) ? known.indexOf(name) : known.length);
  const parts = Object.entries(limits || {})
    .sort(([a], [b]) => rank(a) - rank(b))
    .map(([name, value]) => limitName(name) + ' ' + value);
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
    for (const reason of view.reasons || []) reasons.append(el('li', {}, describedCode(reason.code, reason.message)));
    const measured = Object.entries(view.measured || {}).map(([k, v]) => k + ' ' + v).join(', ');
    card.append(facts([['Skill', view.skill], ['Measured', measured], ['Estimated cost', view.estimatedCost],
      ['Asked', consent.createdMs ? timeEl(consent.createdMs) : '']]), reasons);
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
      ['Asked', consent.createdMs ? timeEl(consent.createdMs) : ''],
    ]));
  }
  const picker = view.models ? modelPicker(consent.id, view.models) : null;
  if (picker) card.append(picker.box);
  const chooser = view.choices ? limitsChooser(consent.id, view.choices) : null;
  if (chooser) card.append(chooser.box);
  const problem = el('p', { className: 'choice-problem', role: 'alert', hidden: true });
  card.append(problem, el('p', { className: 'timer', 'data-expires': consent.expiresMs }));
  const answers = el('div', { className: 'answers', role: 'group', 'aria-label': 'Your answer' });
  const labels = consent.kind === 'call'
    ? [['allow', 'Allow this call', 'primary'], ['decline', 'Decline', ''], ['decide-on-my-own', 'Allow and decide on my own', '']]
    : [['allow', 'Allow', 'primary'], ['decline', 'Decline', ''], ['decide-on-my-own', 'Allow and decide on my own', '']];
  const allows = [];
  for (const [decision, label, kind] of labels) {
    const button = el('button', { type: 'button', className: kind, text: label, onclick: () => {
      const choices = decision === 'decline' ? undefined : {
        ...(chooser ? chooser.read() : {}), ...(picker ? { models: picker.ticked() } : {}) };
      answer(consent.id, decision, choices, problem);
    } });
    if (decision !== 'decline') allows.push(button);
    answers.append(button);
  }
  if (picker) picker.onChange((ready) => { for (const button of allows) button.disabled = !ready; });
  card.append(answers);
  return card;
}

// The models a consent offers, grouped by company, as checkboxes; Allow waits until the ticks
// satisfy what the site asks (how many, how many needed, different companies).
function modelPicker(consentId, models) {
  const box = el('fieldset', { className: 'models' });
  box.append(el('legend', { text: 'Models this site may use' }));
  if (models.why) box.append(el('blockquote', { className: 'models-why', dir: 'auto', text: models.why }));
  const rule = 'It asks for ' + models.count + (models.count === 1 ? ' model' : ' models')
    + (models.required < models.count ? ' (' + models.required + ' needed, the others recommended)' : '')
    + (models.differentCompanies ? ', each from a different company.' : '.');
  box.append(el('p', { className: 'models-rule', text: rule }));
  const boxes = [];
  let n = 0;
  for (const group of models.groups || []) {
    const list = el('ul', { className: 'model-list' });
    for (const model of group.models) {
      const id = 'm-' + consentId + '-' + (n++);
      const input = el('input', { type: 'checkbox', id, checked: model.ticked, 'data-ref': model.ref });
      boxes.push(input);
      list.append(el('li', {}, input, el('label', { for: id },
        el('bdi', { text: model.model }), el('span', { className: 'model-source', text: ' on ' + model.source }))));
    }
    box.append(el('h4', { className: 'company', text: group.company || 'Maker not in the name' }), list);
  }
  if (!boxes.length) box.append(el('p', { text: 'None of your text sources offers a model right now.' }));
  const status = el('p', { className: 'models-status', 'aria-live': 'polite' });
  box.append(status);
  const listeners = [];
  const ticked = () => boxes.filter((input) => input.checked).map((input) => input.dataset.ref);
  function check() {
    const refs = ticked();
    let why = '';
    if (refs.length < models.required) why = 'Tick ' + (models.required - refs.length) + ' more to allow.';
    else if (refs.length > models.count) why = 'Tick at most ' + models.count + '.';
    else if (models.differentCompanies) {
      const companies = refs.map((ref) => (models.companies || {})[ref]).filter(Boolean);
      if (new Set(companies).size !== companies.length) why = 'Tick models from different companies.';
    }
    status.textContent = why || refs.length + ' ticked: ready.';
    for (const listener of listeners) listener(!why);
  }
  for (const input of boxes) input.addEventListener('change', check);
  return { box, ticked, onChange: (listener) => { listeners.push(listener); check(); } };
}

// The limits a visitor may set: each no wider than its ceiling (the site's, or the wallet's
// own); empty leaves the site's. The budget is the visitor's own; the end may come sooner.
function limitsChooser(prefix, choices, current) {
  const box = el('details', { className: 'limits-chooser' });
  box.append(el('summary', { text: current ? 'Change limits and models' : 'Set your own limits (optional)' }));
  const inputs = {};
  const grid = el('div', { className: 'limit-grid' });
  for (const [name, label] of Object.entries(LIMIT_NAMES)) {
    const ceiling = (choices.ceilings || {})[name];
    if (ceiling === undefined) continue;
    const id = 'l-' + prefix + '-' + name;
    const site = (choices.siteLimits || {})[name];
    const hint = site !== undefined ? 'site: ' + site : 'up to ' + ceiling;
    const value = current && current[name] !== undefined ? current[name] : '';
    inputs[name] = el('input', { type: 'number', id, min: '1', max: String(ceiling), step: 'any', value: String(value),
      placeholder: hint, 'data-limit': name, 'aria-describedby': id + '-hint' });
    grid.append(el('label', { for: id, text: label }), inputs[name],
      el('span', { id: id + '-hint', className: 'limit-hint', text: 'at most ' + ceiling }));
  }
  const budgetId = 'b-' + prefix;
  const budgetHint = choices.budget ? (current ? 'now: ' : 'site: ') + choices.budget : '0.50 ' + (choices.currency || 'USD');
  const budget = el('input', { type: 'text', id: budgetId, placeholder: budgetHint, inputmode: 'decimal' });
  grid.append(el('label', { for: budgetId, text: 'Budget per session' }), budget,
    el('span', { className: 'limit-hint', text: 'in ' + (choices.currency || 'USD') }));
  const endsId = 'e-' + prefix;
  const ends = el('input', { type: 'number', id: endsId, min: '1', max: String(choices.maxExpiryMinutes || 1440), step: 'any' });
  grid.append(el('label', { for: endsId, text: 'Ends in (minutes)' }), ends,
    el('span', { className: 'limit-hint', text: 'at most ' + (choices.maxExpiryMinutes || 1440) }));
  box.append(grid);
  function read() {
    const limits = {};
    for (const [name, input] of Object.entries(inputs)) {
      if (input.value.trim() !== '') limits[name] = Number(input.value);
      else if (current && current[name] !== undefined) limits[name] = null;
    }
    const chosen = { limits };
    if (budget.value.trim()) {
      const text = budget.value.trim();
      chosen.budget = /\s/.test(text) ? text : text + ' ' + (choices.currency || 'USD');
    }
    if (ends.value.trim()) chosen.expiresInMinutes = Number(ends.value);
    return chosen;
  }
  return { box, read };
}

function problemText(body) {
  const found = (body.errors || []).map((problem) => problem.code).filter(Boolean);
  return (codeSentence(body.code) || body.message || 'Refused.') + ' (' + [body.code, ...found.slice(1)].join(', ') + ')';
}

async function answer(id, decision, choices, problem) {
  const { status, body } = await api('consents/' + encodeURIComponent(id), { method: 'POST', body: { decision, choices } });
  if (!body.ok && status === 400 && problem) {   // the choices were refused: the consent waits on
    problem.hidden = false;
    problem.replaceChildren(describedCode(body.code, body.message));
    say('Not answered: ' + problemText(body));
    return;
  }
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
  loadJudge();
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
    ['First seen', site.firstSeen ? timeEl(site.firstSeen) : ''],
    ['Last seen', site.lastSeen ? timeEl(site.lastSeen) : ''], ['Note', site.note],
  ]));
  const toggleId = titleId + '-own';
  const toggle = el('input', { type: 'checkbox', id: toggleId, checked: site.decideOnMyOwn,
    onchange: (event) => siteAction(site.origin, 'decide-on-my-own', event.target.checked) });
  card.append(el('div', { className: 'toggle' }, toggle,
    el('label', { for: toggleId, text: 'Decide on my own: its links connect without asking' })));
  const judgeId = titleId + '-judge';
  const judge = el('select', { id: judgeId, 'data-judge-site': site.origin,
    onchange: (event) => siteJudge(site.origin, event.target.value) });
  for (const [value, label] of [['', 'as the default'], ['on', 'on'], ['off', 'off']]) {
    judge.append(el('option', { value, text: label, selected: (site.judge || '') === value }));
  }
  card.append(el('div', { className: 'toggle' },
    el('label', { for: judgeId, text: 'Purpose judge for this site: ' }), judge));
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
      el('td', {}, grantIdEl(grant.grantId)),
      el('td', { text: (grant.skills || []).join(', ') }),
      el('td', {}, timeEl(grant.expiresAt)),
      el('td', { text: limitsText(grant.limits) }),
      el('td', { text: String(record.calls ?? 0) }),
      el('td', { text: String(record.inFlight ?? 0) }),
      el('td', { text: (record.spent || '0') + ' of ' + (grant.budget || '-') }),
      el('td', {}, el('button', { type: 'button', text: 'Release', 'aria-label': 'Release grant ' + grant.grantId.slice(0, 8),
        onclick: () => release(grant.grantId) }))));
  }
  const head = el('tr', {}, ...['Grant', 'Skills', 'Expires', 'Limits in force', 'Calls', 'In flight', 'Spent', 'Action']
    .map((name) => el('th', { scope: 'col', text: name })));
  const table = scrolling(el('table', {}, el('caption', { text: 'Grants of ' + site.origin }), el('thead', {}, head), rows),
    'Grants of ' + site.origin);
  const box = el('div', { className: 'grants' }, table);
  for (const grant of site.grants) box.append(grantChanger(grant));
  return box;
}

// A live grant's limits, budget, end and models, made stricter by the visitor; the site is told.
function grantChanger(grant) {
  const prefix = 'g' + grant.grantId.replace(/[^A-Za-z0-9]/g, '').slice(0, 12);
  const chooser = limitsChooser(prefix, grant.choices || {}, grant.visitorLimits || {});
  chooser.box.classList.add('grant-changer');
  chooser.box.dataset.grant = grant.grantId;
  chooser.box.querySelector('summary').textContent = 'Change grant ' + shortId(grant.grantId) + ': limits, budget, end'
    + (grant.modelNames && Object.keys(grant.modelNames).length ? ', models' : '');
  const codes = Object.entries(grant.modelNames || {});
  const boxes = [];
  if (codes.length) {
    const list = el('ul', { className: 'model-list' });
    for (const [code, ref] of codes) {
      const id = prefix + '-' + code;
      const input = el('input', { type: 'checkbox', id, checked: true, 'data-code': code });
      boxes.push(input);
      list.append(el('li', {}, input, el('label', { for: id }, el('code', { text: code }), ' ', el('bdi', { text: ref }))));
    }
    chooser.box.append(el('fieldset', { className: 'models' }, el('legend', { text: 'Models it may use' }), list));
  }
  const problem = el('p', { className: 'choice-problem', role: 'alert', hidden: true });
  const save = el('button', { type: 'button', className: 'primary', text: 'Save', onclick: async () => {
    const choices = chooser.read();
    if (boxes.length) choices.models = boxes.filter((input) => input.checked).map((input) => input.dataset.code);
    const { body } = await api('grants/' + encodeURIComponent(grant.grantId) + '/change', { method: 'POST', body: choices });
    if (!body.ok) {
      problem.hidden = false;
      problem.replaceChildren(describedCode(body.code, body.message));
      say('Not changed: ' + problemText(body));
      return;
    }
    say('Saved: the site is told, and its next calls follow the new limits.');
    loadSites();
  } });
  chooser.box.append(problem, el('div', { className: 'actions' }, save));
  return chooser.box;
}

async function siteJudge(origin, value) {
  const { body } = await api('sites', { method: 'POST', body: { origin, action: 'judge', setting: value || null } });
  say(body.ok ? 'Purpose judge for ' + origin + ': ' + (value || 'as the default') + '.' : 'Not done: ' + problemText(body));
}

// The purpose judge: the visitor's own model checks that a site's text calls fit the purpose
// it stated. Its default for every site, the model that judges, and what a mismatch gives.
async function loadJudge() {
  const box = document.getElementById('judge');
  const { body } = await api('judge');
  const judge = body.judge;
  box.replaceChildren();
  if (!judge) return;
  const card = el('article', { className: 'card judge', 'aria-labelledby': 'h-judge' });
  card.append(el('h3', { id: 'h-judge', text: 'Purpose judge' }),
    el('p', { text: 'Your own model reads each text call of a site and checks it against the purpose the site stated; an answer that does not fit is held back.' }));
  const state = !judge.on ? 'Off for sites that follow the default.'
    : judge.up ? 'On: judging with ' + judge.judgingModel + '.'
      : 'On, but no text source answers for the judge’s model' + (judge.judgingModel ? ' (' + judge.judgingModel + ')' : '') + ': each text call asks you.';
  card.append(el('p', { className: 'judge-state', role: 'status', text: state }));
  const onId = 'judge-on';
  const on = el('input', { type: 'checkbox', id: onId, checked: judge.on,
    onchange: (event) => setJudge({ on: event.target.checked }) });
  card.append(el('div', { className: 'toggle' }, on,
    el('label', { for: onId, text: 'Judge every site’s text calls unless its own switch says otherwise' })));
  const modelId = 'judge-model';
  const model = el('select', { id: modelId, onchange: (event) => setJudge({ model: event.target.value || null }) });
  model.append(el('option', { value: '', text: 'a local model the wallet picks', selected: !judge.model }));
  for (const offered of judge.offered || []) {
    model.append(el('option', { value: offered.ref, selected: judge.model === offered.ref,
      text: offered.ref + (offered.paid ? ' (paid: its cost is yours)' : '') }));
  }
  const mismatchId = 'judge-mismatch';
  const mismatch = el('select', { id: mismatchId, onchange: (event) => setJudge({ mismatch: event.target.value }) });
  for (const [value, label] of [['blocked', 'hold the answer back'], ['ask', 'ask me']]) {
    mismatch.append(el('option', { value, text: label, selected: judge.mismatch === value }));
  }
  // a paid judge's spend per day (USD): 0 until the visitor sets it; a local one costs nothing
  const spendId = 'judge-spend';
  const spend = el('input', { type: 'text', id: spendId, inputmode: 'decimal', value: judge.dailySpend || '0',
    'aria-describedby': 'judge-spent', onchange: (event) => setJudge({ dailySpend: event.target.value.trim() || '0' }) });
  card.append(el('div', { className: 'judge-grid' },
    el('label', { for: modelId, text: 'Model that judges' }), model,
    el('label', { for: mismatchId, text: 'When a call does not fit' }), mismatch,
    el('label', { for: spendId, text: 'A paid judge may spend per day (USD)' }), spend));
  card.append(el('p', { id: 'judge-spent', className: 'judge-spent',
    text: judge.paid ? 'Spent today by the judge: ' + (judge.spentToday || '0') + ' USD. Past the spend, each text call asks you.'
      : 'A judge on this computer costs nothing and is not limited; a paid one stops at this spend and each text call asks you.' }));
  // the judge model the measurements favour, with its figures (byoa_skills/judge/recommended.py)
  if (judge.recommended) card.append(el('p', { className: 'judge-recommended', text: judge.recommended.sentence }));
  box.append(card);
}

async function setJudge(change) {
  const { body } = await api('judge', { method: 'POST', body: change });
  say(body.ok ? 'Purpose judge saved.' : 'Not saved: ' + problemText(body));
  loadJudge();
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

// An entry's outcome, with what the purpose judge decided of the call (its code) and, for a
// request that asked for more than the site holds, what was more.
function outcomeCell(entry) {
  const box = el('span', { className: 'outcome-cell' }, describedCode(entry.outcome));
  if (entry.judge) box.append(el('span', { className: 'judged' }, ' Judge: ', describedCode(entry.judge)));
  if (entry.outcome === 'asks-for-more' && Array.isArray(entry.codes) && entry.codes.length) {
    box.append(el('span', { className: 'detail', text: ' (more: ' + entry.codes.join(', ') + ')' }));
  }
  return box;
}

function activityRow(entry, fresh) {
  let measured = '';
  if (entry.clipSeconds !== undefined) measured = entry.clipSeconds + ' s';
  else if (entry.textChars !== undefined) measured = entry.textChars + ' chars';
  const cell = (value) => (value instanceof Node ? el('td', {}, value)
    : el('td', { text: value === undefined || value === null || value === '' ? '-' : value }));
  return el('tr', { className: fresh ? 'new' : '' },
    ...[timeEl(entry.time), entry.kind, entry.origin, entry.skill, entry.decision,
      entry.outcome ? outcomeCell(entry) : '', measured,
      entry.latencyMs !== undefined ? entry.latencyMs + ' ms' : '', entry.cost, grantIdEl(entry.grant)].map(cell));
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
    ['Model', speech.model], ['Device', speech.device], ['Decoder', speech.backend],
    ['Encoder', speech.encoder ? speech.encoder
      + (speech.encoderPrecision ? ', ' + speech.encoderPrecision : '')
      + (speech.encoderReason ? ' (' + speech.encoderReason + ')' : '') : ''],
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
      el('td', {}, source.up ? String(source.models) : sourceProblem(source.problem))));
  }
  const head = el('tr', {}, ...['Source', 'Kind', 'State', 'Models or problem'].map((name) => el('th', { scope: 'col', text: name })));
  box.append(el('h3', { text: 'Text sources' }),
    scrolling(el('table', {}, el('caption', { text: 'Text sources' }), el('thead', {}, head), rows), 'Text sources'));
}

// A text source's problem, ``code: what happened``, with the code's sentence.
function sourceProblem(problem) {
  const parts = /^([a-z0-9-]+): (.*)$/s.exec(problem || '');
  if (!parts) return el('span', { text: problem || '-' });
  return describedCode(parts[1], parts[2]);
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
      el('td', { text: pairing.mode }), el('td', {}, timeEl(pairing.paired_at)),
      el('td', {}, el('button', { type: 'button', className: 'danger', text: 'Revoke',
        'aria-label': 'Revoke ' + pairing.platform, onclick: () => revokePairing(pairing.platform) }))));
  }
  const head = el('tr', {}, ...['Platform', 'Scope', 'Mode', 'Paired', 'Action'].map((name) => el('th', { scope: 'col', text: name })));
  box.append(scrolling(el('table', {}, el('caption', { text: 'Paired platforms' }), el('thead', {}, head), rows),
    'Paired platforms'));
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

// The banner's content (nodes), or null when the store is well and nothing waits.
function storeBanner(store) {
  if (!store || store.ok) return null;
  const parts = [];
  if (store.code) {
    const message = String(store.message || '');
    parts.push(describedCode(store.code, message && !/[.!?]$/.test(message) ? message + '.' : message));
    if (store.code !== 'store-full') parts.push(' Every site is refused until it is fixed; your own calls work.');
  }
  const waiting = store.pendingChanges || 0;
  if (waiting) {
    parts.push(' ' + waiting + (waiting === 1 ? ' change' : ' changes') + ' to your sites (pause, block) '
      + (waiting === 1 ? 'is' : 'are') + ' in force now but not yet written: '
      + (waiting === 1 ? 'it is' : 'they are') + ' written as soon as the store takes '
      + (waiting === 1 ? 'it' : 'them') + '.');
  }
  return parts.length ? parts : null;
}

let storeShown = '';

async function refreshStoreBanner() {
  try {
    if (signedIn) {
      const { status, body } = await api('engine?only=store');
      const banner = document.getElementById('store-banner');
      const parts = status === 200 ? storeBanner(body.store) : null;
      const key = parts ? JSON.stringify(body.store) : '';
      if (key !== storeShown) {  // the alert is told again only when it changes
        storeShown = key;
        banner.replaceChildren(...(parts || []));
        banner.hidden = !parts;
      }
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
setInterval(refreshTimes, TIME_REFRESH_MS);
start();
