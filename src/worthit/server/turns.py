"""The consumers of one server: their presence, and the ticket lock that gives each measurement its turn.

Every consumer marks itself present in the state file's queue folder (``<state>.queue/consumer-<pid>``) while
it runs; the supervisor stops a server nobody has been present for (:class:`ConsumerWatch`). A measurement
holds the server alone, in index order (:func:`turn`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Collection, Iterator
from pathlib import Path

from worthit.server.state import alive, queue_dir

# A server with no live consumer for this long stops by itself. Snakemake terminates a service when its
# consumers finish, but not when its group fails before the consumers start (e.g. an output folder
# cannot be made): then it would wait for the service forever.
ORPHAN_AFTER_S = float(os.environ.get("WORTHIT_ORPHAN_AFTER_S", "120"))
# Snakemake's local executor (9.x) runs a group in a thread pool that also holds the thread waiting for the
# group, so in a group as large as the pool one member starts only when the first one ends; after the first
# turn, a measurement that would overtake an earlier one holding no ticket waits this long for it (turn()).
LATE_MEMBER_SETTLE_S = float(os.environ.get("WORTHIT_LATE_MEMBER_SETTLE_S", "30"))


def _ticket(qdir: Path, index: int, name: str) -> Path:
    """The file that queues consumer ``name``'s turn at ``index`` (named after its pid, so a dead one's is known)."""
    return qdir / f"{index:04d}-{os.getpid()}-{name.replace('/', '_')}"


@contextlib.contextmanager
def consumer_presence(state_path: str | os.PathLike[str], name: str, index: int | None = None) -> Iterator[None]:
    """Mark a consumer of the server as present (a file named after its pid) while it runs.

    With ``index``, also queue its turn right away: every consumer of a group starts at once and waits
    for the server, so by the time the server is ready all of them hold tickets and the first turn
    goes to the lowest index, not to whichever process happened to ask first."""
    qdir = queue_dir(state_path)
    qdir.mkdir(parents=True, exist_ok=True)
    marker = qdir / f"consumer-{os.getpid()}"
    marker.write_text(name)
    ticket = _ticket(qdir, index, name) if index is not None else None
    if ticket:
        ticket.write_text(name)
    try:
        yield
    finally:
        marker.unlink(missing_ok=True)
        if ticket:
            ticket.unlink(missing_ok=True)


class ConsumerWatch:
    """Tells the supervisor when its group has no live consumer for ORPHAN_AFTER_S."""

    def __init__(self, state_path: str | os.PathLike[str], idle_s: float | None = None) -> None:
        self.qdir = queue_dir(state_path)
        self.idle_s = ORPHAN_AFTER_S if idle_s is None else idle_s
        self.last_seen = time.monotonic()
        self.next_check = 0.0

    def orphaned(self) -> bool:
        now = time.monotonic()
        if now < self.next_check:
            return False
        self.next_check = now + 2.0
        with contextlib.suppress(OSError):
            for m in self.qdir.glob("consumer-*"):
                if alive(int(m.name.split("-", 1)[1])):
                    self.last_seen = now
                    return False
        return now - self.last_seen > self.idle_s


@contextlib.contextmanager
def turn(
    state_path: str | os.PathLike[str],
    index: int,
    name: str,
    *,
    poll_s: float = 0.5,
    settle_s: float | None = None,
    measured: Collection[int] = (),
) -> Iterator[None]:
    """Hold the server for one measurement: measurements of a variant never overlap, and run in
    ``index`` order.

    Snakemake starts every consumer of a service group at once, so ordering through inputs is not
    possible. Each consumer registers a ticket (index + pid) and takes an exclusive lock when no live
    ticket with a lower index is waiting. Tickets of dead processes are ignored, so a crashed
    consumer never blocks the others. A finished turn leaves a ``done-<index>`` marker.

    One member may start late: Snakemake's local executor starts a group's jobs in a thread pool one
    thread short when the group is as large as the pool (``--cores 1``: six members or more), so that
    member starts only when the first measurement has ended. Until ``settle_s`` after the first turn ended
    (:data:`LATE_MEMBER_SETTLE_S`), a consumer that would overtake a lower index holding neither a ticket
    nor a done marker waits for it, however many turns have finished meanwhile. ``measured``: lower
    indices whose results exist already (not part of this run), never waited for; one that is not requested
    costs that wait once per server.
    """
    settle = LATE_MEMBER_SETTLE_S if settle_s is None else settle_s
    qdir = queue_dir(state_path)
    qdir.mkdir(parents=True, exist_ok=True)
    ticket = _ticket(qdir, index, name)
    ticket.write_text(name)
    lock = open(qdir / "lock", "w")  # noqa: SIM115 - closed in finally
    try:
        while True:
            if not _earlier_waiting(qdir, ticket, index) and not _late_member_expected(qdir, index, settle, measured):
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    pass
                else:
                    # A lower index's ticket may have appeared between the two checks above (a late member
                    # asking just then): with the lock held, no turn can start, so look once more.
                    if not _earlier_waiting(qdir, ticket, index):
                        break
                    fcntl.flock(lock, fcntl.LOCK_UN)
            time.sleep(poll_s)
        try:
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):  # the supervisor stopped and removed the queue
                (qdir / f"done-{index:04d}").write_text(name)
    finally:
        ticket.unlink(missing_ok=True)
        lock.close()


def _tickets(qdir: Path) -> Iterator[tuple[int, int, Path]]:
    """(index, pid, path) of every ticket in the queue; none once the supervisor has removed the queue (it
    stopped: the waiting consumer then goes on to :func:`~worthit.server.ready.wait_ready`, which reads its
    exit record)."""
    try:
        entries = list(qdir.iterdir())
    except FileNotFoundError:
        return
    for t in entries:
        head, _, rest = t.name.partition("-")
        if head.isdigit():
            yield int(head), int(rest.split("-", 1)[0]), t


def _earlier_waiting(qdir: Path, ticket: Path, index: int) -> bool:
    return any(i < index and t != ticket and alive(pid) for i, pid, t in _tickets(qdir))


def _late_member_expected(qdir: Path, index: int, settle_s: float, measured: Collection[int] = ()) -> bool:
    """Once a turn has finished, is a lower index missing (no live ticket, no done marker) while the first turn
    ended less than ``settle_s`` ago? See :func:`turn`.

    The late member starts when the first measurement's job ends, and needs its interpreter and imports
    before it can queue: on a busy host, short turns can finish meanwhile, so the wait counts from the first
    finished turn, not only until the second one."""
    done: dict[int, float] = {}
    for d in qdir.glob("done-*"):
        if d.name[5:].isdigit():
            with contextlib.suppress(OSError):
                done[int(d.name[5:])] = d.stat().st_mtime
    if not done or settle_s <= 0 or time.time() - min(done.values()) >= settle_s:
        return False
    present = {i for i, pid, _ in _tickets(qdir) if alive(pid)}
    return any(j not in done and j not in present and j not in measured for j in range(index))
