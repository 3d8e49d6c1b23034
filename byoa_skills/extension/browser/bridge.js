// The bridge, in the extension's isolated world: it takes window.byoa's messages from this
// window only, keeps only the fields it knows, adds whether the visitor has just clicked
// (read here, where the page cannot fake it), and hands them to the service worker over one
// port per document. The port closing (the tab closes or navigates) releases the document's
// grants.
'use strict';

(() => {
  const TO_WALLET = 'byoa:page';
  const FROM_WALLET = 'byoa:wallet';
  const TYPES = new Set(['request', 'call', 'release']);
  let port = null;

  function connect() {
    if (port) return port;
    port = chrome.runtime.connect({ name: 'byoa-page' });
    port.onMessage.addListener((message) => {
      if (!message || typeof message.id !== 'number') return;
      window.postMessage({ channel: FROM_WALLET, id: message.id, answer: message.answer },
        window.location.origin);
    });
    port.onDisconnect.addListener(() => { port = null; });
    return port;
  }

  window.addEventListener('message', (event) => {
    const data = event.data;
    if (event.source !== window || !data || data.channel !== TO_WALLET) return;
    if (!Number.isSafeInteger(data.id) || !TYPES.has(data.type)) return;
    const message = { id: data.id, type: data.type };
    if (data.type === 'request') {
      message.manifest = data.manifest;
      message.userActivation = navigator.userActivation.isActive === true;
    } else {
      message.grantId = data.grantId;
    }
    if (data.type === 'call') {
      message.skill = data.skill;
      message.input = data.input;
      message.params = data.params;
    }
    try {
      connect().postMessage(message);
    } catch {
      port = null;                                    // the extension was reloaded: no answer
      window.postMessage({ channel: FROM_WALLET, id: data.id, answer: null },
        window.location.origin);
    }
  });
})();
