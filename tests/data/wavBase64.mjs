// The site guide's "microphone samples to the WAV the skill takes" helper, verbatim,
// and a driver: reads a JSON array of float samples on stdin, prints wavBase64(samples).
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

let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (part) => { input += part; });
process.stdin.on('end', () => {
  const batches = JSON.parse(input);
  process.stdout.write(JSON.stringify(batches.map((samples) => wavBase64(Float32Array.from(samples)))));
});
