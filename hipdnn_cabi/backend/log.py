"""Backend logging: the global level, HIPDNN_LOG_LEVEL / HIPDNN_LOG_FILE, and user log callbacks.

Messages that pass the global level go to stderr (or HIPDNN_LOG_FILE) when the level comes from the
environment, and to every registered user callback whose own minimum level they reach.  SYNC
callbacks run on the calling thread before the API returns; ASYNC ones on one worker thread fed by
a bounded queue (8192 entries; a full queue blocks the producer).  Exceptions or crashes inside a
callback are the caller's: we swallow Python-level errors only.

fork(): the child gets a logging pipeline of its own (``_after_fork_child``): fresh locks, an empty
queue and no delivery thread (one starts on the child's first ASYNC message).  The registered
callbacks and levels are inherited.  Messages queued in the parent but not yet delivered at fork
stay the parent's: the parent's delivery thread delivers them there, and the child's copy of the
queue is dropped, so no message is delivered twice (docs/abi-choices.md, "Logging and fork()").
"""
from __future__ import annotations

import os
import queue
import sys
import threading

from .._generated.enums import LogCallbackMode, Severity
from ..errors import BadParamError
from . import env, runtime

_LEVEL_NAMES = {"info": Severity.HIPDNN_SEV_INFO, "warn": Severity.HIPDNN_SEV_WARN,
                "warning": Severity.HIPDNN_SEV_WARN, "error": Severity.HIPDNN_SEV_ERROR,
                "fatal": Severity.HIPDNN_SEV_FATAL, "off": Severity.HIPDNN_SEV_OFF}
_SEV_TAG = {Severity.HIPDNN_SEV_INFO: "info", Severity.HIPDNN_SEV_WARN: "warning",
            Severity.HIPDNN_SEV_ERROR: "error", Severity.HIPDNN_SEV_FATAL: "critical"}
VALID_LEVELS = frozenset(int(s) for s in Severity)

_lock = threading.RLock()
_level = int(Severity.HIPDNN_SEV_OFF)
_sink = None            # file object for env-configured logging, or None
_callbacks: dict[tuple[int, int], tuple[int, int]] = {}   # (cb, user) -> (min_level, mode)
_async_q: "queue.Queue | None" = None
_async_thread = None
_generation = 0         # bumped on unregister so queued async items for removed keys are dropped


def _effective_level() -> int:
    return _level


def _sync_cache():
    if runtime.lib is not None:
        runtime.lib.hipdnn_cabi_set_log_level_cache(_effective_level())


def configure_from_env() -> None:
    """Read HIPDNN_LOG_LEVEL and HIPDNN_LOG_FILE (once, at library start = the logger's
    initialisation, spec §7), from the C environment."""
    global _level, _sink
    name = env.get_stripped("HIPDNN_LOG_LEVEL").lower()
    if name in _LEVEL_NAMES:
        _level = int(_LEVEL_NAMES[name])
        path = env.get_stripped("HIPDNN_LOG_FILE")
        _sink = sys.stderr
        if path:
            try:
                _sink = open(path, "a", buffering=1)
            except OSError:
                _sink = sys.stderr
    _sync_cache()


def enabled(sev: int) -> bool:
    return _level != Severity.HIPDNN_SEV_OFF and sev >= _level and sev != Severity.HIPDNN_SEV_OFF


def log(sev: int, msg: str, *, raw: bool = False) -> None:
    """Emit ``msg`` at severity ``sev`` if it passes the global level."""
    if not enabled(sev):
        return
    text = msg if raw else f"[hipdnn_backend] [{_SEV_TAG.get(sev, 'info')}] {msg}"
    if _sink is not None:
        try:
            _sink.write(text + "\n")
            _sink.flush()
        except Exception:
            pass
    if _callbacks:
        _dispatch(sev, msg)


def _dispatch(sev: int, msg: str) -> None:
    data = msg.encode("utf-8", "replace")
    for (cb, user), (min_level, mode) in list(_callbacks.items()):
        if sev < min_level:
            continue
        if mode == LogCallbackMode.HIPDNN_LOG_CALLBACK_SYNC:
            runtime.lib.hipdnn_cabi_call_user_log_cb(cb, user, sev, data)
        else:
            _ensure_async().put((_generation, cb, user, sev, data))


