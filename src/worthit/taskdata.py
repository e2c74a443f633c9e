"""The offline accuracy tasks the embedded default study runs: written by the project, generated here.

No hub is reachable on the machines the embedded default targets, and no package ships HellaSwag, ARC
or GSM8K data. So this module generates three tasks in the same shapes (and the original datasets'
JSONL schemas), deterministically from a fixed seed, and writes lm-eval task YAMLs that read them
through ``dataset_path: json``:

- ``worthit_hellaswag``: 4-way sentence completion (HellaSwag schema: ``activity_label``, ``ctx_a``,
  ``ctx_b``, ``endings``, ``label``); the wrong endings belong to other everyday activities.
- ``worthit_arc``: 4-choice science questions (ARC schema: ``question``, ``choices.{text,label}``,
  ``answerKey``) from small fact tables (animal classes, organs, units, states of matter, ...).
- ``worthit_gsm``: arithmetic word problems, generate-until with exact match on the number after
  ``####`` (GSM8K schema: ``question``, ``answer``).

The names carry a ``worthit_`` prefix so they never shadow lm-eval's own ``hellaswag``, ``arc_easy``,
``arc_challenge`` and ``gsm8k``, which real studies name and lm-eval fetches as usual. Standard library
only: this runs in the workflow environment.

Run ``python -m worthit.taskdata DIR`` to write the tasks for a hand-run ``lm_eval --include_path DIR``.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SEED = 20261129
TASKS = ("worthit_hellaswag", "worthit_arc", "worthit_gsm")
# lm-eval output types, so the accuracy stage knows which tasks need prompt logprobs.
OUTPUT_TYPES = {
    "worthit_hellaswag": "multiple_choice",
    "worthit_arc": "multiple_choice",
    "worthit_gsm": "generate_until",
}

# ---------------------------------------------------------------------------------------------------
# worthit_hellaswag: (activity, first sentence, continuation start, correct ending)
_ACTIVITIES: tuple[tuple[str, str, str, str], ...] = (
    (
        "Baking cookies",
        "{n} mixes flour, sugar and butter in a large bowl.",
        "then {p}",
        "rolls the dough into small balls and puts the tray in the oven.",
    ),
    (
        "Washing a car",
        "{n} sprays the dirty car with a garden hose.",
        "next {p}",
        "scrubs the doors with a soapy sponge and rinses off the foam.",
    ),
    (
        "Brushing teeth",
        "{n} squeezes toothpaste onto a toothbrush.",
        "then {p}",
        "brushes the teeth carefully and rinses the mouth with water.",
    ),
    (
        "Planting a tree",
        "{n} digs a deep hole in the garden with a shovel.",
        "then {p}",
        "places the young tree in the hole and fills it with soil.",
    ),
    (
        "Painting a wall",
        "{n} dips a wide roller into a tray of blue paint.",
        "then {p}",
        "rolls the paint evenly up and down the wall.",
    ),
    (
        "Making tea",
        "{n} fills the kettle with water and switches it on.",
        "when the water boils, {p}",
        "pours it over a tea bag in a cup and lets it steep.",
    ),
    (
        "Tying shoes",
        "{n} sits on the stairs and pulls on a pair of sneakers.",
        "then {p}",
        "ties the laces into a neat bow on each shoe.",
    ),
    (
        "Mowing the lawn",
        "{n} pulls the cord to start the lawn mower.",
        "then {p}",
        "pushes the mower in straight lines across the grass.",
    ),
    (
        "Swimming laps",
        "{n} puts on goggles and jumps into the pool.",
        "then {p}",
        "swims freestyle from one end of the pool to the other.",
    ),
    (
        "Playing the piano",
        "{n} sits down at the piano and opens the music book.",
        "then {p}",
        "places both hands on the keys and begins to play a song.",
    ),
    (
        "Washing dishes",
        "{n} fills the sink with hot, soapy water.",
        "then {p}",
        "scrubs each plate and sets it on the rack to dry.",
    ),
    (
        "Riding a bicycle",
        "{n} puts on a helmet and climbs onto the bicycle.",
        "then {p}",
        "pushes the pedals and rides down the street.",
    ),
    (
        "Changing a tire",
        "{n} loosens the nuts on the flat tire with a wrench.",
        "then {p}",
        "lifts the car with a jack and swaps in the spare tire.",
    ),
    (
        "Making a sandwich",
        "{n} lays two slices of bread on a cutting board.",
        "then {p}",
        "spreads peanut butter on one slice and jam on the other.",
    ),
    (
        "Walking a dog",
        "{n} clips the leash onto the dog's collar.",
        "then {p}",
        "opens the front door and walks the dog around the block.",
    ),
    (
        "Doing laundry",
        "{n} sorts the dirty clothes into two piles.",
        "then {p}",
        "loads the first pile into the washing machine and adds detergent.",
    ),
    (
        "Building a snowman",
        "{n} rolls a big ball of snow across the yard.",
        "then {p}",
        "stacks a smaller ball on top and adds a carrot for the nose.",
    ),
    (
        "Fishing",
        "{n} baits the hook and casts the line into the lake.",
        "then {p}",
        "waits patiently until a fish tugs on the line.",
    ),
    (
        "Wrapping a present",
        "{n} cuts a sheet of wrapping paper to size.",
        "then {p}",
        "folds the paper around the box and tapes the edges.",
    ),
    (
        "Shaving",
        "{n} spreads shaving cream over the cheeks and chin.",
        "then {p}",
        "glides the razor slowly down the face.",
    ),
    (
        "Cleaning windows",
        "{n} sprays glass cleaner on the window.",
        "then {p}",
        "wipes the glass with a cloth until it shines.",
    ),
    (
        "Making pancakes",
        "{n} whisks eggs, milk and flour into a smooth batter.",
        "then {p}",
        "pours a ladle of batter into the hot pan and flips the pancake.",
    ),
    (
        "Raking leaves",
        "{n} grabs a rake and walks out into the yard.",
        "then {p}",
        "rakes the fallen leaves into a big pile.",
    ),
    (
        "Juggling",
        "{n} holds three balls, two in one hand and one in the other.",
        "then {p}",
        "tosses them into the air one after another and catches them.",
    ),
    (
        "Ironing a shirt",
        "{n} lays a wrinkled shirt flat on the ironing board.",
        "then {p}",
        "presses the hot iron over the sleeves and collar.",
    ),
    (
        "Lifting weights",
        "{n} lies on the bench under the barbell.",
        "then {p}",
        "lowers the bar to the chest and pushes it back up.",
    ),
    (
        "Knitting a scarf",
        "{n} picks up two needles and a ball of wool.",
        "then {p}",
        "loops the yarn around the needles and knits another row.",
    ),
    (
        "Feeding a cat",
        "{n} opens a can of cat food in the kitchen.",
        "then {p}",
        "spoons the food into a bowl and sets it on the floor for the cat.",
    ),
    (
        "Setting the table",
        "{n} lays a clean tablecloth over the dining table.",
        "then {p}",
        "places a plate, a fork and a knife in front of each chair.",
    ),
    (
        "Playing basketball",
        "{n} dribbles the ball toward the hoop.",
        "then {p}",
        "jumps and shoots the ball through the net.",
    ),
    (
        "Peeling potatoes",
        "{n} rinses a bag of potatoes in the sink.",
        "then {p}",
        "peels each potato and drops it into a pot of water.",
    ),
    (
        "Vacuuming",
        "{n} plugs in the vacuum cleaner in the living room.",
        "then {p}",
        "pushes it back and forth over the carpet.",
    ),
    (
        "Skiing",
        "{n} clicks the boots into the skis at the top of the slope.",
        "then {p}",
        "pushes off with the poles and glides down the hill.",
    ),
    (
        "Writing a letter",
        "{n} sits at the desk with a pen and a sheet of paper.",
        "then {p}",
        "writes a short note, folds it and puts it into an envelope.",
    ),
    (
        "Grilling burgers",
        "{n} lights the grill and waits for it to heat up.",
        "then {p}",
        "places the patties on the grill and flips them after a few minutes.",
    ),
    (
        "Hanging a picture",
        "{n} holds a framed picture against the wall.",
        "then {p}",
        "hammers a nail into the wall and hangs the frame on it.",
    ),
    ("Watering plants", "{n} fills a watering can at the tap.", "then {p}", "waters each plant on the windowsill."),
    ("Cutting hair", "{n} combs the customer's wet hair.", "then {p}", "trims the ends with a pair of scissors."),
    (
        "Kayaking",
        "{n} slides the kayak into the river and climbs in.",
        "then {p}",
        "paddles on both sides to move downstream.",
    ),
    (
        "Brewing coffee",
        "{n} grinds a handful of coffee beans.",
        "then {p}",
        "puts the grounds in the filter and pours hot water over them.",
    ),
    (
        "Making a bed",
        "{n} pulls the sheet tight over the mattress.",
        "then {p}",
        "spreads the blanket on top and fluffs the pillows.",
    ),
    (
        "Carving a pumpkin",
        "{n} cuts the top off a large pumpkin.",
        "then {p}",
        "scoops out the seeds and carves a face into the side.",
    ),
)
_PEOPLE = (
    ("Anna", "she"),
    ("Tom", "he"),
    ("Maria", "she"),
    ("James", "he"),
    ("Lena", "she"),
    ("David", "he"),
    ("Sofia", "she"),
    ("Omar", "he"),
)


def _hellaswag(rng: random.Random, n_items: int, offset: int) -> list[dict[str, Any]]:
    items = []
    for i in range(n_items):
        k = (i + offset) % len(_ACTIVITIES)
        label, ctx_a, ctx_b, ending = _ACTIVITIES[k]
        name, pron = _PEOPLE[(i * 3 + offset) % len(_PEOPLE)]
        others = rng.sample([j for j in range(len(_ACTIVITIES)) if j != k], 3)
        endings = [_ACTIVITIES[j][3] for j in others]
        gold = rng.randrange(4)
        endings.insert(gold, ending)
        a, b = ctx_a.format(n=name, p=pron), ctx_b.format(n=name, p=pron)
        items.append(
            {
                "ind": i,
                "activity_label": label,
                "ctx_a": a,
                "ctx_b": b,
                "ctx": f"{a} {b}",
                "endings": endings,
                "source_id": f"worthit-{k}",
                "split": "",
                "split_type": "indomain",
                "label": str(gold),
            }
        )
    return items


# ---------------------------------------------------------------------------------------------------
# worthit_arc: questions from fact tables, three wrong answers from the other rows.
_ANIMAL_CLASSES = {
    "mammal": (
        "dog",
        "whale",
        "horse",
        "elephant",
        "mouse",
        "cow",
        "lion",
        "dolphin",
        "rabbit",
        "bat",
        "tiger",
        "sheep",
    ),
    "bird": ("eagle", "penguin", "sparrow", "owl", "ostrich", "parrot", "duck", "robin", "pigeon", "swan"),
    "fish": ("salmon", "shark", "trout", "tuna", "goldfish", "cod", "herring", "carp"),
    "reptile": ("snake", "lizard", "crocodile", "turtle", "iguana", "alligator"),
    "insect": ("ant", "bee", "butterfly", "beetle", "fly", "grasshopper", "mosquito", "ladybug"),
    "amphibian": ("frog", "toad", "salamander", "newt"),
}
_ORGANS = (
    ("heart", "pumps blood through the body"),
    ("lungs", "take in oxygen from the air we breathe"),
    ("stomach", "breaks down the food we eat"),
    ("brain", "controls thinking and memory"),
    ("kidneys", "filter waste from the blood"),
    ("skin", "covers and protects the outside of the body"),
    ("eyes", "let us see light and colour"),
    ("ears", "let us hear sounds"),
    ("bones", "give the body its shape and support"),
    ("muscles", "move the bones of the body"),
)
_UNITS = (
    ("length", "meter"),
    ("mass", "kilogram"),
    ("time", "second"),
    ("temperature", "degree Celsius"),
    ("electric current", "ampere"),
    ("volume", "liter"),
    ("force", "newton"),
    ("energy", "joule"),
    ("power", "watt"),
    ("frequency", "hertz"),
)
_STATES = {
    "solid": ("ice", "a rock", "a wooden block", "an iron nail", "a brick", "a glass marble"),
    "liquid": ("water", "milk", "orange juice", "olive oil", "vinegar", "honey"),
    "gas": ("steam", "oxygen", "helium", "carbon dioxide", "the air in a balloon", "nitrogen"),
}
# Written questions: (question, correct answer, three wrong answers).
_FACTS: tuple[tuple[str, str, tuple[str, str, str]], ...] = (
    ("Which planet is closest to the Sun?", "Mercury", ("Jupiter", "Neptune", "Saturn")),
    ("Which planet is known as the Red Planet?", "Mars", ("Venus", "Uranus", "Neptune")),
    ("What is the largest planet in our solar system?", "Jupiter", ("Mercury", "Mars", "Venus")),
    ("What star is at the center of our solar system?", "the Sun", ("the Moon", "Polaris", "Sirius")),
    ("What does the Moon orbit?", "the Earth", ("the Sun only", "Mars", "Jupiter")),
    (
        "How long does it take the Earth to orbit the Sun?",
        "about one year",
        ("about one day", "about one hour", "about one week"),
    ),
    (
        "How long does it take the Earth to spin once on its axis?",
        "about one day",
        ("about one year", "about one month", "about one minute"),
    ),
    ("What gas do plants take in from the air to make food?", "carbon dioxide", ("helium", "neon", "hydrogen")),
    ("What gas do plants give off during photosynthesis?", "oxygen", ("helium", "neon", "argon")),
    ("What do plants need from the Sun to make food?", "light", ("sound", "wind", "shadow")),
    ("Which part of a plant takes up water from the soil?", "the roots", ("the flowers", "the fruit", "the petals")),
    (
        "At what temperature does pure water freeze at sea level?",
        "0 degrees Celsius",
        ("50 degrees Celsius", "100 degrees Celsius", "25 degrees Celsius"),
    ),
    (
        "At what temperature does pure water boil at sea level?",
        "100 degrees Celsius",
        ("0 degrees Celsius", "10 degrees Celsius", "37 degrees Celsius"),
    ),
    (
        "What happens to water when it freezes?",
        "it turns into ice",
        ("it turns into steam", "it turns into salt", "it turns into sand"),
    ),
    (
        "What happens to ice when it is heated?",
        "it melts into water",
        ("it turns into rock", "it gets colder", "it turns into metal"),
    ),
    ("What force pulls objects toward the Earth?", "gravity", ("magnetism", "friction", "wind")),
    (
        "What force slows down a ball rolling on the grass?",
        "friction",
        ("gravity pulling it up", "magnetism", "electricity"),
    ),
    ("Which material is attracted to a magnet?", "iron", ("wood", "plastic", "glass")),
    ("Which material conducts electricity best?", "copper", ("rubber", "wood", "plastic")),
    ("Which of these is a good insulator of electricity?", "rubber", ("copper", "silver", "aluminum")),
    ("What is the main source of energy for life on Earth?", "the Sun", ("the Moon", "volcanoes", "the oceans")),
    ("What do we call animals that eat only plants?", "herbivores", ("carnivores", "predators", "decomposers")),
    ("What do we call animals that eat only meat?", "carnivores", ("herbivores", "producers", "plants")),
    ("What do caterpillars turn into?", "butterflies", ("frogs", "bees", "spiders")),
    ("What do tadpoles grow into?", "frogs", ("fish", "snakes", "birds")),
    ("What do bees collect from flowers?", "nectar", ("sand", "salt", "rocks")),
    ("What covers the body of a bird?", "feathers", ("scales", "fur", "shells")),
    ("What covers the body of a fish?", "scales", ("feathers", "fur", "leaves")),
    ("How do fish breathe under water?", "with gills", ("with lungs", "with fins", "with scales")),
    ("How many legs does an insect have?", "six", ("four", "eight", "ten")),
    ("How many legs does a spider have?", "eight", ("six", "four", "two")),
    ("Which sense do we use to hear music?", "hearing", ("smell", "taste", "touch")),
    ("What is the hardest natural material?", "diamond", ("chalk", "wood", "clay")),
    ("What is the boiling of water into a gas called?", "evaporation", ("condensation", "freezing", "melting")),
    ("What forms when water vapor in the air cools and turns into droplets?", "clouds", ("rocks", "sand", "soil")),
    ("Which season comes after winter?", "spring", ("autumn", "summer", "winter again")),
    ("What tool is used to measure temperature?", "a thermometer", ("a ruler", "a scale", "a compass")),
    (
        "What tool is used to look at very small things like cells?",
        "a microscope",
        ("a telescope", "a thermometer", "a ruler"),
    ),
    ("What tool is used to look at distant stars?", "a telescope", ("a microscope", "a thermometer", "a scale")),
    ("What tool shows which direction is north?", "a compass", ("a thermometer", "a ruler", "a scale")),
    ("What is the closest star to the Earth?", "the Sun", ("Sirius", "Polaris", "Vega")),
    (
        "What causes day and night on Earth?",
        "the Earth spinning on its axis",
        ("the Moon blocking the Sun", "clouds covering the sky", "the Sun turning off"),
    ),
    ("What part of the body protects the brain?", "the skull", ("the ribs", "the knee", "the hand")),
    (
        "Which food group gives the body the most protein?",
        "meat, fish and beans",
        ("sugar and sweets", "butter and oil", "salt"),
    ),
    ("What do we call the path a planet takes around the Sun?", "an orbit", ("a crater", "an eclipse", "a comet")),
)


def _arc_rows() -> list[tuple[str, str, list[str]]]:
    """Every question the fact tables give: (question, answer, wrong answers to pick three from)."""
    rows: list[tuple[str, str, list[str]]] = []
    for cls, animals in _ANIMAL_CLASSES.items():
        article = "an" if cls[0] in "aeiou" else "a"
        others = [a for c, xs in _ANIMAL_CLASSES.items() if c != cls for a in xs]
        rows += [(f"Which of these animals is {article} {cls}?", a, others) for a in animals]
    for organ, job in _ORGANS:
        rows.append((f"Which part of the body {job}?", f"the {organ}", [f"the {o}" for o, _ in _ORGANS if o != organ]))
    for qty, unit in _UNITS:
        rows.append(
            (f"Which unit is used to measure {qty}?", f"the {unit}", [f"the {u}" for _, u in _UNITS if u != unit])
        )
    for state, things in _STATES.items():
        others = [t for s, xs in _STATES.items() if s != state for t in xs]
        rows += [(f"At room temperature, which of these is a {state}?", t, others) for t in things[:4]]
    rows += [(q, a, list(w)) for q, a, w in _FACTS]
    return rows


def _arc(rng: random.Random, rows: Sequence[tuple[str, str, list[str]]], prefix: str) -> list[dict[str, Any]]:
    items = []
    for i, (question, answer, wrong) in enumerate(rows):
        choices = rng.sample(sorted(set(wrong)), 3)
        gold = rng.randrange(4)
        choices.insert(gold, answer)
        labels = ["A", "B", "C", "D"]
        items.append(
            {
                "id": f"{prefix}-{i}",
                "question": question,
                "choices": {"text": choices, "label": labels},
                "answerKey": labels[gold],
            }
        )
    return items


# ---------------------------------------------------------------------------------------------------
# worthit_gsm: one- and two-step word problems with small numbers.
_THINGS = ("apples", "marbles", "stickers", "pencils", "cookies", "books", "stamps", "shells", "cards", "balloons")


def _gsm_item(rng: random.Random) -> dict[str, str]:
    name, pron = rng.choice(_PEOPLE)
    thing = rng.choice(_THINGS)
    kind = rng.choice(("add", "sub", "mul", "add_sub", "div"))
    cap = pron.capitalize()
    if kind == "add":
        a, b = rng.randint(2, 40), rng.randint(2, 40)
        q = f"{name} has {a} {thing}. {cap} gets {b} more {thing}. How many {thing} does {name} have now?"
        steps, ans = [f"{name} has {a} + {b} = {a + b} {thing}."], a + b
    elif kind == "sub":
        a = rng.randint(10, 60)
        b = rng.randint(1, a - 1)
        q = f"{name} has {a} {thing}. {cap} gives away {b} {thing}. How many {thing} does {name} have left?"
        steps, ans = [f"{name} has {a} - {b} = {a - b} {thing} left."], a - b
    elif kind == "mul":
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        q = f"{name} has {a} boxes. Each box holds {b} {thing}. How many {thing} does {name} have in total?"
        steps, ans = [f"{name} has {a} * {b} = {a * b} {thing}."], a * b
    elif kind == "div":
        b, c = rng.randint(2, 6), rng.randint(2, 9)
        a = b * c
        q = f"{name} shares {a} {thing} equally among {b} friends. How many {thing} does each friend get?"
        steps, ans = [f"Each friend gets {a} / {b} = {c} {thing}."], c
    else:
        a, b = rng.randint(5, 30), rng.randint(2, 20)
        c = rng.randint(1, a + b - 1)
        q = (
            f"{name} has {a} {thing}. {cap} buys {b} more and then gives {c} to a friend. "
            f"How many {thing} does {name} have now?"
        )
        steps = [
            f"After buying, {name} has {a} + {b} = {a + b} {thing}.",
            f"After giving some away, {pron} has {a + b} - {c} = {a + b - c} {thing}.",
        ]
        ans = a + b - c
    return {"question": q, "answer": " ".join(steps) + f"\n#### {ans}"}


def _gsm(rng: random.Random, n: int) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    while len(out) < n:
        item = _gsm_item(rng)
        if item["question"] not in seen:
            seen.add(item["question"])
            out.append(item)
    return out


def generate() -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Every task's splits (task -> split -> rows), the same on every call and every machine."""
    rng = random.Random(SEED)
    arc_rows = _arc_rows()
    # A fixed sixth of the questions is the few-shot pool, the rest the evaluated split.
    arc_train = [r for i, r in enumerate(arc_rows) if i % 6 == 5]
    arc_test = [r for i, r in enumerate(arc_rows) if i % 6 != 5]
    gsm = _gsm(rng, 160)
    return {
        "worthit_hellaswag": {"validation": _hellaswag(rng, 126, 0), "train": _hellaswag(rng, 24, 5)},
        "worthit_arc": {"test": _arc(rng, arc_test, "test"), "train": _arc(rng, arc_train, "train")},
        "worthit_gsm": {"test": gsm[:128], "train": gsm[128:]},
    }


