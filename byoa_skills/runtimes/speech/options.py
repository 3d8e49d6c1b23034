"""The decoding options for short voice clips, set in one place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal


@dataclass(frozen=True)
class DecodeOptions:
    """How a Whisper backend decodes a clip of at most 15 s. docs/runtime.md gives the reasons
    and the figures behind each default.

    Decoding is always at temperature 0 with no fallback to sampling, so the same clip always
    gives the same text, and an unintelligible clip costs one decode, not six.
    """

    #: Fixed: no sampling, no temperature fallback.
    TEMPERATURE: ClassVar[float] = 0.0
    #: Tokens a short answer may have beyond :attr:`max_tokens_per_second` of its speech.
    TOKEN_SLACK: ClassVar[int] = 8

    #: Beams searched; 1 is greedy decoding. 5 costs little more than 1 on these clips and is
    #: more accurate on long ones.
    beam_size: int = 5
    #: Beam search patience factor (1.0 stops at ``beam_size`` finished hypotheses).
    patience: float = 1.0
    #: Feed the text of the previous 30 s window as a prompt (a clip has only one window).
    condition_on_previous_text: bool = False
    #: Decode text tokens only, no timestamp tokens.
    without_timestamps: bool = True
    #: Cut non-speech with the Silero VAD before decoding; a clip with no speech left is
    #: answered ``""`` without running the model.
    vad_filter: bool = True
    #: Silero speech probability above which a 32 ms frame counts as speech.
    vad_threshold: float = 0.5
    #: Silence shorter than this does not end a speech chunk, in milliseconds.
    vad_min_silence_ms: int = 2000
    #: Padding kept around each speech chunk, in milliseconds.
    vad_speech_pad_ms: int = 400
    #: A window whose no-speech probability is above this, and whose average token
    #: log-probability is below ``log_prob_threshold``, is answered with no text.
    no_speech_threshold: float | None = 0.6
    log_prob_threshold: float | None = -1.0
    #: A short-window answer whose text compresses more than this (it repeats itself), whose
    #: decode ran to ``max_new_tokens``, or whose average token log-probability is below
    #: ``log_prob_threshold`` is decoded again on the whole window (None: no ratio check).
    compression_ratio_threshold: float | None = 2.4
    #: Whether short-window answers are checked at all (off only to measure the window alone).
    short_window_guard: bool = True
    #: Most tokens decoded per 30 s window; bounds the time a runaway repetition can take.
    max_new_tokens: int | None = 224
    #: Encode only the window's first this many seconds when the audio fits in them (None:
    #: the whole 30 s window Whisper was trained on). docs/runtime.md has its accuracy cost.
    #: With :attr:`windows` it is the longest short window.
    encoder_seconds: float | None = None
    #: Shorter windows than ``encoder_seconds`` a clip may be encoded in, in seconds: each
    #: clip gets the shortest of them (or ``encoder_seconds``) that holds its speech plus
    #: :attr:`window_margin`, and the guard moves an answer that looks degenerate up to the
    #: next larger one, then to the whole window. Only used with ``encoder_seconds``.
    windows: tuple[float, ...] = ()
    #: Seconds a window must hold beyond the clip's speech.
    window_margin: float = 0.0
    #: Per language, the shortest window it may be given (a language whose words the short
    #: windows cost keeps a larger floor), as ``(code, seconds)`` pairs; the code ``"*"``
    #: gives the floor of every language not named.
    window_floors: tuple[tuple[str, float], ...] = ()
    #: Clips whose speech is at most this many seconds are decoded greedily (one beam) in
    #: the languages of :attr:`greedy_languages`; the rest with ``beam_size`` beams.
    greedy_up_to_seconds: float = 0.0
    #: The languages greedy decoding is used for (None: every language).
    greedy_languages: frozenset[str] | None = None
    #: A greedy answer whose average token log-probability is below this is decoded again
    #: with the beam, on the same encoder output (None: never).
    greedy_fallback_logprob: float | None = None
    #: A short-window answer whose average token log-probability is below this is decoded
    #: again on the next larger window (None: only ``log_prob_threshold`` counts). No answer
    #: of the real-speech set on a 5 or 10 s window was below -0.6; a synthetic voice's
    #: misheard one was (docs/runtime.md).
    short_window_logprob: float | None = None
    #: A short-window answer with more tokens than this many per second of speech (plus
    #: :data:`TOKEN_SLACK`) holds more than the audio can, and is decoded again on the next
    #: larger window (None: no such check).
    max_tokens_per_second: float | None = None

    def __post_init__(self) -> None:
        if self.beam_size < 1:
            raise ValueError(f"beam_size must be at least 1, got {self.beam_size}")
        if self.patience <= 0:
            raise ValueError(f"patience must be positive, got {self.patience}")
        if not 0.0 < self.vad_threshold < 1.0:
            raise ValueError(f"vad_threshold must be in (0, 1), got {self.vad_threshold}")
        if self.vad_min_silence_ms < 0 or self.vad_speech_pad_ms < 0:
            raise ValueError("VAD durations must not be negative")
        if self.encoder_seconds is not None and not 1.0 <= self.encoder_seconds <= 30.0:
            raise ValueError(f"encoder_seconds must be in [1, 30], got {self.encoder_seconds}")
        if self.max_new_tokens is not None and not 1 <= self.max_new_tokens <= 440:
            raise ValueError(f"max_new_tokens must be in [1, 440], got {self.max_new_tokens}")
        if any(not 1.0 <= w <= 30.0 for w in self.windows) or list(self.windows) != sorted(
            set(self.windows)
        ):
            raise ValueError(f"windows must rise, each in [1, 30], got {self.windows}")
        if any(not 1.0 <= w <= 30.0 for _, w in self.window_floors):
            raise ValueError(f"window floors must be in [1, 30], got {self.window_floors}")
        if self.window_margin < 0 or self.greedy_up_to_seconds < 0:
            raise ValueError("window_margin and greedy_up_to_seconds must not be negative")
        if self.max_tokens_per_second is not None and self.max_tokens_per_second <= 0:
            raise ValueError("max_tokens_per_second must be above 0")

    def window_ladder(self) -> tuple[float, ...]:
        """The windows a clip may climb, shortest first, ending with the whole 30 s."""
        if self.encoder_seconds is None or self.encoder_seconds >= 30.0:
            return (30.0,)
        shorter = tuple(w for w in self.windows if w < self.encoder_seconds)
        return (*shorter, float(self.encoder_seconds), 30.0)

    def first_window(self, speech_seconds: float, language: str | None) -> float:
        """The window a clip of ``speech_seconds`` of speech in ``language`` is first encoded
        in: the shortest of :meth:`window_ladder` that holds it plus the margin (the longest
        short window, ``encoder_seconds``, needs only hold it: a 15 s piece of a long
        recording stays on it) and is not below the language's floor."""
        floor = self.window_floor(language)
        longest = self.encoder_seconds or 30.0

        def holds(window: float) -> bool:  # the longest short window needs no margin
            margin = self.window_margin if window < longest else 0.0
            return window >= speech_seconds + margin and window >= floor

        return next((w for w in self.window_ladder() if holds(w)), 30.0)

    def window_floor(self, language: str | None) -> float:
        """The shortest window ``language`` may be given (0: any; a clip whose language is
        still to be detected gets the floor of the languages not named)."""
        floors = dict(self.window_floors)
        return floors.get(language or "*", floors.get("*", 0.0))

    def beams_for(self, speech_seconds: float, language: str | None) -> int:
        """The beams a clip is first decoded with: 1 (greedy) for a short clip in a
        language of :attr:`greedy_languages`, else :attr:`beam_size`."""
        greedy = speech_seconds <= self.greedy_up_to_seconds and (
            self.greedy_languages is None or (language or "") in self.greedy_languages
        )
        return 1 if greedy else self.beam_size


