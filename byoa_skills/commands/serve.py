"""``byoa-skills serve``: the warm pool behind the local API, until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from byoa_skills.commands.common import (
    add_model_arguments,
    configure_logging,
    number_at_least,
    pool_setting,
    resolve_model,
    whole_number,
)
from byoa_skills.consent.desk import ConsentDesk
from byoa_skills.directlink.intake import LinkIntake
from byoa_skills.extension.requests import PageRequests
from byoa_skills.pool import (
    DEFAULT_ENCODER_SECONDS,
    Device,
    PoolConfig,
    WorkerPool,
    WorkerStartFailed,
    default_layout,
    default_max_batch,
)
from byoa_skills.pool.tuned import TunedLayout, read_tuned
from byoa_skills.runtimes.text import TextRuntime
from byoa_skills.serve.app import HEADER_READ_SECONDS, LOOPBACK_HOSTS, build_app
from byoa_skills.serve.engine_record import EngineRecord, remove_record, write_record
from byoa_skills.serve.metrics import EngineMetrics
from byoa_skills.serve.openai_api import UploadLimits
from byoa_skills.serve.token import TOKEN_ENV, UnsafePathError, load_or_create_token
from byoa_skills.serve.wallet.routes import WalletPage
from byoa_skills.skills import SkillEngine
from byoa_skills.store.activity import DEFAULT_MAX_AGE_DAYS, DEFAULT_MAX_ROWS, ActivityLog
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.judge_settings import JudgeSettingsStore
from byoa_skills.store.problems import StoreStatus
from byoa_skills.store.sites import SiteStore
from byoa_skills.wallet_shim.judge_switch import JudgeSwitch
from byoa_skills.wallet_shim.shim import WalletShim

DEFAULT_PORT = 8787
log = logging.getLogger("byoa_skills.serve")


@dataclass(frozen=True)
class Retention:
    """How long the activity log keeps its entries: by age (days) and by count (0: no bound)."""

    days: float = DEFAULT_MAX_AGE_DAYS
    rows: int = DEFAULT_MAX_ROWS


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``serve`` to the ``byoa-skills`` parser."""
    serve = subparsers.add_parser(
        "serve",
        help="run the warm pool and the local API on loopback",
        description=(
            "Start the worker processes (each loads the model and warms up), then answer "
            "skill calls on a local HTTP/WebSocket API bound to loopback, protected by a "
            "bearer token. GET /ready answers 200 once every worker is warm (and while "
            "one stays warm; its `warm` counts them). SIGTERM or Ctrl-C drains: "
            "calls in flight finish, new ones are refused; a second one stops at once."
        ),
    )
    add_engine_arguments(serve)
    add_retention_arguments(serve)
    serve.set_defaults(run=run)


def add_retention_arguments(parser: argparse.ArgumentParser) -> None:
    """How long the activity log keeps its entries."""
    parser.add_argument(
        "--activity-days",
        type=number_at_least(0),
        default=DEFAULT_MAX_AGE_DAYS,
        metavar="DAYS",
        help=f"keep activity entries this many days (default {DEFAULT_MAX_AGE_DAYS}; 0: forever)",
    )
    parser.add_argument(
        "--activity-rows",
        type=whole_number(0),
        default=DEFAULT_MAX_ROWS,
        metavar="N",
        help=f"keep at most the newest N activity entries (default {DEFAULT_MAX_ROWS}; 0: all)",
    )


