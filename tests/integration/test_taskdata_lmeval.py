"""lm-eval itself (evaluate env) loads worthit's offline tasks at full size: every item becomes a document,
and the last one's prompt and target are what taskdata wrote.

Run (lm-eval; one at a time on a shared machine):
    flock /tmp/worthit-heavy.lock python -m pytest tests/integration/test_taskdata_lmeval.py
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.conftest import require_env
from worthit import taskdata

pytestmark = [pytest.mark.lmeval]

CODE = """
import json, sys
from lm_eval.tasks import TaskManager, get_task_dict
tasks = get_task_dict(sys.argv[2:], TaskManager(include_path=sys.argv[1]))
out = {}
for name, t in tasks.items():
    docs = list(t.eval_docs)
    out[name] = {"n": len(docs), "text": t.doc_to_text(docs[-1]), "target": t.doc_to_target(docs[-1])}
print(json.dumps(out))
"""


def test_lm_eval_loads_every_item_of_the_grown_tasks(tmp_path):
    python = require_env("evaluate")
    taskdata.write_tasks(tmp_path / "tasks")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_DATASETS_CACHE": str(tmp_path / "c")}
    proc = subprocess.run(
        [str(python), "-c", CODE, str(tmp_path / "tasks"), *taskdata.TASKS],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    data = taskdata.generate()
    hs, arc, gsm = (data[t][s][-1] for t, s in zip(taskdata.TASKS, ("validation", "test", "test"), strict=True))
    assert got["worthit_hellaswag"]["n"] == len(data["worthit_hellaswag"]["validation"]) >= 500
    assert got["worthit_hellaswag"]["text"].startswith(f"{hs['activity_label']}: {hs['ctx_a']}")
    assert got["worthit_hellaswag"]["target"] == int(hs["label"])
    assert got["worthit_arc"]["n"] == len(data["worthit_arc"]["test"]) >= 500
    assert got["worthit_arc"]["text"] == f"Question: {arc['question']}\nAnswer:"
    assert got["worthit_arc"]["target"] == arc["choices"]["label"].index(arc["answerKey"])
    assert got["worthit_gsm"]["n"] == len(data["worthit_gsm"]["test"]) >= 500
    assert got["worthit_gsm"]["text"] == f"Question: {gsm['question']}\nAnswer:"
    assert got["worthit_gsm"]["target"] == gsm["answer"]