# The YAMLs follow lm-eval's stock hellaswag / arc_easy / gsm8k configs; only the data source differs.
_YAML = {
    "worthit_hellaswag": """\
task: worthit_hellaswag
dataset_path: json
dataset_kwargs:
  data_files: {data_files}
output_type: multiple_choice
training_split: train
validation_split: validation
test_split: null
process_docs: !function worthit_utils.hellaswag_process_docs
doc_to_text: "{{{{query}}}}"
doc_to_target: "{{{{label}}}}"
doc_to_choice: "choices"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
  source: worthit (project-written, generated by worthit.taskdata)
""",
    "worthit_arc": """\
task: worthit_arc
dataset_path: json
dataset_kwargs:
  data_files: {data_files}
output_type: multiple_choice
training_split: train
test_split: test
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{choices.label.index(answerKey)}}}}"
doc_to_choice: "{{{{choices.text}}}}"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
  source: worthit (project-written, generated by worthit.taskdata)
""",
    "worthit_gsm": """\
task: worthit_gsm
dataset_path: json
dataset_kwargs:
  data_files: {data_files}
output_type: generate_until
training_split: train
fewshot_split: train
test_split: test
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: false
    regexes_to_ignore:
      - ","
      - "\\\\$"
      - "(?s).*#### "
      - "\\\\.$"
generation_kwargs:
  until:
    - "Question:"
    - "</s>"
    - "<|im_end|>"
    - "\\n\\n"
  do_sample: false
  temperature: 0.0
  max_gen_toks: 64
repeats: 1
num_fewshot: 3
filter_list:
  - name: "strict-match"
    filter:
      - function: "regex"
        regex_pattern: "#### (\\\\-?[0-9\\\\.\\\\,]+)"
      - function: "take_first"
  - name: "flexible-extract"
    filter:
      - function: "regex"
        group_select: -1
        regex_pattern: "(-?[$0-9.,]{{2,}})|(-?[0-9]+)"
      - function: "take_first"
metadata:
  version: 1.0
  source: worthit (project-written, generated by worthit.taskdata)
""",
}

