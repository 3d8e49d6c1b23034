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
    encoder_seconds: float | None = None

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
