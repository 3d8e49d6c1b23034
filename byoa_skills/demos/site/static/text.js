// The text mode: one question for two models from different makers, through the visitor's
// agent wallet (the extension's window.byoa when it is there, else the direct link). Each
// answer is shown beside the code of the model that gave it (m1, m2…), "no answer" where the
// wallet said no; the grant is shown as the wallet last told it. Answers are user input: they
// are shown with textContent only.
'use strict';

// The manifest the page asks window.byoa for (the same as the link carries), as JSON.
const MANIFEST = {
  "byoa": "0.1-draft",
  "purpose": {
    "summary": "Ask two models from different makers one question and compare the answers",
    "limits": {
      "maxTextChars": 2000,
      "maxAnswerTokens": 256,
      "maxCallsPerMinute": 20
    }
  },
  "skills": {
    "text.generate": {
      "required": true,
      "models": {
        "count": 2,
        "required": 2,
        "differentCompanies": true,
        "why": "Each question goes to both models; the page shows each answer beside the code of the model that gave it",
        "prefer": [
          "llama",
          "qwen"
        ]
      }
    }
  },
  "privacy": "personal",
  "expectedCost": {
    "perSession": "0.05 USD"
  }
};
const POLL_MS = 2000;

const $ = (selector) => document.querySelector(selector);
let session = null;                                 // the direct link's session code
let grant = null;                                   // the extension's grant
let polling = null;

function setStatus(text) { $('#status').textContent = text; }

// window.byoa first (asked in the click, as the wallet wants), the link when it is missing.
$('#use-ai').addEventListener('click', async () => {
  if (!window.byoa) return useLink();
  $('#use-ai').disabled = true;
  setStatus('Waiting for your agent wallet…');
  try {
    grant = await window.byoa.request(MANIFEST);
  } catch {
    grant = null;
  }
  $('#use-ai').disabled = false;
  if (!grant) return walletDidNotConnect();         // declined, blocked, no model, no wallet: alike
  walletConnected();
  showGrant('connected', grant);
});

window.addEventListener('pagehide', () => { if (grant) window.byoa.release(grant.grantId); });

// Without the extension: a one-time code, the link, then wait for the wallet to come.
$('#wallet-link').addEventListener('click', useLink);

async function useLink() {
  $('#wallet-link').disabled = true;
  try {
    const answer = await fetch('/byoa/code', { method: 'POST' });
    if (!answer.ok) return walletDidNotConnect();
    const { session: code, link } = await answer.json();
    location.href = link;                           // still in the click: a browser starts an app only after one
    const a = $('#open-wallet');
    a.href = link; a.hidden = false;                // shown too, in case the browser's question was closed
    setStatus('Waiting for your agent wallet…');

    const until = Date.now() + 90_000;              // the wallet asks the visitor first: wait, then give up quietly
    while (Date.now() < until) {
      await new Promise((r) => setTimeout(r, 1000));
      const { state } = await (await fetch('/byoa/wait?session=' + encodeURIComponent(code))).json();
      if (state === 'connected') return walletConnected(code);
      if (state === 'expired') break;
    }
    walletDidNotConnect();                          // no other detail: a decline looks like no wallet at all
  } catch {
    walletDidNotConnect();
  }
}

function walletConnected(code = null) {
  session = code;
  $('#open-wallet').hidden = true;
  setStatus('Your AI is ready: ask it something.');
  if (session !== null) {
    clearInterval(polling);
    polling = setInterval(readGrant, POLL_MS);
    readGrant();
  }
}

function walletDidNotConnect() {
  $('#wallet-link').disabled = false;
  setStatus('Your AI is not available. This site can still count your words.');
}

// The grant as the wallet last told the site: after a change the wallet sends a grant frame,
// after the end a bye.
async function readGrant() {
  try {
    const answer = await fetch('/byoa/grant?session=' + encodeURIComponent(session));
    if (!answer.ok) return;
    const view = await answer.json();
    showGrant(view.state, view.grant);
  } catch {
    // the site is away for a moment: the next poll tries again
  }
}

