"""The visitor's own recordings: any audio format decoded to 16 kHz mono, cut on the VAD into
pieces of at most one Whisper window, the pieces run several at once, and their text and
timestamps put back together in order.

Importing this package imports neither PyAV nor faster-whisper: decoding and cutting import
them when they run.
"""

from byoa_skills.recordings.decode import DEFAULT_MAX_SECONDS, Recording, decode_audio
from byoa_skills.recordings.errors import CODES, RecordingError
from byoa_skills.recordings.pieces import Piece, cut, join_chunks, piece_seconds
from byoa_skills.recordings.runner import pool_parallel, pool_runner, run_pieces
from byoa_skills.recordings.stitch import LongTranscript, join_text, shifted, stitch
from byoa_skills.recordings.subtitles import srt, vtt

__all__ = [
    "CODES",
    "DEFAULT_MAX_SECONDS",
    "LongTranscript",
    "Piece",
    "Recording",
    "RecordingError",
    "cut",
    "decode_audio",
    "join_chunks",
    "join_text",
    "piece_seconds",
    "pool_parallel",
    "pool_runner",
    "run_pieces",
    "shifted",
    "srt",
    "stitch",
    "vtt",
]
