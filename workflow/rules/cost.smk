# study_cost: what the study cost (worthit.cost, cost.parquet + cost.md): each server's start time, serving time
# and GPU-minutes from its log and exit record; each stage's wall time from its jobs' benchmark files. It runs
# after everything the report renders, so only render_report and itself are missing from it; its priority,
# below every other rule's, makes the scheduler run the study-level aggregates first (summary, plan against
# measurement, each experiment's own: common.smk's study_aggregates), which are not its inputs so that the
# report can be rebuilt with the report's rules alone (--allowed-rules). The benchmark
# files are read, not inputs: a job that ran before they were recorded must not run again for one. The serve
# jobs (services) have none: Snakemake fails a service's group when the file comes later than --latency-wait,
# and a supervisor may take its whole stop grace (worthit.server.TERM_GRACE_S).


rule study_cost:
    input:
        results=REPORT_RESULTS,
        tables=rules.decide_study.output.parquet,
        figures=rules.plot_study.output.figures,
        validation=get_validation_files,
        plan=rules.plan_study.output.plan,
    output:
        parquet=report(f"{RESULTS}/cost.parquet", category="Cost"),
        md=report(f"{RESULTS}/cost.md", category="Cost"),
    log:
        f"{RESULTS}/logs/cost.log",
    benchmark:
        f"{BENCHMARKS}/study_cost/study.tsv"
    priority: -1
    localrule: True
    script:
        "../scripts/study_cost.py"
