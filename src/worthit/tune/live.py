"""``worthit tune`` without ``--dry-run``, after the dry run's checks: the rounds (:mod:`.rounds`), the
confirmation on fresh servers (:mod:`.fresh_starts`) and the summary (:mod:`.summary`), printed so that the
terminal's last lines are the answer: what to run per scenario and where the summary is."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from worthit import errors
from worthit.errors import InputError
from worthit.plan.hardware import Hardware
from worthit.plan.model_sources import model_configs


def say(line: str) -> None:
    print(line, flush=True)


def run_live(
    a: Any, cfg: Mapping[str, Any], *, source: str, hw: Hardware, given: Mapping[str, str] | None, hub: bool
) -> int:
    """The tune's rounds, its confirmation unless skipped, its summary; exit status 0, or 2 on bad input."""
    from worthit.tune import page, summary
    from worthit.tune.driver import Interrupted, NotRun
    from worthit.tune.fresh_starts import ConfirmationRun, confirm
    from worthit.tune.fresh_starts import lines as confirmation_lines
    from worthit.tune.rounds import run_tune, summary_lines

    workdir = Path.cwd()
    smk = [*(["--profile", a.profile] if a.profile else []), *(getattr(a, "snakemake_args", None) or [])]
    try:
        shapes = {name: got[0] for name, got in model_configs(cfg, workdir, given, hub).items()}
        run = run_tune(
            cfg, source=source, hw=hw, shapes=shapes, workdir=workdir, cores=a.cores, snakemake_args=smk, say=say
        )
        s = run.section
        conf: ConfirmationRun | None = None
        if not any(run.best.values()) or run.search is None:
            skipped = "not confirmed: no candidate was measured, so there is nothing to confirm"
        elif a.no_confirm or s.confirm_top < 1 or s.confirm_repeats < 2:
            why = "--no-confirm" if a.no_confirm else "tune.confirm asks for none (top >= 1 and repeats >= 2 would)"
            skipped = f"not confirmed ({why}): the best above may be a lucky one"
            if a.no_confirm and s.confirm_top >= 1 and s.confirm_repeats >= 2:
                # a confirmation an earlier run began (a stop, a spent budget): judged on its starts so far
                found = confirm(cfg, run.search, s, source=source, workdir=workdir, serve=False, say=say)
                if found.found:
                    conf = found
                    skipped = ""
        else:
            skipped = ""
            conf = confirm(
                cfg, run.search, s, source=source, workdir=workdir, cores=a.cores, snakemake_args=smk, say=say
            )
        written = summary.write(cfg, run, conf, workdir)
        shown = page.write_page(written.parent)
        rerendered = _rerender_study_report(workdir / "results" / str(cfg["study"]))
    except InputError as e:
        return errors.report("worthit tune", e)
    except NotRun as e:
        say(f"worthit tune: {e}")
        return 1
    except (Interrupted, KeyboardInterrupt) as e:
        why = str(e) or "interrupted"
        say(f"worthit tune: {why}; what finished is kept: run the same command to resume")
        return 143 if isinstance(e, Interrupted) else 130
    say("\n".join(summary_lines(run, cfg)))
    say("\n".join(confirmation_lines(conf)) if conf is not None else skipped)
    if conf is not None and conf.found < conf.expected:
        say(
            f"the confirmation is not finished: {conf.found} of its {conf.expected} fresh starts are on disk; "
            "run the same command without --no-confirm to measure the rest"
        )
    say(f"summary: {written}; page: {shown}")
    if rerendered:
        say(f"the study's report shows the tune: {rerendered}")
    return 0


def _rerender_study_report(results: Path) -> Path | None:
    """The study's report, rendered again where it exists, so its tune section shows this tune (the tune
    writes nothing the report's Snakemake rule takes as input); None where the study has no report yet."""
    page_path = results / "report.html"
    if not page_path.is_file() or not (results / "report").is_dir():
        return None
    from worthit.report.build import main as report_main

    return page_path if report_main(["--results", str(results)]) == 0 else None
