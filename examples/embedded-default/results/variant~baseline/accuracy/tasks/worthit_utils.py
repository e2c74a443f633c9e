"""process_docs for worthit_hellaswag: the same as lm-eval's hellaswag task (written by worthit.taskdata)."""
import re


def _preprocess(text):
    text = text.strip().replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    return text.replace("  ", " ")


def hellaswag_process_docs(dataset):
    def _process_doc(doc):
        ctx = doc["ctx_a"] + " " + doc["ctx_b"].capitalize()
        return {"query": _preprocess(doc["activity_label"] + ": " + ctx),
                "choices": [_preprocess(e) for e in doc["endings"]],
                "gold": int(doc["label"])}

    return dataset.map(_process_doc)
