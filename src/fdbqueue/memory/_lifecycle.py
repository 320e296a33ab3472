"""A transaction's life between its creation and its last use: spent after ``commit``,
cancelled, timed out, the deferred error of its void calls, and the retry decision of
``on_error`` with its backoff.

Upstream rules: ``ReadYourWritesTransaction`` (``fdbclient/ReadYourWrites.cpp``):
``commitStarted`` and ``checkUsedDuringCommit`` (2017), ``resetPromise`` (1025 cancelled,
1031 by the ``timebomb``), ``resetRyow``; ``ThreadSafeTransaction``
(``fdbclient/ThreadSafeTransaction.cpp``), whose ``checkDeferredError`` reports the errors
of writes, conflict ranges and ``set_read_version`` at the next read or commit; and
``Transaction::onError`` (``fdbclient/NativeAPI.actor.cpp``) with ``CLIENT_KNOBS->
DEFAULT_BACKOFF`` and ``FUTURE_VERSION_RETRY_DELAY``. The persistent options ``timeout``,
``retry_limit`` and ``max_retry_delay`` live here: they survive ``on_error``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from fdbqueue.memory._errors import FDBError, is_retryable

__all__ = ["Lifecycle"]

INITIAL_BACKOFF = 0.01  # seconds (upstream CLIENT_KNOBS->DEFAULT_BACKOFF)
DEFAULT_MAX_RETRY_DELAY = 1.0  # seconds
#: The fixed delay of ``on_error`` after 1007 and 1009 (upstream FUTURE_VERSION_RETRY_DELAY).
FUTURE_VERSION_RETRY_DELAY = 0.01  # seconds


class Lifecycle:
    """The state that decides whether a transaction may still be used, and how it retries.

    ``fail_pending`` is called with 1031 when the timeout is found to have passed: the
    transaction fails its pending watches and versionstamp with it.
    """

    def __init__(self, fail_pending: Callable[[FDBError], None]) -> None:
        self._fail_pending = fail_pending
        self.reset_options()
        self.reset_state()

    def reset_options(self) -> None:
        """At creation and ``reset()``: the persistent options back to their defaults."""
        self.started = time.monotonic()
        self.deadline: float | None = None
        self.retry_limit = -1
        self.max_retry_delay = DEFAULT_MAX_RETRY_DELAY
        self.retries = 0
        self.backoff = INITIAL_BACKOFF

    def reset_state(self) -> None:
        """At creation, ``on_error`` and ``reset()``: usable again, nothing deferred."""
        self.deferred_error: FDBError | None = None
        # Upstream's resetPromise: once set (1025 cancelled, 1031 timed out, 2017 used after
        # commit, 1025 after on_error raised), reads, commit and on_error report it.
        self.reset_error: FDBError | None = None
        self.commit_started = False  # upstream commitStarted: cleared by reset and on_error

    def set_timeout(self, milliseconds: int) -> None:
        """Time out ``milliseconds`` after the start (or the last ``reset()``); 0: never."""
        if milliseconds < 0:
            raise FDBError(2006)
        self.reset_error_now()  # a timeout that has fired stays fired (upstream's timebomb)
        self.deadline = None if milliseconds == 0 else self.started + milliseconds / 1000.0

    def reset_error_now(self) -> FDBError | None:
        """The reset error, after setting it to 1031 if the timeout has passed (upstream's
        ``timebomb``)."""
        if (
            self.reset_error is None
            and self.deadline is not None
            and time.monotonic() > self.deadline
        ):
            self.reset_error = FDBError(1031)
            self._fail_pending(FDBError(1031))
        return self.reset_error

    def used_after_commit(self) -> bool:
        """Upstream's ``checkUsedDuringCommit``: once ``commit`` was called, every later
        operation fails with 2017 until ``reset`` or ``on_error``."""
        if self.commit_started and self.reset_error is None:
            self.reset_error = FDBError(2017)
        return self.commit_started

    def check_usable(self) -> None:
        """The checks of reads, watches, commit and ``get_versionstamp``."""
        if self.used_after_commit():
            raise FDBError(2017)
        error = self.reset_error_now()
        if error is not None:
            raise error

    def check_readable(self) -> None:
        """A write's deferred error first, as the binding's ``ThreadSafeTransaction``
        (``checkDeferredError``), then :meth:`check_usable`."""
        if self.deferred_error is not None:
            raise self.deferred_error
        self.check_usable()

    def check_read_version(self) -> None:
        """The checks of ``get_read_version``: the deferred error, then the reset error
        (``ThreadSafeTransaction::getReadVersion``; no 2017 check)."""
        if self.deferred_error is not None:
            raise self.deferred_error
        error = self.reset_error_now()
        if error is not None:
            raise error

    def dropped_write(self) -> bool:
        """For the calls that never raise FDBError (writes, conflict ranges: void C calls
        whose errors the binding defers): True, with 2017 deferred, after ``commit``. A
        cancelled or timed-out transaction still takes the write; its commit fails."""
        if self.used_after_commit():
            self.defer(FDBError(2017))
            return True
        return False

    def defer(self, error: FDBError) -> None:
        """Report ``error`` at the next read or commit (the first deferred error wins)."""
        if self.deferred_error is None:
            self.deferred_error = error

    def start_commit(self) -> None:
        """``commit`` was called: the transaction is spent."""
        self.commit_started = True

    def cancel(self) -> None:
        """Later reads and commit raise 1025 (unless an earlier reset error stands)."""
        if self.reset_error is None:
            self.reset_error = FDBError(1025)

    def retry_delay(self, code: int, random_fraction: Callable[[], float]) -> float | None:
        """``on_error``'s decision for error ``code``: None when it raises (not retryable,
        or the retry limit reached); else the delay before the retry, which is counted: 1007
        and 1009 wait a fixed ``min(10 ms, max_retry_delay)``, the others the growing
        backoff (doubling, times ``random_fraction()``, capped by ``max_retry_delay``)."""
        limit_reached = 0 <= self.retry_limit <= self.retries
        if not is_retryable(code) or limit_reached:
            return None
        if code in (1007, 1009):
            delay = min(FUTURE_VERSION_RETRY_DELAY, self.max_retry_delay)
        else:
            delay = min(self.backoff, self.max_retry_delay) * random_fraction()
            self.backoff = min(self.backoff * 2, self.max_retry_delay)
        self.retries += 1
        return delay