const STATES = {
  connected: 'connected',
  paused: 'paused in your wallet: this site sends nothing until you resume',
  away: 'away (your wallet may come back)',
  ended: 'ended: your wallet closed this session',
  none: 'not connected',
};

function showGrant(state, shown) {
  const paused = state === 'connected' && shown && shown.paused === true;
  $('#grant').hidden = false;
  $('#grant-state').textContent = STATES[paused ? 'paused' : state] || String(state);
  const models = shown && Array.isArray(shown.models) ? shown.models : [];
  $('#grant-models').textContent = models.length ? models.join(', ') : 'none named';
  $('#grant-expires').textContent = shown && shown.expiresAt ? String(shown.expiresAt) : '';
  const list = $('#grant-limits');
  list.replaceChildren();
  const limits = shown && shown.limits && typeof shown.limits === 'object' ? shown.limits : {};
  for (const [name, value] of Object.entries(limits)) {
    const item = document.createElement('li');
    item.textContent = name + ': ' + String(value);
    list.append(item);
  }
  if (state === 'ended') {
    clearInterval(polling);
    polling = null;
    session = null;
    grant = null;
    $('#wallet-link').disabled = false;
    setStatus('Your wallet ended this session. Connect again to ask your AI.');
  }
}

// The question to each model code: through window.byoa with a grant, else through the site's
// server over the direct link. A list of { model, text, pieces }, text null for no answer.
async function askModels(question, maxTokens, stream) {
  if (grant) {
    const codes = Array.isArray(grant.models) && grant.models.length ? grant.models : [null];
    const input = { messages: [{ role: 'user', content: question }] };
    return Promise.all(codes.map(async (model) => {
      const params = model === null ? { maxTokens } : { model, maxTokens };
      let r = { ok: false };
      try { r = await window.byoa.call(grant.grantId, 'text.generate', input, params); } catch { /* no answer */ }
      if ('grant' in r) {
        if (r.grant) { grant = { ...grant, ...r.grant }; showGrant('connected', grant); } else { showGrant('ended', null); }
      }
      return { model, text: r.ok && typeof r.output.text === 'string' ? r.output.text : null, pieces: 0 };
    }));
  }
  if (session === null) return [];
  const answer = await fetch('/byoa/ask?session=' + encodeURIComponent(session), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ question, maxTokens, stream }),
  });
  if (!answer.ok) return [];
  const { answers } = await answer.json();
  return Array.isArray(answers) ? answers : [];
}

$('#ask-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const question = $('#question').value;
  const maxTokens = Number.parseInt($('#max-tokens').value, 10) || 64;
  showCount(question);
  const button = $('#ask');
  button.disabled = true;
  $('#asking').textContent = 'Asking your AI…';
  try {
    const answers = await askModels(question, maxTokens, $('#stream').checked);
    $('#asking').textContent = answers.length ? '' : 'No answer from your AI this time.';
    showAnswers(answers);
  } catch {
    $('#asking').textContent = 'No answer from your AI this time.';
    showAnswers([]);
  } finally {
    button.disabled = false;
    if (session !== null) readGrant();
  }
});

// User input: each answer is shown as text, never as HTML, beside the code that gave it.
function showAnswers(answers) {
  const box = $('#answers');
  box.replaceChildren();
  for (const { model, text, pieces } of answers) {
    const item = document.createElement('article');
    item.className = 'answer';
    item.dataset.model = model === null ? '' : String(model);
    const code = document.createElement('h3');
    code.textContent = model === null ? 'your model' : String(model);
    const body = document.createElement('p');
    body.className = typeof text === 'string' ? 'text' : 'text none';
    body.textContent = typeof text === 'string' ? text : 'no answer';
    item.append(code, body);
    if (pieces > 0) {
      const note = document.createElement('p');
      note.className = 'pieces';
      note.textContent = 'streamed in ' + pieces + ' pieces';
      item.append(note);
    }
    box.append(item);
  }
}

// The site's own way, with or without the visitor's AI.
function showCount(question) {
  const words = question.trim() ? question.trim().split(/\s+/u).length : 0;
  $('#counted').textContent = words + ' words, ' + [...question].length + ' characters';
}
