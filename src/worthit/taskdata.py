"""The offline accuracy tasks the embedded default study runs: written by the project, generated here.

No hub is reachable on the machines the embedded default targets, and no package ships HellaSwag, ARC
or GSM8K data. So this module generates three tasks in the same shapes (and the original datasets'
JSONL schemas), deterministically from a fixed seed, and writes lm-eval task YAMLs that read them
through ``dataset_path: json``:

- ``worthit_hellaswag``: 4-way sentence completion (HellaSwag schema: ``activity_label``, ``ctx_a``,
  ``ctx_b``, ``endings``, ``label``); the wrong endings belong to other everyday activities. 626 items:
  167 activities (42 original, then tools, places, jobs, situations), each with its one right ending.
- ``worthit_arc``: 4-choice science questions (ARC schema: ``question``, ``choices.{text,label}``,
  ``answerKey``) from fact tables (animal classes, organs, units, states of matter, chemical symbols,
  young animals, planets, shapes) and from numbers computed from the question (unit conversions,
  speed, force, voltage, work). 602 items.
- ``worthit_gsm``: arithmetic word problems, generate-until with exact match on the number after
  ``####`` (GSM8K schema: ``question``, ``answer``); every worked step is an ``a op b = c`` line that
  computes. 600 items.

Each task holds at least 500 evaluated items, so a real model's paired differences can decide a
3-point non-inferiority bound. The original items (126, 105, 128) come first and are unchanged, so a
``limit`` no larger than those evaluates what it did before; :func:`families` says which families the
first N items were drawn from.

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
from typing import Any, TypeVar

T = TypeVar("T")
SEED = 20261129
TASKS = ("worthit_hellaswag", "worthit_arc", "worthit_gsm")
# lm-eval output types, so the accuracy stage knows which tasks need prompt logprobs.
OUTPUT_TYPES = {
    "worthit_hellaswag": "multiple_choice",
    "worthit_arc": "multiple_choice",
    "worthit_gsm": "generate_until",
}

# ---------------------------------------------------------------------------------------------------
# worthit_hellaswag: (activity, first sentence, continuation start, correct ending). The first table is the
# original set (its 126 items come first, unchanged); the families below it add the rest.
_FIRST_ACTIVITIES: tuple[tuple[str, str, str, str], ...] = (
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
        k = (i + offset) % len(_FIRST_ACTIVITIES)
        label, ctx_a, ctx_b, ending = _FIRST_ACTIVITIES[k]
        name, pron = _PEOPLE[(i * 3 + offset) % len(_PEOPLE)]
        others = rng.sample([j for j in range(len(_FIRST_ACTIVITIES)) if j != k], 3)
        endings = [_FIRST_ACTIVITIES[j][3] for j in others]
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


# The added families: every row is one checkable fact (its own ending); wrong endings come from other families.
_THEN, _SO = "then {p}", "so {p}"
_MORE_ACTIVITIES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "tools": (
        (
            "Using scissors",
            "{n} draws a star on a sheet of paper and picks up the scissors.",
            "cuts carefully along the lines of the star.",
        ),
        (
            "Using a hammer",
            "{n} holds a nail against the wooden board.",
            "hits the nail with a hammer until it is flush with the wood.",
        ),
        (
            "Sewing a button",
            "{n} threads a needle and picks up the shirt with the missing button.",
            "stitches the button back onto the shirt.",
        ),
        (
            "Sharpening a pencil",
            "{n} notices that the pencil tip is broken.",
            "twists the pencil in the sharpener until it has a fine point.",
        ),
        ("Opening a jar", "{n} grips the tight lid of a jar of pickles.", "twists hard until the lid pops open."),
        (
            "Charging a phone",
            "{n} sees that the phone battery is almost empty.",
            "plugs the phone into the charger on the wall.",
        ),
        ("Lighting candles", "{n} places ten candles on the birthday cake.", "lights each candle with a match."),
        (
            "Blowing up a balloon",
            "{n} takes a red balloon out of the bag.",
            "blows into it until it is round and ties the end.",
        ),
        (
            "Taking a photo",
            "{n} holds up the camera and points it at the family.",
            "tells everyone to smile and presses the button.",
        ),
        (
            "Using a ladder",
            "{n} leans a ladder against the side of the house.",
            "climbs up carefully to clean the gutter.",
        ),
        (
            "Mopping the floor",
            "{n} fills a bucket with soapy water and grabs the mop.",
            "wipes the kitchen floor until it is clean.",
        ),
        ("Sweeping the porch", "{n} takes the broom out of the closet.", "sweeps the dust and leaves off the porch."),
        (
            "Pumping a bike tire",
            "{n} presses on the soft front tire of the bicycle.",
            "attaches the pump and fills the tire with air.",
        ),
        ("Using a stapler", "{n} stacks the pages of the report neatly.", "staples them together in the top corner."),
        (
            "Peeling an orange",
            "{n} picks up an orange from the fruit bowl.",
            "peels off the skin and splits it into segments.",
        ),
        (
            "Cracking eggs",
            "{n} holds an egg over the mixing bowl.",
            "taps it on the rim and lets the yolk slide into the bowl.",
        ),
        (
            "Toasting bread",
            "{n} drops two slices of bread into the toaster.",
            "pushes the lever down and waits for the toast to pop up.",
        ),
        (
            "Boiling pasta",
            "{n} brings a large pot of salted water to a boil.",
            "adds the spaghetti and stirs it so it does not stick.",
        ),
        (
            "Using a microwave",
            "{n} puts a bowl of cold soup in the microwave.",
            "sets the timer for two minutes and presses start.",
        ),
        (
            "Filling up with fuel",
            "{n} parks next to the pump at the gas station.",
            "opens the fuel cap and fills the tank.",
        ),
        (
            "Locking a bicycle",
            "{n} rides up to the bike rack in front of the school.",
            "locks the bicycle to the rack with a chain.",
        ),
        (
            "Flying a kite",
            "{n} runs across the windy field holding a kite string.",
            "lets out more string as the kite rises into the sky.",
        ),
        (
            "Using a calculator",
            "{n} needs to add up a long list of prices.",
            "types the numbers into a calculator and reads the total.",
        ),
        (
            "Sending an email",
            "{n} opens the laptop and writes a message to a coworker.",
            "types the address and clicks send.",
        ),
        (
            "Printing a letter",
            "{n} finishes typing the letter on the computer.",
            "clicks print and collects the page from the printer.",
        ),
        (
            "Changing a light bulb",
            "{n} stands on a chair under the dark lamp with a new bulb.",
            "screws the new bulb into the socket and switches it on.",
        ),
        (
            "Pouring cereal",
            "{n} takes a bowl and a box of cereal from the cupboard.",
            "pours the cereal into the bowl and adds milk.",
        ),
        (
            "Using a tape measure",
            "{n} wants to know how wide the window is.",
            "stretches a tape measure from one side of the window to the other.",
        ),
        (
            "Gluing a vase",
            "{n} finds the broken pieces of a vase on the floor.",
            "glues the pieces back together one by one.",
        ),
        (
            "Hanging laundry",
            "{n} carries a basket of wet clothes into the yard.",
            "pins each shirt to the clothesline to dry.",
        ),
        (
            "Folding towels",
            "{n} takes the warm towels out of the dryer.",
            "folds them into neat squares and stacks them.",
        ),
        (
            "Filling a water bottle",
            "{n} holds an empty water bottle under the tap.",
            "fills it to the top and screws the cap on.",
        ),
        (
            "Unpacking groceries",
            "{n} sets the grocery bags on the kitchen counter.",
            "puts the milk in the fridge and the cans in the cupboard.",
        ),
        ("Packing a suitcase", "{n} lays an open suitcase on the bed.", "folds the clothes and packs them inside."),
        (
            "Reading a map",
            "{n} unfolds a map of the city at a street corner.",
            "finds the museum on the map and turns left.",
        ),
        (
            "Tuning a guitar",
            "{n} plucks a guitar string and hears that it sounds off.",
            "turns the tuning peg until the note sounds right.",
        ),
        (
            "Feeding fish",
            "{n} kneels in front of the fish tank with a can of flakes.",
            "sprinkles a pinch of food onto the water.",
        ),
        (
            "Brushing a horse",
            "{n} ties the horse to the fence and grabs a brush.",
            "brushes the horse's coat in long strokes.",
        ),
        (
            "Milking a cow",
            "{n} sets a stool and a bucket next to the cow.",
            "squeezes the udder gently and the bucket fills with milk.",
        ),
        (
            "Picking apples",
            "{n} climbs into the apple tree with a basket.",
            "picks the ripe apples and drops them into the basket.",
        ),
        (
            "Using a screwdriver",
            "{n} finds a loose screw on the cabinet door.",
            "tightens it with a screwdriver until the door hangs straight.",
        ),
        (
            "Using a stopwatch",
            "{n} stands at the finish line with a stopwatch as the runners start.",
            "presses the button again when the first runner crosses the line.",
        ),
        (
            "Using a funnel",
            "{n} wants to pour oil from a big can into a small bottle.",
            "puts a funnel in the bottle and pours slowly.",
        ),
        (
            "Planting seeds",
            "{n} fills a small pot with soil and pokes a hole in the middle.",
            "drops a seed into the hole and covers it with soil.",
        ),
        (
            "Building a sandcastle",
            "{n} fills a bucket with wet sand on the beach.",
            "turns it upside down to make a tower for the castle.",
        ),
    ),
    "places": (
        (
            "At the library",
            "{n} walks up to the library desk with a library card.",
            "checks out two books and puts them in a bag.",
        ),
        (
            "At the post office",
            "{n} carries a small package into the post office.",
            "pays for the stamps and hands the package to the clerk.",
        ),
        (
            "At the bakery",
            "{n} looks at the bread and cakes behind the glass at the bakery.",
            "buys a loaf of bread and a chocolate muffin.",
        ),
        ("At the dentist", "{n} sits down in the dentist's chair.", "opens wide so the dentist can check the teeth."),
        (
            "At the airport",
            "{n} arrives at the airport with a suitcase and a ticket.",
            "checks in the bag and walks to the gate.",
        ),
        (
            "At the train station",
            "{n} runs onto the platform as the train pulls in.",
            "steps on board and finds an empty seat.",
        ),
        (
            "At the bus stop",
            "{n} waits at the bus stop and sees the bus coming.",
            "waves to the driver and gets on the bus.",
        ),
        (
            "At the checkout",
            "{n} pushes a full cart to the supermarket checkout.",
            "puts the groceries on the belt and pays the cashier.",
        ),
        (
            "At the cinema",
            "{n} buys a ticket and a bag of popcorn at the cinema.",
            "finds a seat and watches the movie.",
        ),
        ("At the beach", "{n} spreads a towel on the warm sand.", "puts on sunscreen and lies down in the sun."),
        (
            "At the doctor",
            "{n} tells the doctor about a bad cough.",
            "breathes deeply while the doctor listens with a stethoscope.",
        ),
        (
            "At a restaurant",
            "{n} sits down at a table and the waiter brings a menu.",
            "reads the menu and orders a bowl of soup.",
        ),
        (
            "At the cash machine",
            "{n} walks up to the cash machine outside the bank.",
            "inserts the card, types the code and takes out the cash.",
        ),
        (
            "At the playground",
            "{n} climbs the ladder to the top of the slide.",
            "slides down to the bottom with a laugh.",
        ),
        (
            "At the zoo",
            "{n} stops at the giraffe enclosure at the zoo.",
            "watches the giraffe eat leaves from a tall tree.",
        ),
        (
            "At the museum",
            "{n} walks into the museum's dinosaur hall.",
            "looks up at the huge skeleton and reads the sign.",
        ),
        (
            "At a concert",
            "{n} stands in the crowd as the band walks on stage.",
            "claps and cheers when the music starts.",
        ),
        (
            "At the hotel",
            "{n} walks up to the hotel reception with a suitcase.",
            "gives the name of the booking and receives a room key.",
        ),
        (
            "At the pharmacy",
            "{n} hands a prescription to the pharmacist.",
            "pays for the medicine and puts it in a bag.",
        ),
        (
            "At the market",
            "{n} stops at a market stall full of ripe tomatoes.",
            "picks out six tomatoes and pays the farmer.",
        ),
        (
            "At the ice rink",
            "{n} laces up the skates and steps onto the ice.",
            "glides slowly around the edge of the rink.",
        ),
        (
            "At the campsite",
            "{n} unrolls a tent on a flat patch of ground.",
            "pushes the poles through and pegs the tent down.",
        ),
        (
            "At the office",
            "{n} sits down at the office desk in the morning.",
            "turns on the computer and reads the new emails.",
        ),
        (
            "At school",
            "{n} raises a hand when the teacher asks a question.",
            "stands up and gives the answer to the class.",
        ),
        (
            "At a wedding",
            "{n} watches the couple cut the wedding cake.",
            "raises a glass and makes a toast to the couple.",
        ),
        (
            "At the garage",
            "{n} drives the car with a strange noise into the garage.",
            "asks the mechanic to look at the engine.",
        ),
        (
            "At a birthday party",
            "{n} hands a wrapped gift to the birthday girl.",
            "watches her tear off the paper and open the box.",
        ),
        (
            "At the park",
            "{n} sits on a park bench with a bag of bread crumbs.",
            "throws the crumbs to the ducks on the pond.",
        ),
        (
            "At the vet",
            "{n} lifts the sick puppy onto the vet's table.",
            "holds the puppy still while the vet gives it a shot.",
        ),
    ),
    "jobs": (
        (
            "A baker at work",
            "{n} works as a baker and mixes flour, water and yeast for the morning loaves.",
            "kneads the dough and bakes fresh bread.",
        ),
        (
            "A firefighter at work",
            "{n} works as a firefighter and arrives at a burning house with the crew.",
            "unrolls the hose and sprays water on the flames.",
        ),
        (
            "A mail carrier at work",
            "{n} works as a mail carrier and fills the bag with letters.",
            "walks down the street and drops letters into each mailbox.",
        ),
        (
            "A pilot at work",
            "{n} works as a pilot and sits down in the cockpit.",
            "checks the instruments and flies the plane into the sky.",
        ),
        (
            "A teacher at work",
            "{n} works as a teacher and walks into the classroom.",
            "writes the lesson on the board and explains it to the students.",
        ),
        (
            "A nurse at work",
            "{n} works as a nurse and visits a patient's bed.",
            "checks the patient's temperature and writes it on the chart.",
        ),
        (
            "A farmer at work",
            "{n} works as a farmer and drives the tractor into the field.",
            "plows the soil in long rows for planting.",
        ),
        (
            "A chef at work",
            "{n} works as a chef and takes a fresh fish out of the fridge.",
            "fries the fish and arranges it on a plate.",
        ),
        (
            "A bus driver at work",
            "{n} works as a bus driver and stops at the corner.",
            "opens the doors and lets the passengers on.",
        ),
        (
            "A carpenter at work",
            "{n} works as a carpenter and measures a long plank.",
            "saws the plank in two and sands the edges.",
        ),
        (
            "A plumber at work",
            "{n} works as a plumber and looks at the leaking pipe under the sink.",
            "tightens the joint with a wrench until the leak stops.",
        ),
        (
            "A police officer at work",
            "{n} works as a police officer and stands at a busy crossing.",
            "blows a whistle and directs the traffic.",
        ),
        (
            "A librarian at work",
            "{n} works as a librarian and finds a cart of returned books.",
            "puts each book back on the right shelf.",
        ),
        (
            "A zookeeper at work",
            "{n} works as a zookeeper and carries a bucket of fish to the penguin pool.",
            "throws the fish one by one to the hungry penguins.",
        ),
        (
            "A gardener at work",
            "{n} works as a gardener and looks at the overgrown hedge.",
            "trims the hedge with large shears.",
        ),
        (
            "A cashier at work",
            "{n} works as a cashier and a customer brings a basket to the till.",
            "scans each item and tells the customer the total.",
        ),
        (
            "A waiter at work",
            "{n} works as a waiter and sees a couple sit down.",
            "brings them menus and two glasses of water.",
        ),
        (
            "A mechanic at work",
            "{n} works as a mechanic and raises a car on the lift.",
            "drains the old oil and fills the engine with new oil.",
        ),
        (
            "A lifeguard at work",
            "{n} works as a lifeguard and sees a swimmer waving for help.",
            "dives into the water and pulls the swimmer to shore.",
        ),
        (
            "A tailor at work",
            "{n} works as a tailor and measures a customer for a suit.",
            "cuts the fabric and sews the jacket.",
        ),
        (
            "A beekeeper at work",
            "{n} works as a beekeeper and puts on a veil and gloves.",
            "lifts a frame out of the hive and collects the honey.",
        ),
        (
            "An electrician at work",
            "{n} works as an electrician and kneels by a broken wall socket with the power off.",
            "replaces the socket and tests it with a lamp.",
        ),
        (
            "A pizza maker at work",
            "{n} works in a pizza shop and stretches a ball of dough.",
            "spreads tomato sauce and cheese on top and slides it into the oven.",
        ),
        (
            "A taxi driver at work",
            "{n} drives a taxi and a passenger gets into the back seat.",
            "asks where to go and drives to the address.",
        ),
        (
            "A journalist at work",
            "{n} works as a journalist and interviews the mayor.",
            "writes down the answers and types up the story.",
        ),
        (
            "A shepherd at work",
            "{n} works as a shepherd and opens the gate of the field.",
            "guides the sheep out to the hill with a dog.",
        ),
        (
            "A florist at work",
            "{n} works as a florist and picks out roses and tulips.",
            "arranges them in a bouquet and wraps it in paper.",
        ),
        (
            "A builder at work",
            "{n} works as a builder and mixes a batch of cement.",
            "lays the bricks in a row and spreads cement between them.",
        ),
    ),
    "situations": (
        (
            "A rainy morning",
            "{n} looks out at the heavy rain before leaving for school.",
            "puts on a raincoat and rubber boots.",
        ),
        (
            "A snowy morning",
            "{n} sees that the car is covered in snow.",
            "brushes the snow off the windshield before driving.",
        ),
        (
            "A hot afternoon",
            "{n} comes inside, sweating from the summer heat.",
            "turns on the fan and drinks a glass of cold water.",
        ),
        ("A cold night", "{n} shivers in bed on a freezing night.", "pulls an extra blanket over the bed."),
        ("A ringing phone", "{n} hears the phone ringing in the other room.", "hurries over and answers the call."),
        (
            "A knock at the door",
            "{n} hears someone knocking at the front door.",
            "walks over and opens the door to see who it is.",
        ),
        (
            "A spilled drink",
            "{n} knocks over a glass of juice on the table.",
            "grabs a paper towel and wipes up the juice.",
        ),
        ("A crying baby", "{n} hears the baby crying in the crib.", "picks the baby up and rocks it gently."),
        (
            "A missed bus",
            "{n} reaches the stop just as the bus drives away.",
            "checks the timetable and waits for the next one.",
        ),
        ("An alarm clock", "{n} is woken by the alarm clock at seven.", "switches off the alarm and gets out of bed."),
        (
            "A scraped knee",
            "{n}'s child falls off the swing and scrapes a knee.",
            "cleans the cut and covers it with a bandage.",
        ),
        ("A dark room", "{n} walks into a dark room.", "flips the light switch by the door."),
        (
            "A full trash can",
            "{n} notices that the kitchen trash can is full.",
            "ties up the bag and takes it out to the bin.",
        ),
        (
            "A messy room",
            "{n} looks at the toys all over the bedroom floor.",
            "picks up the toys and puts them back in the box.",
        ),
        (
            "An empty fridge",
            "{n} opens the fridge and sees that it is nearly empty.",
            "writes a shopping list and drives to the store.",
        ),
        (
            "A stuck door",
            "{n} pushes on the door but it will not open.",
            "pulls the handle instead and the door swings open.",
        ),
        (
            "A lost key",
            "{n} cannot find the house key in any pocket.",
            "searches the bag and finds the key at the bottom.",
        ),
        (
            "A muddy dog",
            "{n}'s dog comes back from the walk covered in mud.",
            "puts the dog in the bathtub and washes off the mud.",
        ),
        (
            "A long line",
            "{n} sees a long line at the ticket counter.",
            "joins the end of the line and waits for a turn.",
        ),
        (
            "A sunburn",
            "{n} notices red, painful skin after a long day at the beach.",
            "rubs soothing lotion on the sunburn.",
        ),
        (
            "A hiccup fit",
            "{n} cannot stop hiccuping during dinner.",
            "holds a breath and slowly sips a glass of water.",
        ),
        (
            "A headache",
            "{n} has a headache after staring at the screen all day.",
            "takes a break and rests the eyes in a quiet room.",
        ),
        ("A sleepy evening", "{n} yawns at the end of a long day.", "changes into pajamas and goes to bed."),
    ),
}
_CONTINUATION = {"tools": _THEN, "places": _THEN, "jobs": _THEN, "situations": _SO}
_FAMILY_OF: tuple[str, ...] = ("activities",) * len(_FIRST_ACTIVITIES) + tuple(
    f for f, rows in _MORE_ACTIVITIES.items() for _ in rows
)
# Every activity, the original ones first: label -> its one right ending.
_ACTIVITIES: tuple[tuple[str, str, str, str], ...] = _FIRST_ACTIVITIES + tuple(
    (label, ctx_a, _CONTINUATION[f], ending) for f, rows in _MORE_ACTIVITIES.items() for label, ctx_a, ending in rows
)
MORE_HELLASWAG_VARIANTS = 4  # items per added activity: other people, other wrong endings


def _round_robin(groups: Sequence[Sequence[T]]) -> list[T]:
    """One of each group in turn (first of each, then second of each, ...), so any prefix mixes the groups."""
    return [g[i] for i in range(max(map(len, groups), default=0)) for g in groups if i < len(g)]


def _hellaswag_more(rng: random.Random, start: int) -> list[dict[str, Any]]:
    """The added families' items, round by round (each round has every added activity once, the families
    taking turns), so a limit keeps the activities distinct and the families mixed for as long as it can."""
    by_family: dict[str, list[int]] = {}
    for k in range(len(_FIRST_ACTIVITIES), len(_ACTIVITIES)):
        by_family.setdefault(_FAMILY_OF[k], []).append(k)
    order = _round_robin(list(by_family.values()))
    items: list[dict[str, Any]] = []
    for v in range(MORE_HELLASWAG_VARIANTS):
        for k in order:
            label, ctx_a, ctx_b, ending = _ACTIVITIES[k]
            name, pron = _PEOPLE[(k + 3 * v) % len(_PEOPLE)]
            pool = [j for j in range(len(_ACTIVITIES)) if _FAMILY_OF[j] != _FAMILY_OF[k]]
            endings = [_ACTIVITIES[j][3] for j in rng.sample(pool, 3)]
            gold = rng.randrange(4)
            endings.insert(gold, ending)
            a, b = ctx_a.format(n=name, p=pron), ctx_b.format(n=name, p=pron)
            items.append(
                {
                    "ind": start + len(items),
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
    "solid": ("iron", "a rock", "a wooden block", "an iron nail", "a brick", "a glass marble"),
    "liquid": ("water", "milk", "orange juice", "olive oil", "vinegar", "honey"),
    "gas": ("propane", "oxygen", "helium", "carbon dioxide", "the air in a balloon", "nitrogen"),
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


def _arc(
    rng: random.Random, rows: Sequence[tuple[str, str, list[str]]], prefix: str, start: int = 0
) -> list[dict[str, Any]]:
    items = []
    for i, (question, answer, wrong) in enumerate(rows, start):
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


# The added ARC families: each row is a checkable fact (a table entry, or a number computed from the question).
_MORE_ANIMALS = {
    "mammal": (
        "giraffe",
        "kangaroo",
        "bear",
        "wolf",
        "fox",
        "monkey",
        "zebra",
        "camel",
        "deer",
        "goat",
        "pig",
        "squirrel",
        "hippopotamus",
        "cheetah",
    ),
    "bird": (
        "crow",
        "flamingo",
        "peacock",
        "hawk",
        "pelican",
        "seagull",
        "hummingbird",
        "woodpecker",
        "goose",
        "chicken",
        "turkey",
    ),
    "fish": ("catfish", "mackerel", "sardine", "swordfish", "haddock", "perch", "pike", "anchovy"),
    "reptile": ("gecko", "chameleon", "cobra", "python", "tortoise", "rattlesnake", "komodo dragon"),
    "insect": ("wasp", "dragonfly", "cricket", "termite", "moth", "flea", "cockroach", "firefly"),
    "amphibian": ("axolotl", "bullfrog", "tree frog", "caecilian"),
}
_ELEMENTS = (
    ("hydrogen", "H"),
    ("helium", "He"),
    ("lithium", "Li"),
    ("carbon", "C"),
    ("nitrogen", "N"),
    ("oxygen", "O"),
    ("fluorine", "F"),
    ("neon", "Ne"),
    ("sodium", "Na"),
    ("magnesium", "Mg"),
    ("aluminum", "Al"),
    ("silicon", "Si"),
    ("phosphorus", "P"),
    ("sulfur", "S"),
    ("chlorine", "Cl"),
    ("argon", "Ar"),
    ("potassium", "K"),
    ("calcium", "Ca"),
    ("iron", "Fe"),
    ("copper", "Cu"),
    ("zinc", "Zn"),
    ("silver", "Ag"),
    ("gold", "Au"),
    ("mercury", "Hg"),
    ("lead", "Pb"),
    ("tin", "Sn"),
    ("iodine", "I"),
    ("nickel", "Ni"),
    ("uranium", "U"),
    ("platinum", "Pt"),
)
# (larger unit, smaller unit in the plural, how many of the smaller make one larger)
_CONVERSIONS = (
    ("meter", "centimeters", 100),
    ("meter", "millimeters", 1000),
    ("kilometer", "meters", 1000),
    ("kilogram", "grams", 1000),
    ("liter", "milliliters", 1000),
    ("hour", "minutes", 60),
    ("minute", "seconds", 60),
    ("day", "hours", 24),
    ("week", "days", 7),
    ("year", "months", 12),
)
_YOUNG = (
    ("cat", "kitten"),
    ("dog", "puppy"),
    ("cow", "calf"),
    ("horse", "foal"),
    ("sheep", "lamb"),
    ("pig", "piglet"),
    ("duck", "duckling"),
    ("frog", "tadpole"),
    ("kangaroo", "joey"),
    ("deer", "fawn"),
    ("goat", "kid"),
    ("chicken", "chick"),
    ("goose", "gosling"),
    ("swan", "cygnet"),
    ("bear", "cub"),
)
_PLANETS = ("Mercury", "Venus", "Earth", "Mars", "Jupiter", "Saturn", "Uranus", "Neptune")
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")
_POLYGONS = (
    ("triangle", 3),
    ("square", 4),
    ("pentagon", 5),
    ("hexagon", 6),
    ("heptagon", 7),
    ("octagon", 8),
    ("nonagon", 9),
    ("decagon", 10),
)


def _an(word: str) -> str:
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"


def _numeric(answer: int, candidates: Sequence[int], unit: str) -> tuple[str, list[str]]:
    """An answer and its wrong answers as "N unit": the candidates that are positive and not the answer."""
    wrong = sorted({c for c in candidates if c > 0 and c != answer})
    return f"{answer} {unit}".rstrip(), [f"{c} {unit}".rstrip() for c in wrong]


ArcRow = tuple[str, str, list[str]]


def _more_arc_rows() -> dict[str, list[ArcRow]]:
    """The added questions by family (question, answer, wrong answers to pick three from)."""
    fam: dict[str, list[ArcRow]] = {}
    classes = {c: _ANIMAL_CLASSES[c] + _MORE_ANIMALS[c] for c in _ANIMAL_CLASSES}
    fam["animal classes"] = [
        (f"Which of these animals is {_an(cls)}?", a, [x for c, xs in classes.items() if c != cls for x in xs])
        for cls, animals in _MORE_ANIMALS.items()
        for a in animals
    ]
    fam["animal classes"] += [
        (f"What kind of animal is {_an(a)}?", _an(cls), [_an(c) for c in classes if c != cls])
        for cls, animals in classes.items()
        for a in animals
    ]
    fam["units"] = [
        (f"The {unit} is a unit of which quantity?", qty, [q for q, _ in _UNITS if q != qty]) for qty, unit in _UNITS
    ]
    fam["states of matter"] = [
        (
            f"What state of matter is {thing} at room temperature?",
            state,
            [s for s in _STATES if s != state] + ["plasma"],
        )
        for state, things in _STATES.items()
        for thing in things
    ]
    fam["chemical symbols"] = [
        (f"What is the chemical symbol for {el}?", sym, [s for _, s in _ELEMENTS if s != sym]) for el, sym in _ELEMENTS
    ]
    fam["chemical symbols"] += [
        (f"Which element has the chemical symbol {sym}?", el, [e for e, _ in _ELEMENTS if e != el])
        for el, sym in _ELEMENTS
    ]
    factors = sorted({f for _, _, f in _CONVERSIONS})
    fam["unit conversions"] = [
        (
            f"How many {small} are in {k} {big}s?",
            *_numeric(k * f, [k * g for g in factors] + [k + f, f * (k + 1)], ""),
        )
        for big, small, f in _CONVERSIONS
        for k in range(2, 10)
    ]
    fam["speed"] = [
        (
            f"A car travels {v * t} kilometers in {t} hours at a steady speed. What is its speed?",
            *_numeric(v, [v * t * t, v * t + t, v * t - t, v * t], "kilometers per hour"),
        )
        for v in range(20, 100, 10)
        for t in range(2, 8)
    ]
    fam["force"] = [
        (
            f"What force is needed to accelerate a {m}-kilogram cart at {a} meters per second squared?",
            *_numeric(m * a, [m + a, m, a, m * a * 2, m * a * 10], "newtons"),
        )
        for m in (2, 3, 4, 5, 6, 8, 10, 12)
        for a in (2, 3, 4, 5, 6)
    ]
    fam["electric circuits"] = [
        (
            f"A current of {i} amperes flows through a {r}-ohm resistor. What is the voltage across the resistor?",
            *_numeric(i * r, [i + r, r, i, i * r * 2, i * r * 10], "volts"),
        )
        for i in (2, 3, 4, 5)
        for r in (3, 5, 10, 12, 20, 30, 50, 100)
    ]
    fam["work"] = [
        (
            f"How much work is done when a force of {f} newtons pushes a box {d} meters?",
            *_numeric(f * d, [f + d, f, d, f * d * 2, f * d * 10], "joules"),
        )
        for f in (5, 10, 20, 25, 50)
        for d in (2, 3, 4, 6)
    ]
    fam["young animals"] = [
        (f"What is a young {animal} called?", _an(young), [_an(y) for _, y in _YOUNG if y != young])
        for animal, young in _YOUNG
    ]
    fam["planets"] = [
        (f"Which planet is {_ORDINALS[i]} from the Sun?", p, [q for q in _PLANETS if q != p])
        for i, p in enumerate(_PLANETS)
        if i > 0
    ]
    fam["planets"] += [
        (
            f"Which planet comes right after {p} in order from the Sun?",
            _PLANETS[i + 1],
            [q for q in _PLANETS if q != _PLANETS[i + 1]],
        )
        for i, p in enumerate(_PLANETS[:-1])
    ]
    fam["shapes"] = [
        (f"How many sides does {_an(shape)} have?", str(n), [str(m) for _, m in _POLYGONS if m != n])
        for shape, n in _POLYGONS
    ]
    return fam


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


def _gsm_item_more(rng: random.Random) -> dict[str, str]:
    """The added problems: the original kinds half of the time, two-step kinds otherwise."""
    if rng.random() < 0.5:
        return _gsm_item(rng)
    name, pron = rng.choice(_PEOPLE)
    thing = rng.choice(_THINGS)
    kind = rng.choice(("packs", "change", "pages", "two_gifts", "half"))
    if kind == "packs":
        a, b, c = rng.randint(2, 9), rng.randint(3, 12), rng.randint(1, 9)
        q = (
            f"{name} buys {a} packs of {thing} with {b} {thing} in each pack, and {c} loose {thing}. "
            f"How many {thing} does {name} have?"
        )
        steps = [f"The packs hold {a} * {b} = {a * b} {thing}.", f"With the loose ones, {a * b} + {c} = {a * b + c}."]
        ans = a * b + c
    elif kind == "change":
        price, n = rng.randint(2, 9), rng.randint(2, 6)
        bill = next(x for x in (20, 50, 100) if x > price * n)
        q = (
            f"{thing.capitalize()} cost {price} dollars each. {name} buys {n} of them and pays with a {bill}-dollar "
            f"bill. How many dollars of change does {name} get?"
        )
        steps = [
            f"{n} {thing} cost {n} * {price} = {n * price} dollars.",
            f"The change is {bill} - {n * price} = {bill - n * price} dollars.",
        ]
        ans = bill - n * price
    elif kind == "pages":
        r, d, e = rng.randint(5, 30), rng.randint(2, 7), rng.randint(3, 40)
        q = (
            f"{name} reads {r} pages of a book every day for {d} days, and then {e} more pages on Sunday. "
            f"How many pages does {name} read in all?"
        )
        steps = [f"In {d} days {pron} reads {r} * {d} = {r * d} pages.", f"In all, {r * d} + {e} = {r * d + e} pages."]
        ans = r * d + e
    elif kind == "two_gifts":
        b, c = rng.randint(2, 20), rng.randint(2, 20)
        a = rng.randint(b + c + 1, b + c + 40)
        q = (
            f"{name} has {a} {thing}. {pron.capitalize()} gives {b} to a brother and {c} to a sister. "
            f"How many {thing} does {name} have left?"
        )
        steps = [
            f"After the brother, {a} - {b} = {a - b} {thing}.",
            f"After the sister, {a - b} - {c} = {a - b - c} {thing}.",
        ]
        ans = a - b - c
    else:
        h, b = rng.randint(3, 30), rng.randint(2, 25)
        a = 2 * h
        q = (
            f"{name} has {a} {thing} and gives half of them to a friend. Then {pron} buys {b} more. "
            f"How many {thing} does {name} have now?"
        )
        steps = [f"Half of {a} is {a} / 2 = {h} {thing}.", f"Then {h} + {b} = {h + b} {thing}."]
        ans = h + b
    return {"question": q, "answer": " ".join(steps) + f"\n#### {ans}"}


def _gsm_more(rng: random.Random, n: int, seen: set[str]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    while len(out) < n:
        item = _gsm_item_more(rng)
        if item["question"] not in seen:
            seen.add(item["question"])
            out.append(item)
    return out


# Evaluated items per task (at least 500 each, so a 3-point non-inferiority bound on paired differences
# can be decided for a real model). The original items come first in every task, unchanged, so a
# study's limit of at most 126 (hellaswag), 105 (arc) or 128 (gsm) items evaluates what it did before.
GSM_TEST_ITEMS = 600


def _build() -> tuple[dict[str, dict[str, list[dict[str, Any]]]], dict[str, list[str]]]:
    """Every task's splits, and the family of each evaluated item (task -> one name per item, in order)."""
    rng = random.Random(SEED)
    arc_rows = _arc_rows()
    # A fixed sixth of the original questions is the few-shot pool, the rest the evaluated split.
    arc_train = [r for i, r in enumerate(arc_rows) if i % 6 == 5]
    arc_test = [r for i, r in enumerate(arc_rows) if i % 6 != 5]
    gsm = _gsm(rng, 160)
    hs_val = _hellaswag(rng, 126, 0)
    hs_train = _hellaswag(rng, 24, 5)
    arc_test_items = _arc(rng, arc_test, "test")
    arc_train_items = _arc(rng, arc_train, "train")
    # The added items come from a generator of their own, so the original ones stay as they were.
    more = random.Random(SEED + 1)
    hs_more = _hellaswag_more(more, len(hs_val))
    arc_families = _more_arc_rows()
    arc_more = _arc(more, _round_robin(list(arc_families.values())), "test", len(arc_test_items))
    gsm_more = _gsm_more(more, GSM_TEST_ITEMS - 128, {it["question"] for it in gsm})
    data = {
        "worthit_hellaswag": {"validation": hs_val + hs_more, "train": hs_train},
        "worthit_arc": {"test": arc_test_items + arc_more, "train": arc_train_items},
        "worthit_gsm": {"test": gsm[:128] + gsm_more, "train": gsm[128:]},
    }
    families = {
        "worthit_hellaswag": ["activities"] * len(hs_val) + [_FAMILY_OF[int(it["source_id"][8:])] for it in hs_more],
        "worthit_arc": ["science facts"] * len(arc_test_items)
        + _round_robin([[f] * len(rows) for f, rows in arc_families.items()]),
        "worthit_gsm": ["one- and two-step problems"] * 128 + ["more two-step problems"] * len(gsm_more),
    }
    return data, families


def generate() -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Every task's splits (task -> split -> rows), the same on every call and every machine."""
    return _build()[0]


def families(task: str, limit: int | None = None) -> dict[str, int]:
    """How many of the first ``limit`` evaluated items (all when None) of ``task`` each family holds: what
    an accuracy figure on a worthit task was measured on."""
    if task not in TASKS:
        raise KeyError(f"{task!r} is not one of worthit's offline tasks {TASKS}")
    counts: dict[str, int] = {}
    for f in _build()[1][task][:limit]:
        counts[f] = counts.get(f, 0) + 1
    return counts


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
  version: 2.0
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
  version: 2.0
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
  version: 2.0
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