# HellaSwag's own preprocessing (lm_eval/tasks/hellaswag/utils.py), so the data keep the original schema.
_UTILS = '''\
"""process_docs for worthit_hellaswag: the same as lm-eval's hellaswag task (written by worthit.taskdata)."""
import re


def _preprocess(text):
    text = text.strip().replace(" [title]", ". ")
    text = re.sub("\\\\[.*?\\\\]", "", text)
    return text.replace("  ", " ")


def hellaswag_process_docs(dataset):
    def _process_doc(doc):
        ctx = doc["ctx_a"] + " " + doc["ctx_b"].capitalize()
        return {"query": _preprocess(doc["activity_label"] + ": " + ctx),
                "choices": [_preprocess(e) for e in doc["endings"]],
                "gold": int(doc["label"])}

    return dataset.map(_process_doc)
'''


def write_tasks(dest: str | Path) -> list[str]:
    """Write every task's JSONL splits and YAML under ``dest`` (an lm-eval include path); return the names.

    The YAMLs name their data files by absolute path (lm-eval's json loader resolves relative paths
    against the working directory, not the YAML).
    """
    dest = Path(dest).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    for task, splits in generate().items():
        files: dict[str, str] = {}
        for split, rows in splits.items():
            path = dest / task / f"{split}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
            files[split] = str(path)
        (dest / f"{task}.yaml").write_text(_YAML[task].format(data_files=json.dumps(files)))
    (dest / "worthit_utils.py").write_text(_UTILS)
    return list(TASKS)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m worthit.taskdata", description="Write worthit's offline lm-eval tasks (YAML + JSONL)."
    )
    p.add_argument("dest", type=Path, help="folder to pass to lm_eval --include_path")
    ns = p.parse_args(argv)
    for name in write_tasks(ns.dest):
        print(name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
