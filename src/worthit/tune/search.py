"""The search: Optuna's TPE sampler, one study per scenario, in a journal file so a tune resumes.

Why TPE per scenario rather than NSGA-II over both: each scenario has one scalar objective (latency-first:
the concurrency per GPU at which the SLO is reached, interpolated between levels; throughput-first: the most
output tok/s per GPU under the TPOT ceiling), TPE is sample-efficient at the dozens of trials a budget of
server starts allows, while NSGA-II wants generations of a population far larger than that. One measurement
answers both scenarios (a candidate's load grid gives both figures), so every outcome is told to every
scenario's study: a candidate proposed for latency teaches the throughput sampler too.

A candidate is a dict of flag values (and ``variant``) with an id hashed from those values, so a candidate
already finished is never proposed twice: a repeat the sampler asks for is told the known outcome again (it
learns) and another is asked. Outcomes: measured figures (COMPLETE), failed with a reason (FAIL: the sampler
avoids the region), pruned by the plan with a reason (PRUNED: recorded, not served).

Deterministic for a seed: the samplers are seeded from ``seed``, the scenario and the trials already in the
journal (hashed, so that seeds 0, 1, 2, ... are unrelated searches), so a fresh tune and a resumed one propose
the same next candidates for the same history.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from worthit import atomic
from worthit.errors import InputError
from worthit.tune.space import Choices, Range, TuneSection

MEASURED = "measured"
FAILED = "failed"
PRUNED = "pruned"
CANDIDATE_ID = "candidate_id"
MAX_RESAMPLES = 32  # asks per proposal before a space is deemed exhausted


def candidate_id(values: Mapping[str, Any]) -> str:
    """A stable id from a candidate's values (order-free): the same values, the same id."""
    blob = json.dumps({k: values[k] for k in sorted(values)}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Candidate:
    values: dict[str, Any]
    round: int = 0
    scenario: str = ""  # the scenario whose sampler proposed it

    @property
    def id(self) -> str:
        return candidate_id(self.values)


@dataclass(frozen=True)
class Outcome:
    """What came of a candidate: measured figures per scenario (higher is better), or a failure or prune reason."""

    status: str
    figures: dict[str, float] = field(default_factory=dict)
    reason: str = ""

    @classmethod
    def measured(cls, figures: Mapping[str, float]) -> Outcome:
        return cls(MEASURED, dict(figures))

    @classmethod
    def failed(cls, reason: str) -> Outcome:
        return cls(FAILED, reason=reason)

    @classmethod
    def pruned(cls, reason: str) -> Outcome:
        return cls(PRUNED, reason=reason)


def ordinal_choices(dim: Any) -> tuple[Any, ...] | None:
    """A choice dimension's values in ascending order when they are all numbers (``max-num-seqs: [8, 16,
    64]``), else None. The sampler sees such a dimension as the index into that order, so TPE learns that
    neighbouring values behave alike (it extrapolates from 8 being better than 4 to trying 16), which a
    categorical dimension, whose values are unrelated labels to it, cannot."""
    if not isinstance(dim, Choices) or len(dim.choices) < 2:
        return None
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in dim.choices):
        return tuple(sorted(dim.choices))
    return None


def distributions(section: TuneSection) -> dict[str, BaseDistribution]:
    """Optuna's distribution of each space key (a numeric choice: the index into its ascending values)."""
    out: dict[str, BaseDistribution] = {}
    for key, dim in section.space.items():
        if (ordered := ordinal_choices(dim)) is not None:
            out[key] = IntDistribution(0, len(ordered) - 1)
        elif isinstance(dim, Choices):
            out[key] = CategoricalDistribution(dim.choices)
        elif isinstance(dim, Range) and dim.integer:
            out[key] = IntDistribution(int(dim.low), int(dim.high), log=dim.log, step=int(dim.step or 1))
        else:
            out[key] = FloatDistribution(dim.low, dim.high, log=dim.log, step=dim.step)
    return out


def _drop_cut_record(journal: Path) -> None:
    """A journal whose last record was cut short (the tune killed, or the disk full, while Optuna appended it)
    loses that record: Optuna writes each as one line, and would append the next to the cut one, which no later
    read can replay. The trial it belonged to is asked again, as any pending one."""
    if not journal.exists():
        return
    data = journal.read_bytes()
    if not data or data.endswith(b"\n"):
        return
    keep = data[: data.rfind(b"\n") + 1]
    atomic.write_bytes(journal, keep)
    print(
        f"worthit tune: {journal}: its last record was cut short ({len(data) - len(keep)} bytes, an interrupted "
        "write); dropped, the search resumes from the records before it",
        file=sys.stderr,
    )


