// window.byoa, in the page's own world at document_start (byoa:ready follows once the document
// is parsed): request, call and release, each a
// message to the extension's bridge on this window, answered on the same window. The page is
// trusted with nothing: the bridge reads the click itself and the browser names the origin.
'use strict';

(() => {
  if (Object.prototype.hasOwnProperty.call(window, 'byoa')) return;
  const TO_WALLET = 'byoa:page';
  const FROM_WALLET = 'byoa:wallet';
  const waiting = new Map();
  let next = 1;

  window.addEventListener('message', (event) => {
    const data = event.data;
    if (event.source !== window || !data || data.channel !== FROM_WALLET) return;
    const done = waiting.get(data.id);
    if (!done) return;
    waiting.delete(data.id);
    done(data.answer);
  });

  function ask(type, body) {
    const id = next++;
    return new Promise((resolve) => {
      waiting.set(id, resolve);
      try {
        window.postMessage({ channel: TO_WALLET, id, type, ...body }, window.location.origin);
      } catch {
        waiting.delete(id);                           // something that cannot be cloned
        resolve(null);
      }
    });
  }

  // The grant as the wallet states it (models by code only), frozen; null when there is none.
  function frozenGrant(grant) {
    if (!grant || typeof grant.grantId !== 'string') return null;
    const limits = {};
    if (grant.limits && typeof grant.limits === 'object') {
      for (const [name, value] of Object.entries(grant.limits)) {
        if (typeof value === 'number') limits[name] = value;
      }
    }
    const shown = {
      grantId: grant.grantId,
      skills: Object.freeze(Array.isArray(grant.skills) ? grant.skills.map(String) : []),
      expiresAt: String(grant.expiresAt || ''),
      limits: Object.freeze(limits),
      models: Object.freeze(Array.isArray(grant.models) ? grant.models.map(String) : []),
    };
    if (grant.paused === true) shown.paused = true;
    return Object.freeze(shown);
  }

  // The grant { grantId, skills, expiresAt, limits, models }, or null for every "no".
  async function request(manifest) {
    const answer = await ask('request', { manifest });
    return frozenGrant(answer && answer.grant);
  }

  // { ok: true, output, grant } or { ok: false }: ok false is the only "no"; grant is the
  // grant as it is now (the visitor may have changed it), also on a "no" while it lives.
  async function call(grantId, skill, input, params) {
    const answer = await ask('call', { grantId, skill, input, params });
    const grant = frozenGrant(answer && answer.grant);
    if (answer && answer.ok === true && answer.output && typeof answer.output === 'object') {
      return { ok: true, output: answer.output, grant };
    }
    return grant ? { ok: false, grant } : { ok: false };
  }

  async function release(grantId) {
    await ask('release', { grantId });
  }

  Object.defineProperty(window, 'byoa', {
    value: Object.freeze({ request, call, release }),
    writable: false,
    configurable: false,
    enumerable: true,
  });
  // Announced once the page's own scripts have had the chance to listen for it.
  const ready = () => window.dispatchEvent(new Event('byoa:ready'));
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', ready, { once: true });
  } else {
    ready();
  }
})();