def _ensure_async():
    global _async_q, _async_thread
    with _lock:
        if _async_q is None:
            _async_q = queue.Queue(maxsize=8192)
            _async_thread = threading.Thread(target=_async_worker, args=(_async_q,), name="hipdnn-log",
                                             daemon=True)
            _async_thread.start()
    return _async_q


_invoke_lock = threading.Lock()


def _async_worker(q=None):
    q = q if q is not None else _async_q
    while True:
        gen, cb, user, sev, data = q.get()
        if q is not _async_q:
            return  # this queue was dropped by a fork (we are a stale thread object in the child)
        with _invoke_lock:
            if gen == _generation and (cb, user) in _callbacks:
                try:
                    runtime.lib.hipdnn_cabi_call_user_log_cb(cb, user, sev, data)
                except Exception:
                    pass


_level_listeners: list = []   # callables(level) told of every level set (the plugin host)


def add_level_listener(fn) -> None:
    """``fn(level)`` runs after every successful set_global_level (outside the logging lock);
    the plugin host uses it to hand the new level to every loaded plugin, as hipDNN does."""
    if fn not in _level_listeners:
        _level_listeners.append(fn)


def set_global_level(level: int) -> int:
    """hipdnnBackendSetGlobalLogLevel_ext: returns a status; a bad level is BAD_PARAM with a last
    error (hipDNN itself leaves the slot alone there, but every failure here says why).  Every
    loaded plugin then gets hipdnnPluginSetLogLevel(level) (through the listeners)."""
    global _level, _sink
    if level not in VALID_LEVELS:
        raise BadParamError(f"hipdnnBackendSetGlobalLogLevel_ext: invalid log level {level} "
                            f"(valid: INFO..FATAL or OFF)")
    with _lock:
        _level = int(level)
        _sync_cache()
    for fn in list(_level_listeners):
        try:
            fn(int(level))
        except Exception:  # noqa: BLE001 - telling plugins never fails the API call
            pass
    return 0


def get_global_level() -> int:
    return _level


def set_user_callback(cb: int, min_level: int, mode: int, user: int) -> None:
    global _generation
    if not cb:
        raise BadParamError("hipdnnSetUserLogCallback_ext: callback is nullptr")
    if not user:
        raise BadParamError("hipdnnSetUserLogCallback_ext: userHandle is nullptr")
    if mode not in (LogCallbackMode.HIPDNN_LOG_CALLBACK_SYNC, LogCallbackMode.HIPDNN_LOG_CALLBACK_ASYNC):
        raise BadParamError(f"hipdnnSetUserLogCallback_ext: invalid callback mode {mode}")
    if min_level not in VALID_LEVELS:
        raise BadParamError(f"hipdnnSetUserLogCallback_ext: invalid minimum level {min_level}")
    key = (cb, user)
    with _lock:
        if min_level == Severity.HIPDNN_SEV_OFF:
            if key not in _callbacks:
                raise BadParamError("hipdnnSetUserLogCallback_ext: callback/userHandle pair is not registered")
            del _callbacks[key]
            _generation += 1
            _drain_async_for_unregister()
        else:
            _callbacks[key] = (int(min_level), int(mode))


def _drain_async_for_unregister():
    """After OFF returns, the removed callback must never run again: wait out an in-flight call
    (queued ones are dropped by the generation check)."""
    if _async_thread is not None and threading.current_thread() is not _async_thread:
        with _invoke_lock:
            pass


def _after_fork_child():
    """Runs in the child of fork() (os.register_at_fork; the embedded library's pthread_atfork
    handler runs Python's at-fork hooks through PyOS_AfterFork_Child).  Only the forking thread
    exists here: every lock another thread held at fork (the delivery thread's ``_invoke_lock``
    while it was inside a callback, the queue's mutex, ``_lock`` during an unregister) would stay
    locked forever, and the delivery thread is gone.  Start over: new locks, no queue, no thread.
    Undelivered messages of the parent's queue are the parent's and are dropped here."""
    global _lock, _invoke_lock, _async_q, _async_thread
    _lock = threading.RLock()
    _invoke_lock = threading.Lock()
    _async_q = None
    _async_thread = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_child)


def plugin_message(sev: int, msg: str) -> None:
    """The callback receiver handed to plugins (also exported as hipdnnLoggingCallback_ext)."""
    if sev == Severity.HIPDNN_SEV_OFF:
        return
    if sev not in VALID_LEVELS:
        sev = Severity.HIPDNN_SEV_INFO
    log(sev, msg, raw=True)
