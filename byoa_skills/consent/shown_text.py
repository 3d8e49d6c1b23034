"""Text a site wrote, made safe to show the visitor, and the judging of a site's host name.

A manifest's text reaches the wallet page as text, never as markup; but text alone can
still deceive. A bidi control (U+202E) makes ``"\\u202eSEY kcilc"`` read "click YES"; a
zero-width character hides inside a word. :func:`shown` writes every such character as a
visible marker, ``⟨U+202E⟩``, so it is seen and never applied. A host name can deceive too:
``xn--pypal-4ve.com`` reads "paypal.com" with a Cyrillic a (U+0430) in place of the Latin
one. :func:`judge_host` says which form of a host heads a consent, and when to warn.

The script of a character is read from its Unicode name (``unicodedata`` has no script
property): "CYRILLIC SMALL LETTER A" is Cyrillic, "CJK UNIFIED IDEOGRAPH-4F8B" is Han. This is
an approximation of the Script property that errs one way only: a character it cannot place
counts as a script of its own, which can make a name look mixed, never less mixed.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

#: How a hidden character is written instead: its code point between angle brackets.
MARKER = "⟨U+{:04X}⟩"
#: The characters kept as they are although they are controls: a line break and a tab.
KEPT_CONTROLS = frozenset("\n\t")
#: Unicode's default-ignorable code points (DerivedCoreProperties.txt) that are not of a
#: hidden category already: fillers and variation selectors that show nothing.
_IGNORABLE_RANGES = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xE0100, 0xE01EF),
)
#: The general categories never shown as themselves: controls (Cc), format characters (Cf:
#: the bidi controls, zero-width characters, U+FEFF, tags), surrogates, private use,
#: unassigned, and the line and paragraph separators (which end a bidi paragraph).
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})

#: A consent's warning for a host whose letters mix scripts (or that are in no one script).
MIXED_WARNING = "This name mixes alphabets; it may imitate another site."
#: A consent's warning for a host whose Unicode form holds characters that cannot be seen.
HIDDEN_WARNING = "This name holds characters that cannot be seen; it may imitate another site."
#: A consent's warning for a host with an ``xn--`` label that is not valid punycode.
UNREADABLE_WARNING = "This name's international form cannot be read; it is shown as written."

#: Characters of no script: they go with any (UTS #39's Common, as far as a host holds them).
COMMON = "Common"
#: What a character gets when its script cannot be told: it mixes with every script.
UNKNOWN = "Unknown"
#: The script combinations UTS #39 allows at its "highly restrictive" level besides a single
#: script: Latin with the scripts written together in Japanese, Chinese and Korean.
ALLOWED_COMBINATIONS = (
    frozenset({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "HAN", "BOPOMOFO"}),
    frozenset({"LATIN", "HAN", "HANGUL"}),
)
#: Name prefixes whose script is not their first word.
_NAME_PREFIXES = (
    ("CJK ", "HAN"),
    ("IDEOGRAPHIC ", "HAN"),
    ("KATAKANA-HIRAGANA ", "KATAKANA"),
    ("HALFWIDTH KATAKANA ", "KATAKANA"),
    ("HALFWIDTH HANGUL ", "HANGUL"),
    ("FULLWIDTH LATIN ", "LATIN"),
    ("ARABIC-INDIC ", "ARABIC"),
    ("EXTENDED ARABIC-INDIC ", "ARABIC"),
    ("MODIFIER LETTER ", UNKNOWN),
)
#: First words that several scripts' names share: the script is the first two words.
_TWO_WORD_SCRIPTS = frozenset(
    {
        "OLD",
        "NEW",
        "TAI",
        "INSCRIPTIONAL",
        "MEROITIC",
        "LINEAR",
        "CANADIAN",
        "MEETEI",
        "SYLOTI",
        "KAYAH",
        "OL",
        "SORA",
        "MASARAM",
        "GUNJALA",
        "HANIFI",
        "ZANABAZAR",
        "PAHAWH",
        "NYIAKENG",
        "MENDE",
        "EGYPTIAN",
        "ANATOLIAN",
        "CAUCASIAN",
        "PSALTER",
        "IMPERIAL",
        "WARANG",
        "BASSA",
        "DIVES",
        "KHITAN",
        "PAU",
    }
)


# Text


def hidden(char: str) -> bool:
    """Whether ``char`` is never shown as itself: a control, a format character (every bidi
    control, every zero-width character), a surrogate, private use, unassigned, a line or
    paragraph separator, or another default-ignorable code point; not a line break or tab."""
    if char in KEPT_CONTROLS:
        return False
    if unicodedata.category(char) in HIDDEN_CATEGORIES:
        return True
    point = ord(char)
    return any(low <= point <= high for low, high in _IGNORABLE_RANGES)


def shown(text: str) -> str:
    """``text`` with every :func:`hidden` character written as its marker (``⟨U+202E⟩``):
    what the visitor reads is what the text holds, in the order it holds it."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(MARKER.format(ord(char)) if hidden(char) else char for char in text)


