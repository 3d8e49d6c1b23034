// The service worker: one native port to the wallet's host, answers matched by id, and each
// grant bound to the document that got it and to that document's origin as the browser names
// it (sender.origin), never as the page says. A call is relayed only from the document holding
// the grant, with that origin, which the engine checks again; a document that goes away (its
// tab closes or navigates) releases its grants.
'use strict';

const HOST = 'org.bringyourownagent.wallet';
// What the page gets for each "no": every reason looks the same.
const NO = { request: { grant: null }, call: { ok: false }, release: { ok: false } };

let native = null;
let nextId = 1;
const waiting = new Map();   // native message id -> resolve
const grants = new Map();    // grantId -> { origin, port }
const gone = new WeakSet();  // the ports of documents that went away

function host() {
  if (native) return native;
  native = chrome.runtime.connectNative(HOST);
  native.onMessage.addListener((message) => {
    const done = message && waiting.get(message.id);
    if (!done) return;
    waiting.delete(message.id);
    done(message);
  });
  native.onDisconnect.addListener(() => {
    void chrome.runtime.lastError;                   // read, so it is not reported
    native = null;
    for (const done of waiting.values()) done(null);
    waiting.clear();
  });
  return native;
}

// The host's answer to one message, or null when there is no host (or it went away).
function relay(message) {
  return new Promise((resolve) => {
    const id = nextId++;
    waiting.set(id, resolve);
    try {
      host().postMessage({ ...message, id });
    } catch {
      waiting.delete(id);
      resolve(null);
    }
  });
}

function release(grantId) {
  const bound = grants.get(grantId);
  if (!bound) return Promise.resolve(null);
  grants.delete(grantId);
  return relay({ type: 'release', origin: bound.origin, grantId });
}

// The grant's fields a page may see (models by code only, as the engine states them).
function shownGrant(grant) {
  const shown = { grantId: grant.grantId, skills: grant.skills, expiresAt: grant.expiresAt,
    limits: grant.limits, models: grant.models };
  if (grant.paused === true) shown.paused = true;
  return shown;
}

async function answer(port, origin, message) {
  if (message.type === 'request') {
    const got = await relay({ type: 'request', origin, manifest: message.manifest,
      userActivation: message.userActivation === true });
    const grant = got && got.grant;
    if (!grant || typeof grant.grantId !== 'string') return NO.request;
    grants.set(grant.grantId, { origin, port });
    if (gone.has(port)) {                          // it left while the visitor decided
      void release(grant.grantId);
      return NO.request;
    }
    return { grant: shownGrant(grant) };
  }
  const bound = grants.get(message.grantId);
  if (!bound || bound.port !== port || bound.origin !== origin) return NO[message.type];
  if (message.type === 'release') {
    const got = await release(message.grantId);
    return { ok: Boolean(got && got.ok === true) };
  }
  const got = await relay({ type: 'call', origin, grantId: message.grantId, skill: message.skill,
    input: message.input, params: message.params });
  const grant = got && got.grant && typeof got.grant.grantId === 'string'
    ? shownGrant(got.grant) : null;
  if (got && got.ok === true && got.output && typeof got.output === 'object') {
    return { ok: true, output: got.output, grant };
  }
  if (grant) return { ok: false, grant };
  return NO.call;
}

chrome.runtime.onConnect.addListener((port) => {
  const sender = port.sender || {};
  const origin = sender.origin;
  if (port.name !== 'byoa-page' || sender.id !== chrome.runtime.id || !sender.tab
      || typeof origin !== 'string' || !/^https?:\/\//.test(origin)) {
    port.disconnect();
    return;
  }
  port.onMessage.addListener(async (message) => {
    if (!message || !Number.isSafeInteger(message.id) || !(message.type in NO)) return;
    const reply = await answer(port, origin, message);
    try {
      port.postMessage({ id: message.id, answer: reply });
    } catch {
      // the document went away while its answer was on the way
    }
  });
  port.onDisconnect.addListener(() => {
    gone.add(port);
    for (const [grantId, bound] of grants) {
      if (bound.port === port) void release(grantId);
    }
  });
});
