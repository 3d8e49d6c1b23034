"""``audio.transcribe``: a strict 16 kHz mono WAV clip of at most 15 s → ``{text}``, on the
warm Whisper pool. The gate measures the clip's seconds from the WAV itself."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from byoa_skills.models import ModelError, require_language, supports_language
from byoa_skills.pool import CallFailure
from byoa_skills.runtimes.text import ChunkHook
from byoa_skills.skills.base import LOCAL_RECEIPT, CallResult, PreparedCall, Runtimes, Skill
from byoa_skills.wav import MAX_CLIP_SECONDS, WavError, clip_from_skill_input

_LANGUAGE = re.compile(r"[a-z]{2,3}")


class AudioTranscribe(Skill):
    """Speech to text with the pool's Whisper model."""

    name: ClassVar[str] = "audio.transcribe"
    audio_measure: ClassVar[str] = "clipSeconds"

    def prepare(
        self, runtimes: Runtimes, skill_input: Any, params: dict[str, Any], deadline: float | None
    ) -> PreparedCall | CallResult:
        """Refuse a bad ``language`` (or one the model lacks) and any clip the strict WAV
        check refuses; measure ``clipSeconds`` from the samples."""
        language = params.get("language")
        if language is not None and not (
            isinstance(language, str) and _LANGUAGE.fullmatch(language)
        ):
            return CallResult.refused("bad-params", "language must be a code such as 'en' or 'ru'")
        try:
            if language is not None and runtimes.pool is not None:
                require_language(runtimes.pool.config.model_name, language)
            clip = clip_from_skill_input(skill_input, max_seconds=MAX_CLIP_SECONDS)
        except (WavError, ModelError) as refusal:
            return CallResult.refused(refusal.code, refusal.message)
        return PreparedCall(
            self.name, params, deadline, measured={"clipSeconds": clip.seconds}, clip=clip
        )

    async def fits(self, runtimes: Runtimes, entry: Any) -> bool:
        """Whether a pool runs here with a model that knows one of the ``languages`` the
        entry asks for (any model, when it names none)."""
        pool = runtimes.pool
        if pool is None or not pool.available:
            return False
        languages = entry.get("languages") if isinstance(entry, dict) else None
        if not isinstance(languages, list) or not languages:
            return True
        try:
            return any(
                isinstance(code, str) and supports_language(pool.config.model_name, code)
                for code in languages
            )
        except ModelError:  # a model outside the catalog: the workers know their own languages
            return True

    async def warm_up(self, runtimes: Runtimes) -> None:
        """Return once the speech workers are warm, starting them if they were let go while
        idle."""
        if runtimes.pool is not None:
            await runtimes.pool.warm_up()

    async def run(
        self, runtimes: Runtimes, call: PreparedCall, on_chunk: ChunkHook | None
    ) -> CallResult:
        """Transcribe the clip on the pool within the call's deadline."""
        if call.clip is None or runtimes.pool is None:
            return CallResult.refused("skill-unavailable", "no speech model runs here")
        try:
            answer = await runtimes.pool.transcribe(
                call.clip, call.params.get("language"), call.deadline
            )
        except CallFailure as failure:
            return CallResult.refused(failure.code, failure.message)
        return CallResult(
            ok=True,
            output={"text": answer.text},
            receipt=dict(LOCAL_RECEIPT),
            facts={
                "queued_ms": round(answer.queued_seconds * 1000, 1),
                "infer_ms": round(answer.inference_seconds * 1000, 1),
                **{
                    f"{name}_ms": round(seconds * 1000, 1)
                    for name, seconds in answer.transcript.phases
                },
                "handoff_ms": round(answer.handoff_seconds * 1000, 1),
                "window_s": answer.transcript.window_seconds,
                "encoder": answer.transcript.encoder,
                "language": answer.language or "",
                "worker": answer.worker_pid,
            },
        )