def retention_of(args: argparse.Namespace) -> Retention:
    """The retention the options ask for (the defaults where a command has no such options)."""
    days = getattr(args, "activity_days", DEFAULT_MAX_AGE_DAYS)
    rows = getattr(args, "activity_rows", DEFAULT_MAX_ROWS)
    return Retention(days, rows)


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of an engine: address, model, layout, queue, token. The pool's flags take
    their defaults and checks from :class:`PoolConfig`: a value it refuses is a usage error."""
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (default 8787)")
    add_model_arguments(parser)
    parser.add_argument(
        "--workers",
        type=pool_setting("workers", int),
        help="worker processes (default: the layout `byoa-bench tune` measured, else one per "
        "core on the CPU, one on CUDA)",
    )
    parser.add_argument(
        "--threads",
        type=pool_setting("threads_per_worker", int),
        help="threads per worker (default: the layout `byoa-bench tune` measured, else "
        f"{PoolConfig.threads_per_worker})",
    )
    parser.add_argument(
        "--queue",
        type=pool_setting("max_queue", int),
        default=PoolConfig.max_queue,
        help=f"calls that may wait (default {PoolConfig.max_queue})",
    )
    parser.add_argument(
        "--max-batch",
        type=pool_setting("max_batch", int),
        default=None,
        help="calls a worker decodes together (default: the layout `byoa-bench tune` "
        f"measured, else {default_max_batch(Device.CPU)} on the CPU, "
        f"{default_max_batch(Device.CUDA)} on CUDA; 1: no batching)",
    )
    parser.add_argument(
        "--batch-window-ms",
        type=pool_setting("batch_window", float, scale=1e-3),
        default=PoolConfig.batch_window * 1000,
        help="how long a worker waits for calls to join its batch while all others are "
        f"busy (default {PoolConfig.batch_window * 1000:g})",
    )
    parser.add_argument(
        "--encoder-seconds",
        type=pool_setting("encoder_seconds", float),
        default=PoolConfig.encoder_seconds,
        help="the longest encoder window in seconds, 1 to 30 (default "
        f"{DEFAULT_ENCODER_SECONDS:g}: the whole 30 s window, as faster-whisper decodes, "
        "because shorter windows lost words on real speech; below 30 a clip gets a window "
        "sized to its speech, faster, and an answer that looks degenerate or says a phrase "
        "twice climbs to a larger one; see docs/runtime.md; --backend torch always encodes "
        "the whole window)",
    )
    parser.add_argument(
        "--idle-release",
        type=pool_setting("idle_release", float),
        default=PoolConfig.idle_release,
        help="let the workers go after this many seconds without a call; the next call, "
        "grant or request starts them again (default "
        f"{PoolConfig.idle_release:g}; 0: never)",
    )
    parser.add_argument(
        "--token",
        help=f"the bearer token (default: ${TOKEN_ENV}, else the token file). A value given "
        "here can be read by every user of this computer in /proc/PID/cmdline and "
        f"`ps`: prefer ${TOKEN_ENV} or the token file",
    )


def run(args: argparse.Namespace) -> int:
    """Serve until told to stop; 0 after a clean stop, 1 if the model or workers fail."""
    return run_engine(args)


def run_engine(args: argparse.Namespace, links: Sequence[tuple[str, str]] = ()) -> int:
    """Start the engine the options describe and serve until told to stop; 0 after a clean
    stop, 1 if the model or workers fail, 2 for a host that is not loopback."""
    configure_logging(args.log_level)
    if args.host not in LOOPBACK_HOSTS:
        print(f"byoa-skills: --host must be a loopback address, not {args.host}", file=sys.stderr)
        return 2
    try:  # flags that cannot go together are refused before the model is fetched
        pool_config(args, args.model, Path(), Device.CPU)
        UploadLimits.from_env()  # and so are the recording limits the environment sets
    except ValueError as error:
        print(f"byoa-skills: {error}", file=sys.stderr)
        return 2
    model = resolve_model(args)
    if model is None:
        return 1
    config = pool_config(args, *model, tuned=read_tuned(model[0], model[2]))
    token = api_token(args.token)
    try:
        asyncio.run(serve(config, args.host, args.port, token, links, retention_of(args)))
    except WorkerStartFailed as error:
        print(f"byoa-skills: a worker could not start: {error}", file=sys.stderr)
        return 1
    return 0


def pool_config(
    args: argparse.Namespace,
    model_name: str,
    model_dir: Path,
    device: str,
    tuned: TunedLayout | None = None,
) -> PoolConfig:
    """The pool the engine's flags describe for a model and a resolved device (``cpu`` or
    ``cuda``). Each of workers, threads and batch size comes from its flag when given, else
    from ``tuned`` (the layout ``byoa-bench tune`` measured), else the device's default.
    Raises ``ValueError`` naming the flag when the flags do not make a pool."""
    workers, threads = default_layout(device)
    batch = default_max_batch(device)
    source = "default"
    if tuned is not None and None in (args.workers, args.threads, args.max_batch):
        workers, threads, batch = tuned.workers, tuned.threads, tuned.max_batch
        source = f"tuned {tuned.measured_at}".strip()
    elif args.workers or args.threads or args.max_batch:
        source = "flags"
    return PoolConfig(
        model_dir=model_dir,
        model_name=model_name,
        device=device,
        backend=args.backend,
        encoder_backend=getattr(args, "encoder_backend", PoolConfig.encoder_backend),
        workers=args.workers or workers,
        threads_per_worker=args.threads or threads,
        max_queue=args.queue,
        max_batch=args.max_batch or batch,
        batch_window=args.batch_window_ms / 1000,
        encoder_seconds=args.encoder_seconds,
        idle_release=getattr(args, "idle_release", PoolConfig.idle_release),
        layout_source=source,
    )


def api_token(given: str | None) -> str:
    """The local API's token: ``given``, else ``$BYOA_SKILLS_TOKEN``, else the token file
    (made on first use, and its place printed)."""
    token = given or os.environ.get(TOKEN_ENV)
    if token:
        return token
    try:
        token, path, created = load_or_create_token()
    except UnsafePathError as error:
        raise SystemExit(f"byoa-skills: refused: {error}") from None
    if created:
        print(f"byoa-skills: the API token is new in {path}", file=sys.stderr)
    return token


async def serve(
    config: PoolConfig,
    host: str,
    port: int,
    token: str,
    links: Sequence[tuple[str, str]] = (),
    retention: Retention | None = None,
) -> None:
    """Run the API and the pool until SIGTERM or SIGINT, then drain and stop; once ready,
    come back to kept pairings and take ``links`` (link, decision) the visitor allowed."""
    retention = retention or Retention()
    metrics = EngineMetrics()
    pool = WorkerPool(config, on_event=metrics.on_pool_event)
    metrics.watch_pool(pool)
    text = TextRuntime()
    engine = SkillEngine(pool, on_call=metrics.record_call, text=text)
    database = WalletDatabase.default()
    activity = ActivityLog(database, max_age_days=retention.days, max_rows=retention.rows)
    consents = ConsentDesk()
    sites = SiteStore(database, keep_unwritten=True)
    judges = JudgeSwitch(JudgeSettingsStore(database), text)
    shim = WalletShim(engine, sites, activity, ask=consents.ask_call, judges=judges)
    _say_store(await asyncio.to_thread(database.check))
    activity.prune()
    intake = LinkIntake(shim, consents=consents)
    page = WalletPage(engine, shim, intake, consents)
    page.base_url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    app = build_app(
        engine, metrics, token, shim, intake, page=page, requests=PageRequests(shim, consents)
    )
    runner = web.AppRunner(app, access_log=None, keepalive_timeout=HEADER_READ_SECONDS)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    record = _record_where_listening(host, runner)
    stop, hurry = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:  # the first stops, the second hurries (drain, clean-up)
        (hurry if stop.is_set() else stop).set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal)
    log.info(
        "event=listening url=http://%s:%d workers=%d threads=%d batch=%d layout=%r "
        "model=%s device=%s",
        host,
        port,
        config.workers,
        config.threads_per_worker,
        config.max_batch,
        config.layout_source,
        config.model_name,
        config.device,
    )
    try:
        starting = asyncio.create_task(pool.start())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if starting.done():
            starting.result()
            log.info("event=ready workers=%s", ",".join(map(str, pool.worker_pids())))
            print(f"byoa-skills: ready on http://{host}:{port}", file=sys.stderr, flush=True)
            intake.resume_pairings()
            for link, decision in links:
                answer = await intake.take(link, decision)
                print(f"byoa-skills: link {_link_outcome(answer)}", file=sys.stderr, flush=True)
            await stop.wait()
            consents.close()  # a stop never waits on the visitor
            await _drain(pool, hurry)
        else:
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError, WorkerStartFailed):
                await starting
    finally:
        consents.close()
        stopping.cancel()

        async def clean_up() -> None:
            await intake.close()
            await text.close()
            await pool.close()
            remove_record(record)
            await runner.cleanup()
            await asyncio.to_thread(database.close)  # what is queued is committed

        cleaning = asyncio.create_task(clean_up())
        hurrying = asyncio.create_task(hurry.wait())
        await asyncio.wait({cleaning, hurrying}, return_when=asyncio.FIRST_COMPLETED)
        hurrying.cancel()
        if not cleaning.done():  # a second signal: end now, leaving no worker and no memory
            log.warning("event=stopped-at-once")
            pool.kill_now()
            remove_record(record)
            os._exit(128 + signal.SIGTERM)
        cleaning.result()
        log.info("event=stopped")


async def _drain(pool: WorkerPool, hurry: asyncio.Event) -> None:
    """Let the calls taken finish (:meth:`WorkerPool.drain`), from whatever state the pool is
    in; a second SIGTERM or SIGINT (``hurry``) meanwhile stops waiting for them (they are
    answered ``shutting-down`` as the pool closes)."""
    log.info(
        "event=draining queued=%d busy=%d life=%s",
        pool.queue_depth,
        pool.busy_workers,
        pool.life.value,
    )
    draining = asyncio.create_task(pool.drain())
    hurrying = asyncio.create_task(hurry.wait())
    try:
        await asyncio.wait({draining, hurrying}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        hurrying.cancel()
        if not draining.done():
            log.warning("event=drain-cut queued=%d busy=%d", pool.queue_depth, pool.busy_workers)
            draining.cancel()
        await asyncio.gather(draining, hurrying, return_exceptions=True)


def _record_where_listening(host: str, runner: web.AppRunner) -> EngineRecord:
    """Write this engine's record in the home it serves (the port it bound, ``--port 0``
    included), for the commands that talk to it; a record that cannot be written is logged,
    and the engine serves on (those commands then need ``--port``)."""
    record = EngineRecord.this_process(host, int(runner.addresses[0][1]))
    try:
        write_record(record)
    except OSError as error:
        log.warning("event=record-not-written error=%r", str(error))
    return record


def _say_store(status: StoreStatus) -> None:
    """Tell the visitor, at start, that the store cannot be used: the engine runs on, and
    every site is refused until it can be (``/health`` and the wallet page say so too)."""
    if not status.ok:
        print(
            f"byoa-skills: the wallet's store cannot be used ({status.code}): "
            f"{status.message}; sites are refused until it can be",
            file=sys.stderr,
            flush=True,
        )


def _link_outcome(answer: dict[str, Any]) -> str:
    if answer["ok"]:
        return f"{answer['state']}: {answer['origin']}"
    return f"refused: {answer['code']}: {answer.get('message', '')}"