#: What a clip's answer carries beyond its text: nothing, segments, or segments and words.
Timestamps = Literal["none", "segment", "word"]


@dataclass(frozen=True)
class DecodeRequest:
    """What one call asks of the decoder beyond the engine's :class:`DecodeOptions`: the
    task (``transcribe``, or ``translate`` to English), a prompt of earlier text, and
    timestamps. The default, :attr:`plain`, is the sites' path: text only, decoded in a batch.
    """

    task: Literal["transcribe", "translate"] = "transcribe"
    prompt: str | None = None
    timestamps: Timestamps = "none"

    def __post_init__(self) -> None:
        if self.task not in ("transcribe", "translate"):
            raise ValueError(f"task must be transcribe or translate, got {self.task!r}")
        if self.timestamps not in ("none", "segment", "word"):
            raise ValueError(f"timestamps must be none, segment or word, got {self.timestamps!r}")

    @property
    def plain(self) -> bool:
        """Whether this asks for nothing beyond the text (the batched path)."""
        return self == DecodeRequest()

    def __str__(self) -> str:
        asked = [f"task {self.task}"] if self.task != "transcribe" else []
        asked += ["a prompt"] if self.prompt else []
        asked += [f"{self.timestamps} timestamps"] if self.timestamps != "none" else []
        return ", ".join(asked) or "plain text"