def shown_value(value: object) -> object:
    """A manifest's value as shown: a string through :func:`shown`, a number as it is."""
    return shown(value) if isinstance(value, str) else value


# Host names


@dataclass(frozen=True)
class HostJudgement:
    """Which form of a host name heads a consent, the other form shown beside it, and the
    warning (None when there is none)."""

    #: The host as the consent is headed.
    heading: str
    #: The host with each ``xn--`` label decoded, through :func:`shown`.
    unicode: str
    warning: str | None


def judge_host(host: str) -> HostJudgement:
    """How ``host`` (ASCII, as an origin writes it) is shown. A plain ASCII name is headed as
    it is. An international name is headed in Unicode when its letters are in one script, or
    in a combination UTS #39 allows (Latin with Han, kana, Bopomofo or Hangul), the whole name
    counted together (so a Cyrillic name under ``.com`` mixes Cyrillic with Latin). Any other
    international name is headed by its ``xn--`` form, with a warning; so is one whose Unicode
    form holds a hidden character or cannot be decoded."""
    if shown(host) != host:  # an origin never holds one; a host that does is not trusted
        return HostJudgement(heading=shown(host), unicode=shown(host), warning=HIDDEN_WARNING)
    decoded = decode_host(host)
    if decoded is None:
        return HostJudgement(heading=host, unicode=host, warning=UNREADABLE_WARNING)
    if decoded == host:
        return HostJudgement(heading=host, unicode=host, warning=None)
    unicode = shown(decoded)
    if unicode != decoded:
        return HostJudgement(heading=host, unicode=unicode, warning=HIDDEN_WARNING)
    if not one_script(decoded.replace(".", "")):
        return HostJudgement(heading=host, unicode=unicode, warning=MIXED_WARNING)
    return HostJudgement(heading=unicode, unicode=unicode, warning=None)


def decode_host(host: str) -> str | None:
    """``host`` with each ``xn--`` label decoded (IDNA, which checks that the label encodes
    back to itself); ``host`` itself when it has none; None when one cannot be decoded."""
    if "xn--" not in host:
        return host
    try:
        return ".".join(
            label.encode("ascii").decode("idna") if label.startswith("xn--") else label
            for label in host.split(".")
        )
    except UnicodeError:
        return None


def one_script(text: str) -> bool:
    """Whether the letters of ``text`` are in one script (characters of no script, such as
    ASCII digits and ``-``, go with any), or in one of :data:`ALLOWED_COMBINATIONS`."""
    found = {script_of(char) for char in text} - {COMMON}
    if UNKNOWN in found:
        return False
    return len(found) <= 1 or any(found <= allowed for allowed in ALLOWED_COMBINATIONS)


def script_of(char: str) -> str:
    """The script of ``char`` as its Unicode name tells it (``LATIN``, ``CYRILLIC``, ``HAN``,
    ``HIRAGANA``...); :data:`COMMON` for ASCII digits, ``-`` and combining marks; :data:`UNKNOWN`
    for every other character that is not a letter, a mark or a digit."""
    if char.isascii() and (char.isdigit() or char == "-"):
        return COMMON
    category = unicodedata.category(char)
    name = unicodedata.name(char, "")
    if category[0] == "M" and name.startswith("COMBINING "):
        return COMMON  # UTS #39's Inherited: a combining mark takes its base's script
    if not name or not (category[0] in "LM" or category == "Nd"):
        return UNKNOWN
    for prefix, script in _NAME_PREFIXES:
        if name.startswith(prefix):
            return script
    words = name.split(" ")
    if words[0] in _TWO_WORD_SCRIPTS and len(words) > 1:
        return f"{words[0]} {words[1]}"
    return words[0]