class TuneSearch:
    """The tune's search over ``section.space``, its state in ``journal`` (one Optuna study per scenario)."""

    def __init__(self, section: TuneSection, journal: Path, study_name: str = "tune") -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.section = section
        self.dists = distributions(section)
        self.ordinal = {k: o for k, dim in section.space.items() if (o := ordinal_choices(dim)) is not None}
        journal.parent.mkdir(parents=True, exist_ok=True)
        _drop_cut_record(journal)
        try:
            self.storage = JournalStorage(JournalFileBackend(str(journal)))
            self.studies = {
                s: optuna.create_study(
                    study_name=f"{study_name}~{s}", storage=self.storage, direction="maximize", load_if_exists=True
                )
                for s in section.scenarios
            }
        except (ValueError, KeyError, TypeError, AttributeError) as e:  # a record Optuna cannot replay
            raise InputError(
                f"{journal}: the tune's search state cannot be read ({type(e).__name__}: {e}): it was changed or "
                "damaged. Remove this file to search afresh (a candidate measured before is read from the "
                "results, not served again, when the search proposes it)"
            ) from None
        self._check_journal(journal)
        # measured candidates that may not win (accuracy not shown acceptable: .accuracy_gate), with why; set by
        # the rounds from what is on disk, so a resumed tune finds them again
        self.ineligible: dict[str, str] = {}

    def _check_journal(self, journal: Path) -> None:
        """Refuse a journal whose trials were drawn from another space: the ``tune:`` section changed since it was
        written (another range, other choices, a key added or gone), or an earlier worthit encoded the space
        otherwise (numeric choices were labels before they were ordered). Its trials would mean other
        values, and Optuna refuses a parameter whose distribution changes."""
        for s in self.section.scenarios:
            for t in self._trials(s):
                for key, dist in t.distributions.items():
                    if self.dists.get(key) != dist:
                        now = self.dists.get(key, "not in the space")
                        raise InputError(
                            f"{journal}: the tune's search state was drawn from another space (key "
                            f"'tune.space.{key}': {dist} then, {now} now): the tune: section changed since, or "
                            "an earlier worthit encoded it otherwise. Remove this file to search the space afresh "
                            "(a candidate measured before is read from the results, not served again, when the "
                            "search proposes it)"
                        )

    def values(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """A trial's parameters as a candidate's flag values (a numeric choice's index as its value)."""
        return {k: self.ordinal[k][int(v)] if k in self.ordinal else v for k, v in params.items()}

    def params(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """A candidate's flag values as the sampler's parameters (:meth:`values` undone)."""
        return {k: self.ordinal[k].index(v) if k in self.ordinal else v for k, v in values.items()}

    def _trials(self, scenario: str, states: Sequence[TrialState] | None = None) -> list[optuna.trial.FrozenTrial]:
        return self.studies[scenario].get_trials(deepcopy=False, states=tuple(states) if states else None)

    def finished(self) -> dict[str, str]:
        """candidate id -> its status, over every scenario's finished trials."""
        out: dict[str, str] = {}
        for s in self.section.scenarios:
            for t in self._trials(s, (TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED)):
                cid = str(t.user_attrs.get(CANDIDATE_ID))
                if not cid.endswith("~repeat"):
                    out[cid] = str(t.user_attrs.get("status"))
        return out

    def next_round(self) -> int:
        """The round to run next: the earliest one with candidates asked for and not told (an interrupted
        tune), else the one after the last told (0 for a new tune)."""
        rounds = [
            (t.state == TrialState.RUNNING, int(t.user_attrs.get("round", 0)))
            for s in self.section.scenarios
            for t in self._trials(s)
            if not str(t.user_attrs.get(CANDIDATE_ID, "")).endswith("~repeat")
        ]
        pending = [r for running, r in rounds if running]
        if pending:
            return min(pending)
        return max((r for _, r in rounds), default=-1) + 1

    def _sampler(self, scenario: str, n_trials: int) -> optuna.samplers.BaseSampler:
        # the seed, the scenario and the trials so far, hashed: a resumed tune draws as a fresh one did, and
        # seeds s and s + 1 draw unrelated candidates (seed + trials had seed s + 1 replay seed s one trial on)
        key = f"{self.section.seed}:{scenario}:{n_trials}".encode()
        seed = int.from_bytes(hashlib.sha256(key).digest()[:4], "little")
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=max(4, self.section.per_round))

    def propose(self, round_: int) -> list[Candidate]:
        """This round's candidates, ``per_round`` split across the scenarios, none finished or proposed before.
        Pending trials of a round proposed earlier (an interrupted tune) are returned again, not re-asked."""
        pending = sorted(
            (
                (int(t.user_attrs.get("slot", 0)), Candidate(self.values(t.params), round_, s))
                for s in self.section.scenarios
                for t in self._trials(s, (TrialState.RUNNING,))
                if t.user_attrs.get("round") == round_
            ),
            key=lambda sc: sc[0],
        )
        if pending:
            return [c for _, c in pending]
        seen = set(self.finished()) | {
            str(t.user_attrs.get(CANDIDATE_ID)) for s in self.section.scenarios for t in self._trials(s)
        }
        out: list[Candidate] = []
        for i in range(self.section.per_round):
            scenario = self.section.scenarios[i % len(self.section.scenarios)]
            c = self._ask_new(scenario, round_, seen, slot=i)
            if c is None:
                break
            seen.add(c.id)
            out.append(c)
        return out

    def _ask_new(self, scenario: str, round_: int, seen: set[str], *, slot: int) -> Candidate | None:
        study = self.studies[scenario]
        for _ in range(MAX_RESAMPLES):
            study.sampler = self._sampler(scenario, len(self._trials(scenario)))
            trial = study.ask(fixed_distributions=self.dists)
            values = self.values(trial.params)
            cid = candidate_id(values)
            if cid not in seen:
                trial.set_user_attr(CANDIDATE_ID, cid)
                trial.set_user_attr("round", round_)
                trial.set_user_attr("slot", slot)
                return Candidate(values, round_, scenario)
            # asked again for a known candidate: answer with what is known and ask once more
            known = self._known(scenario, cid)
            trial.set_user_attr(CANDIDATE_ID, f"{cid}~repeat")
            trial.set_user_attr("status", known.user_attrs.get("status") if known else PRUNED)
            if known is None:  # proposed and not yet measured: no verdict to teach
                study.tell(trial, state=TrialState.PRUNED)
            else:
                study.tell(trial, known.value if known.state == TrialState.COMPLETE else None, state=known.state)
        logging.info("tune: %s: no unseen candidate after %d asks (space exhausted?)", scenario, MAX_RESAMPLES)
        return None

    def _known(self, scenario: str, cid: str) -> optuna.trial.FrozenTrial | None:
        for t in self._trials(scenario, (TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED)):
            if t.user_attrs.get(CANDIDATE_ID) == cid:
                return t
        return None

    def record(self, candidate: Candidate, outcome: Outcome) -> None:
        """Tell every scenario's study what came of ``candidate`` (its pending trial, or a new one)."""
        cid = candidate.id
        for s in self.section.scenarios:
            if self._known(s, cid) is not None:
                continue  # finished already: never recorded twice
            state, value = _state(outcome, s)
            attrs = {CANDIDATE_ID: cid, "status": outcome.status, "reason": outcome.reason, "round": candidate.round}
            running = [t for t in self._trials(s, (TrialState.RUNNING,)) if t.user_attrs.get(CANDIDATE_ID) == cid]
            study = self.studies[s]
            if running:
                number = running[0].number
                # the trial's storage id through the storage's public interface (a resumed search has only
                # the journal, not the Trial object that asked)
                study_id = self.storage.get_study_id_from_name(study.study_name)
                trial_id = self.storage.get_trial_id_from_study_id_trial_number(study_id, number)
                for k, v in attrs.items():
                    self.storage.set_trial_user_attr(trial_id, k, v)
                study.tell(number, value, state=state)
            else:
                study.add_trial(
                    optuna.trial.create_trial(
                        params=self.params(candidate.values),
                        distributions=self.dists,
                        value=value,
                        state=state,
                        user_attrs=attrs,
                    )
                )

    def best(self, scenario: str) -> tuple[dict[str, Any], float] | None:
        """The best measured candidate of a scenario so far (values, figure), None before any."""
        done = [
            t
            for t in self._trials(scenario, (TrialState.COMPLETE,))
            if str(t.user_attrs.get(CANDIDATE_ID)) not in self.ineligible
        ]
        if not done:
            return None
        t = max(done, key=lambda t: t.value if t.value is not None else float("-inf"))
        return self.values(t.params), float(t.value or 0.0)

    def trace(self) -> list[dict[str, Any]]:
        """Every finished trial of every scenario: scenario, round, candidate, status, value, reason, and
        whether it may win (``eligible``: False with the reason when its accuracy is not shown acceptable)."""
        return [
            {
                "scenario": s,
                "round": t.user_attrs.get("round"),
                "candidate_id": t.user_attrs.get(CANDIDATE_ID),
                "values": self.values(t.params),
                "status": t.user_attrs.get("status"),
                "value": t.value,
                "reason": self.ineligible.get(str(t.user_attrs.get(CANDIDATE_ID))) or t.user_attrs.get("reason", ""),
                "eligible": str(t.user_attrs.get(CANDIDATE_ID)) not in self.ineligible,
            }
            for s in self.section.scenarios
            for t in self._trials(s, (TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED))
            if not str(t.user_attrs.get(CANDIDATE_ID, "")).endswith("~repeat")
        ]


def _state(outcome: Outcome, scenario: str) -> tuple[TrialState, float | None]:
    if outcome.status == MEASURED:
        # a scenario no level met (no load under the SLO) scores 0: measured, and the worst there is
        return TrialState.COMPLETE, float(outcome.figures.get(scenario) or 0.0)
    if outcome.status == PRUNED:
        return TrialState.PRUNED, None
    return TrialState.FAIL, None
