"""The coordination between a variant's server and its consumers, without starting vLLM."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import time

import pytest

from worthit.server import ConsumerWatch, ServerFailed, consumer_presence, turn, wait_ready


def test_wait_ready_ignores_a_placeholder_state_and_says_what_is_missing(tmp_path):
    state = tmp_path / "server.json"
    state.write_text("{}")
    with pytest.raises(ServerFailed, match="no running server"):
        wait_ready(state, timeout_s=0.3, poll_s=0.1)


def test_wait_ready_gives_up_when_snakemake_removed_the_state_file(tmp_path):
    # Snakemake removes a failed group's service output; the consumer must not wait out the startup timeout
    with pytest.raises(ServerFailed, match="was removed: Snakemake ended the serve job"):
        wait_ready(tmp_path / "server.json", timeout_s=30, poll_s=0.05, gone_after_s=0.3)


def test_wait_ready_ignores_state_left_by_a_dead_supervisor(tmp_path):
    state = tmp_path / "server.json"
    state.write_text(json.dumps({"supervisor_pid": 2**22 + 12345, "variant": "v"}))
    with pytest.raises(ServerFailed, match="no running server"):
        wait_ready(state, timeout_s=0.3, poll_s=0.1)


def test_wait_ready_reports_the_recorded_reason_when_the_server_was_refused(tmp_path):
    state = tmp_path / "server.json"
    log = tmp_path / "serve.log"
    log.write_text("line 1\nnot starting: fp8 KV needs sm_89\n")
    state.write_text(
        json.dumps(
            {
                "variant": "v",
                "url": "http://127.0.0.1:9",
                "port": 9,
                "pid": os.getpid(),
                "supervisor_pid": os.getpid(),
                "log": str(log),
                "model_dir": "m",
                "served_model_name": "v",
                "command": [],
                "started_at": 0.0,
            }
        )
    )
    (tmp_path / "server.json.exit").write_text(json.dumps({"status": "not_applicable", "reason": "sm_86"}))
    with pytest.raises(ServerFailed) as e:
        wait_ready(state, timeout_s=5)
    assert e.value.reason == "sm_86" and "fp8 KV" in e.value.log_tail


def test_watch_is_not_orphaned_while_a_consumer_is_present(tmp_path):
    state = tmp_path / "server.json"
    watch = ConsumerWatch(state, idle_s=0.0)
    with consumer_presence(state, "kv"):
        watch.next_check = 0
        assert not watch.orphaned()
    watch.next_check = 0
    time.sleep(0.01)
    assert watch.orphaned()


def test_watch_ignores_markers_of_dead_consumers(tmp_path):
    state = tmp_path / "server.json"
    qdir = tmp_path / "server.json.queue"
    qdir.mkdir()
    (qdir / f"consumer-{2**22 + 4321}").write_text("load")
    watch = ConsumerWatch(state, idle_s=0.0)
    time.sleep(0.01)
    assert watch.orphaned()


# Real processes, started with "spawn": a fork from pytest-xdist's worker (a process with threads) can leave the
# child stuck on a lock another thread held (CI: m0 never wrote its ticket). The tests wait on queue files, never
# on sleeps; the deadlines below only bound a broken run, they measure nothing.
_CTX = mp.get_context("spawn")
_START_S = 120.0  # how long a child may take to start on a loaded two-core machine


@pytest.fixture
def proc():
    """``proc(target, *args)``: a child process (not yet started), killed at teardown if it is still running."""
    made: list[mp.process.BaseProcess] = []

    def make(target, *args):
        p = _CTX.Process(target=target, args=args, daemon=True)
        made.append(p)
        return p

    yield make
    for p in made:
        if p.is_alive():
            p.kill()
            p.join(5)


def _wait_for(qdir, *globs, timeout_s=_START_S):
    """Until a file matching one of ``globs`` is in the queue folder."""
    deadline = time.monotonic() + timeout_s
    while not any(list(qdir.glob(g)) for g in globs if qdir.exists()):
        assert time.monotonic() < deadline, f"none of {globs} in {qdir}"
        time.sleep(0.01)


def _wait_all(qdir, *globs, timeout_s=_START_S):
    for g in globs:
        _wait_for(qdir, g, timeout_s=timeout_s)


def _measure(state, index, name, log_path, hold_until=()):
    """One turn: log its start and end; hold the server until every glob in ``hold_until`` is in the queue."""
    with turn(state, index, name, poll_s=0.02):
        with open(log_path, "a") as fh:
            fh.write(f"start {name} {time.monotonic()}\n")
        _wait_all(state.parent / (state.name + ".queue"), *hold_until)
        time.sleep(0.05)
        with open(log_path, "a") as fh:
            fh.write(f"end {name} {time.monotonic()}\n")


def _log_has(log_path, line_start, timeout_s=_START_S):
    deadline = time.monotonic() + timeout_s
    while not (log_path.exists() and any(ln.startswith(line_start) for ln in log_path.read_text().splitlines())):
        assert time.monotonic() < deadline, f"no {line_start!r} in {log_path}"
        time.sleep(0.01)


def test_turns_never_overlap_and_waiting_consumers_go_in_index_order(tmp_path, proc):
    state = tmp_path / "server.json"
    log = tmp_path / "order.log"
    # m2 holds the server alone until m0 and m1 both queue up behind it
    m2 = proc(_measure, state, 2, "m2", log, ("0000-*", "0001-*"))
    m2.start()
    _log_has(log, "start m2")
    procs = [proc(_measure, state, i, f"m{i}", log) for i in (1, 0)]
    for p in procs:
        p.start()
    for p in (m2, *procs):
        p.join(_START_S)
    events = [line.split() for line in log.read_text().splitlines()]
    assert [e[1] for e in events if e[0] == "start"] == ["m2", "m0", "m1"]
    for a, b in zip(events[1::2], events[2::2], strict=False):  # each end precedes the next start
        assert a[0] == "end" and b[0] == "start" and float(a[2]) <= float(b[2])


def _present_then_measure(state, index, name, log_path, ready_file):
    with consumer_presence(state, name, index):
        while not ready_file.exists():  # "waiting for the server"
            time.sleep(0.01)
        _measure(state, index, name, log_path)


def test_consumers_present_before_the_server_is_ready_take_turns_in_index_order(tmp_path, proc):
    state = tmp_path / "server.json"
    log = tmp_path / "order.log"
    ready = tmp_path / "ready"
    procs = [proc(_present_then_measure, state, i, f"m{i}", log, ready) for i in (2, 0, 1)]
    for p in procs:
        p.start()
    _wait_all(tmp_path / "server.json.queue", "0000-*", "0001-*", "0002-*")  # all present, the server not ready
    ready.touch()
    for p in procs:
        p.join(_START_S)
    starts = [line.split()[1] for line in log.read_text().splitlines() if line.startswith("start")]
    assert starts == ["m0", "m1", "m2"]


def _turn_logged(state, index, name, log_path, settle_s, measured=()):
    with turn(state, index, name, poll_s=0.02, settle_s=settle_s, measured=measured):
        with open(log_path, "a") as fh:
            fh.write(f"start {name} {time.monotonic()}\n")
        time.sleep(0.1)


def _late_member_run(tmp_path, proc, settle_s, late_by_s=0.0):
    """m0 measures first; m2 waits from the start; m1 starts only once m0's turn has ended (Snakemake's late
    group member), ``late_by_s`` after that."""
    state = tmp_path / "server.json"
    qdir = tmp_path / "server.json.queue"
    log = tmp_path / "order.log"
    m0 = proc(_turn_logged, state, 0, "m0", log, settle_s)
    m2 = proc(_turn_logged, state, 2, "m2", log, settle_s)
    m1 = proc(_turn_logged, state, 1, "m1", log, settle_s)
    m0.start()
    _wait_for(qdir, "0000-*", "done-0000")  # m0 holds its ticket (or is done) before m2 asks for a turn
    m2.start()
    _wait_for(qdir, "0002-*", "done-0002")  # m2 asks (or has had its turn) before the late member starts
    _wait_for(qdir, "done-0000")
    time.sleep(late_by_s)
    m1.start()
    for p in (m0, m1, m2):
        p.join(_START_S)
    return [line.split()[1] for line in log.read_text().splitlines()]


def test_a_member_that_starts_after_the_first_turn_still_goes_before_higher_indices(tmp_path, proc):
    assert _late_member_run(tmp_path, proc, settle_s=_START_S) == ["m0", "m1", "m2"]


def test_without_the_settle_wait_the_late_member_is_overtaken(tmp_path, proc):
    # the control: what Snakemake's one-short pool did to the order before the settle wait
    assert _late_member_run(tmp_path, proc, settle_s=0.0, late_by_s=5.0) == ["m0", "m2", "m1"]


def _late_after_two_turns(tmp_path, proc, settle_s, late_by_s=0.0):
    """m0 and m1 measure; m3 waits from the start; m2 starts only once m0's and m1's turns have both ended
    (the late member of a busy host, whose interpreter is still importing while short turns finish)."""
    state = tmp_path / "server.json"
    qdir = tmp_path / "server.json.queue"
    log = tmp_path / "order.log"
    m0, m1, m2, m3 = (proc(_turn_logged, state, i, f"m{i}", log, settle_s) for i in range(4))
    m0.start()
    _wait_for(qdir, "0000-*", "done-0000")
    m1.start()
    _wait_for(qdir, "0001-*", "done-0001")
    m3.start()
    _wait_for(qdir, "0003-*", "done-0003")
    _wait_for(qdir, "done-0001")  # two turns have finished before the late member asks
    time.sleep(late_by_s)
    m2.start()
    for p in (m0, m1, m2, m3):
        p.join(_START_S)
    return [line.split()[1] for line in log.read_text().splitlines()]


def test_a_member_later_than_two_turns_still_goes_before_higher_indices(tmp_path, proc):
    assert _late_after_two_turns(tmp_path, proc, settle_s=_START_S) == ["m0", "m1", "m2", "m3"]


def test_without_the_settle_wait_a_member_later_than_two_turns_is_overtaken(tmp_path, proc):
    assert _late_after_two_turns(tmp_path, proc, settle_s=0.0, late_by_s=5.0) == ["m0", "m1", "m3", "m2"]


def test_an_earlier_index_already_measured_is_not_waited_for(tmp_path, proc):
    state = tmp_path / "server.json"
    qdir = tmp_path / "server.json.queue"
    log = tmp_path / "order.log"
    settle_s = 3 * _START_S
    # index 1's result exists: m2 follows m0 at once although 1 holds no ticket and the settle wait is long
    m0 = proc(_turn_logged, state, 0, "m0", log, settle_s, {1})
    m2 = proc(_turn_logged, state, 2, "m2", log, settle_s, {1})
    m0.start()
    _wait_for(qdir, "0000-*", "done-0000")
    m2.start()
    m2.join(_START_S)  # a third of the settle wait it would otherwise sit out
    m0.join(5)
    assert not m2.is_alive() and [line.split()[1] for line in log.read_text().splitlines()] == ["m0", "m2"]


def _state(tmp_path, supervisor_pid: int, started_at: float) -> dict:
    return {
        "variant": "v",
        "url": "http://127.0.0.1:9",
        "port": 9,
        "pid": supervisor_pid,
        "supervisor_pid": supervisor_pid,
        "log": str(tmp_path / "serve.log"),
        "model_dir": "m",
        "served_model_name": "v",
        "command": [],
        "started_at": started_at,
    }


def test_wait_ready_fails_within_seconds_when_this_runs_supervisor_died_without_a_record(tmp_path):
    state = tmp_path / "server.json"
    (tmp_path / "serve.log").write_text("INFO starting\n")
    state.write_text(json.dumps(_state(tmp_path, 2**22 + 12345, time.time())))  # written now, pid dead
    t0 = time.monotonic()
    with pytest.raises(ServerFailed, match="is gone and left no exit record") as e:
        wait_ready(state, timeout_s=120, poll_s=0.1)
    assert time.monotonic() - t0 < 30  # not the 120 s startup timeout
    assert "INFO starting" in e.value.log_tail and e.value.status == "failed"


def test_wait_ready_fails_at_once_with_the_supervisors_recorded_reason(tmp_path):
    state = tmp_path / "server.json"
    now = time.time()
    state.write_text(json.dumps(_state(tmp_path, 2**22 + 12345, now)))
    (tmp_path / "server.json.exit").write_text(
        json.dumps({"status": "failed", "reason": "stopped: it received SIGINT", "at": now + 1})
    )
    with pytest.raises(ServerFailed, match="it received SIGINT"):
        wait_ready(state, timeout_s=120, poll_s=0.1, gone_after_s=60)


def test_wait_ready_keeps_waiting_when_the_dead_supervisors_state_is_from_an_earlier_run(tmp_path):
    # a killed run's leftover (written long before this consumer started): the new supervisor replaces it
    state = tmp_path / "server.json"
    state.write_text(json.dumps(_state(tmp_path, 2**22 + 12345, time.time() - 3600)))
    (tmp_path / "server.json.exit").write_text(json.dumps({"reason": "old run", "at": time.time() - 3500}))
    with pytest.raises(ServerFailed, match="no running server"):
        wait_ready(state, timeout_s=4.5, poll_s=0.1)


def _wait_in_turn(state, index, out):
    try:
        with turn(state, index, f"m{index}", poll_s=0.05, settle_s=0):
            out.put("granted")
    except Exception as e:  # noqa: BLE001 - the test reports what escaped
        out.put(f"raised {type(e).__name__}: {e}")


def test_a_consumer_waiting_when_the_supervisor_removes_the_queue_goes_on_instead_of_crashing(tmp_path, proc):
    # The supervisor removes the queue when it stops (its group torn down, a budget's end): a consumer waiting
    # behind a live lower ticket must go on (wait_ready then reads the exit record), not die with a traceback.
    state = tmp_path / "server.json"
    qdir = tmp_path / "server.json.queue"
    holder = proc(time.sleep, 600)
    holder.start()
    qdir.mkdir()
    (qdir / f"0000-{holder.pid}-m0").write_text("m0")  # a live earlier consumer, still waiting
    out = _CTX.Queue()
    waiter = proc(_wait_in_turn, state, 1, out)
    waiter.start()
    _wait_for(qdir, "0001-*")
    time.sleep(0.5)
    assert out.empty(), "m1 overtook a live earlier ticket"
    shutil.rmtree(qdir)
    assert out.get(timeout=_START_S) == "granted"
    waiter.join(_START_S)
    assert waiter.exitcode == 0
