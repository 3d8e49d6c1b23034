"""The visitor's own recordings: any audio format decoded to 16 kHz mono, cut on the VAD into
pieces of at most one window, the pieces run several at once, and their text and
timestamps put back together in order. A recording of any length is decoded and cut in
bounded blocks, never held whole. :class:`RecordingService` is that whole road, for the local
API's OpenAI routes and ``byoa-skills transcribe`` alike.

Importing this package imports neither PyAV nor faster-whisper: decoding and cutting import
them when they run.
"""

from byoa_skills.recordings.decode import (
    BLOCK_FRAMES,
    DEFAULT_MAX_SECONDS,
    AudioFile,
    Recording,
    decode_audio,
    open_audio,
)
from byoa_skills.recordings.errors import CODES, RecordingError
from byoa_skills.recordings.gate import DEFAULT_AT_ONCE, RecordingGate
from byoa_skills.recordings.line import DEFAULT_WAITING, DEFAULT_WAITING_BYTES, Place, UploadLine
from byoa_skills.recordings.memory import give_back_free_memory
from byoa_skills.recordings.pieces import (
    VAD_SPAN_SECONDS,
    BlockCutter,
    Piece,
    cut,
    join_chunks,
    piece_seconds,
)
from byoa_skills.recordings.runner import CutPiece, pool_parallel, pool_runner, run_pieces
from byoa_skills.recordings.service import (
    CLIENT_CHECK_SECONDS,
    CLIENT_GONE,
    SKILL,
    ClientGone,
    RecordingFailure,
    RecordingOptions,
    RecordingProgress,
    RecordingResult,
    RecordingService,
    Task,
)
from byoa_skills.recordings.stitch import LongTranscript, join_text, shifted, stitch
from byoa_skills.recordings.subtitles import srt, vtt
from byoa_skills.recordings.work import RecordingWork, Stop, Stopped

__all__ = [
    "BLOCK_FRAMES",
    "CLIENT_CHECK_SECONDS",
    "CLIENT_GONE",
    "CODES",
    "DEFAULT_AT_ONCE",
    "DEFAULT_MAX_SECONDS",
    "DEFAULT_WAITING",
    "DEFAULT_WAITING_BYTES",
    "SKILL",
    "VAD_SPAN_SECONDS",
    "AudioFile",
    "BlockCutter",
    "ClientGone",
    "CutPiece",
    "LongTranscript",
    "Piece",
    "Place",
    "Recording",
    "RecordingError",
    "RecordingFailure",
    "RecordingGate",
    "RecordingOptions",
    "RecordingProgress",
    "RecordingResult",
    "RecordingService",
    "RecordingWork",
    "Stop",
    "Stopped",
    "Task",
    "UploadLine",
    "cut",
    "decode_audio",
    "give_back_free_memory",
    "join_chunks",
    "join_text",
    "open_audio",
    "piece_seconds",
    "pool_parallel",
    "pool_runner",
    "run_pieces",
    "shifted",
    "srt",
    "stitch",
    "vtt",
]
