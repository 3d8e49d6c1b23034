// The geography game: the visitor's agent wallet through the extension's window.byoa when it
// is there, else through the direct link; a 3-second clip from the microphone, and the
// wallet's transcription shown as text. Answers are user input: they are shown with
// textContent only, and nothing is scored on them.
'use strict';

const RECORD_SECONDS = 3;
const RATE = 16000;
const CAPITALS = {
  argentina: 'Buenos Aires', australia: 'Canberra', austria: 'Vienna', brazil: 'Brasília',
  canada: 'Ottawa', chile: 'Santiago', china: 'Beijing', czechia: 'Prague',
  'czech republic': 'Prague', egypt: 'Cairo', finland: 'Helsinki', france: 'Paris',
  germany: 'Berlin', greece: 'Athens', hungary: 'Budapest', india: 'New Delhi',
  italy: 'Rome', japan: 'Tokyo', kenya: 'Nairobi', mexico: 'Mexico City',
  netherlands: 'Amsterdam', norway: 'Oslo', peru: 'Lima', poland: 'Warsaw',
  portugal: 'Lisbon', russia: 'Moscow', slovakia: 'Bratislava', spain: 'Madrid',
  sweden: 'Stockholm', ukraine: 'Kyiv', 'united kingdom': 'London',
  'united states': 'Washington, D.C.', россия: 'Москва', франция: 'Париж',
  германия: 'Берлин', словакия: 'Братислава', slovensko: 'Bratislava',
  francúzsko: 'Paríž', nemecko: 'Berlín', rakúsko: 'Viedeň',
};

// The manifest the page asks window.byoa for (the same as the link carries).
const MANIFEST = {
  byoa: '0.1-draft',
  purpose: {
    summary: 'Family geography game: recognise country names spoken aloud',
    limits: { maxClipSeconds: 15, maxCallsPerMinute: 40 },
  },
  skills: {
    'audio.transcribe': { languages: ['en', 'ru', 'sk'], required: true },
  },
  privacy: 'personal-voice',
  expectedCost: { perSession: '0.05 USD' },
};

const $ = (selector) => document.querySelector(selector);
let session = null;                                 // the direct link's session code
let grant = null;                                   // the extension's grant

// A helper: microphone samples to the WAV the skill takes (from the site guide, verbatim)
// Float32 samples at 16 kHz (from an AudioWorklet, or resampled with an OfflineAudioContext)
// -> base64 of a 16-bit PCM mono WAV, the input of audio.transcribe
function wavBase64(samples) {
  const v = new DataView(new ArrayBuffer(44 + samples.length * 2));
  const tag = (at, text) => [...text].forEach((ch, i) => v.setUint8(at + i, ch.charCodeAt(0)));
  tag(0, 'RIFF'); v.setUint32(4, 36 + samples.length * 2, true); tag(8, 'WAVE');
  tag(12, 'fmt '); v.setUint32(16, 16, true); v.setUint16(20, 1, true); v.setUint16(22, 1, true);
  v.setUint32(24, 16000, true); v.setUint32(28, 32000, true); v.setUint16(32, 2, true); v.setUint16(34, 16, true);
  tag(36, 'data'); v.setUint32(40, samples.length * 2, true);
  samples.forEach((x, i) => v.setInt16(44 + i * 2, Math.max(-1, Math.min(1, x)) * 0x7fff, true));
  let bin = '';
  new Uint8Array(v.buffer).forEach((b) => { bin += String.fromCharCode(b); });
  return btoa(bin);
}

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
  setStatus('Your AI is listening for this game.');
  $('#play').hidden = false;
}

function walletDidNotConnect() {
  $('#wallet-link').disabled = false;
  setStatus('Your AI is not available. Type the country instead.');
}

// Float32 samples from the microphone for `seconds`, at 16 kHz.
async function recordClip(context, seconds) {
  const stream = await navigator.mediaDevices.getUserMedia({
    audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false, autoGainControl: false },
  });
  try {
    await context.resume();
    await context.audioWorklet.addModule('/static/recorder.js');
    const source = context.createMediaStreamSource(stream);
    const recorder = new AudioWorkletNode(context, 'clip-recorder');
    const blocks = [];
    recorder.port.onmessage = (event) => blocks.push(event.data);
    source.connect(recorder);
    recorder.connect(context.destination);          // it writes silence; connected, it keeps running
    await new Promise((r) => setTimeout(r, seconds * 1000));
    source.disconnect(); recorder.disconnect();
    const samples = new Float32Array(blocks.reduce((n, b) => n + b.length, 0));
    let at = 0;
    for (const block of blocks) { samples.set(block, at); at += block.length; }
    return context.sampleRate === RATE ? samples : resample(samples, context.sampleRate);
  } finally {
    stream.getTracks().forEach((track) => track.stop());
  }
}

// The same sound at 16 kHz, rendered by an OfflineAudioContext.
async function resample(samples, rate) {
  const offline = new OfflineAudioContext(1, Math.ceil(samples.length * RATE / rate), RATE);
  const buffer = offline.createBuffer(1, samples.length, rate);
  buffer.copyToChannel(samples, 0);
  const source = offline.createBufferSource();
  source.buffer = buffer;
  source.connect(offline.destination);
  source.start();
  return (await offline.startRendering()).getChannelData(0);
}

function newContext() {
  try { return new AudioContext({ sampleRate: RATE }); } catch { return new AudioContext(); }
}

// The clip to the visitor's wallet: through window.byoa with a grant, else through the site's
// server over the direct link. The text, or null.
async function transcribe(wav64, language) {
  if (grant) {
    const r = await window.byoa.call(grant.grantId, 'audio.transcribe',
      { audio: { mime: 'audio/wav', base64: wav64 } }, { language });
    return r.ok && typeof r.output.text === 'string' ? r.output.text : null;
  }
  const bytes = Uint8Array.from(atob(wav64), (ch) => ch.charCodeAt(0));
  const answer = await fetch('/byoa/transcribe?session=' + encodeURIComponent(session)
    + '&language=' + encodeURIComponent(language),
  { method: 'POST', headers: { 'content-type': 'audio/wav' }, body: bytes });
  if (!answer.ok) return null;
  const { text } = await answer.json();
  return typeof text === 'string' ? text : null;
}

$('#say').addEventListener('click', async () => {
  const button = $('#say');
  button.disabled = true;
  const context = newContext();                     // made in the click, so it may start
  try {
    $('#listening').textContent = 'Listening… say a country now.';
    const samples = await recordClip(context, RECORD_SECONDS);
    $('#listening').textContent = 'Asking your AI…';
    const text = await transcribe(wavBase64(samples), $('#language').value);
    if (text === null) {
      $('#listening').textContent = 'No answer from your AI this time. Type the country instead.';
    } else {
      $('#listening').textContent = '';
      showAnswer(text);
    }
  } catch {
    $('#listening').textContent = 'The microphone is not available. Type the country instead.';
  } finally {
    context.close();
    button.disabled = false;
  }
});

$('#typed-form').addEventListener('submit', (event) => {
  event.preventDefault();
  showAnswer($('#typed').value);
});

// User input: shown as text, never as HTML.
function showAnswer(text) {
  $('#heard').textContent = text;
  const name = text.toLowerCase().replace(/[^\p{L}\p{N} ]+/gu, ' ').replace(/\s+/g, ' ').trim();
  const capital = Object.prototype.hasOwnProperty.call(CAPITALS, name) ? CAPITALS[name] : null;
  $('#fact').textContent = capital
    ? 'Its capital is ' + capital + '.'
    : 'That is not a country this game knows yet. Try another one!';
}
