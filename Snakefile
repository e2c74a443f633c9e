# worthit: is this vLLM optimisation worth it on my hardware?
# Config + includes + rule all; the logic lives in src/worthit, the stages in workflow/rules.
import time

STARTED = time.time()  # a run that rendered the report prints its decision at the end (onsuccess)


configfile: f"{workflow.basedir}/config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/plan.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/serve.smk"


# each experiment's rule file (quantize, kv, loadtest, sweet_spot, prefix, specdec, accuracy, deploy and any
# registered one: worthit.measurements)
for rule_file in EXPERIMENT_RULE_FILES:

    include: rule_file


include: "workflow/rules/aggregate.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/cost.smk"


rule all:
    default_target: True
    input:
        get_final_outputs(),


# the decision table, the deployments and the page, when this run wrote the report (worthit.report.terminal)
onsuccess:
    from worthit.report.terminal import after_run

    after_run(RESULTS, STARTED)
