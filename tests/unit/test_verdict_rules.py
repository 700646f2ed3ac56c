"""Each rule of the verdict checked on inputs of its own, away from the KB the issue read.

A kitchen-gear KB of my own (knives, pans, boards), read by `chunk_vocabulary` as any KB is:
at least ten inputs per rule that decides what a user reads, the true beside the false.
"""

from __future__ import annotations

import functools

import pytest

from collective.kb.names import chunk_vocabulary
from collective.kb.store import Chunk
from collective.verdict.agreement import (
    NO_ANSWER,
    Asked,
    check_answer,
    decide,
    not_held,
)
from collective.verdict.lines import direct_answer, readable, said_once, unlabelled, wanted_lines
from collective.verdict.support import check_claims, shown_whole

CHUNKS = [
    Chunk(f"mem_{key}", text, f"kitchen/{heading.split(' > ')[0]}.md", heading=heading)
    for key, heading, text in [
        ("cs_care", "carbon steel knife > Care",
         "Carbon steel knives rust quickly unless dried and oiled; they are not dishwasher safe."),
        ("cs_edge", "carbon steel knife > Sharpening",
         "A carbon steel knife takes a keen edge and sharpens easily at 15-20 degrees."),
        ("ceramic", "ceramic knife > Properties",
         "A ceramic knife stays sharp longer than steel but chips easily when dropped; it is "
         "unsuitable for prying."),
        ("ci_heat", "cast iron pan > Heat",
         "A cast iron pan heats slowly and unevenly but holds heat well; its seasoning smokes "
         "above about 230 °C."),
        ("ci_weight", "cast iron pan > Weight", "A 26 cm cast iron pan weighs about 2.5-3.2 kg."),
        ("ci_uses", "cast iron pan > Uses",
         "A cast iron pan suits searing, baking cornbread and frying."),
        ("ci_store", "cast iron pan > Storage",
         "Outdoor storage of cast iron pans: poor: it rusts if left damp."),
        ("ss_clean", "stainless pan > Cleaning",
         "A stainless pan is dishwasher safe and does not react with acidic sauces."),
        ("ns_limits", "nonstick pan > Limits",
         "A nonstick pan's coating degrades above 260 °C and scratches under metal utensils."),
        ("cu_heat", "copper pan > Conductivity",
         "A copper pan conducts heat far better than a stainless pan; it reacts with acids "
         "unless lined with tin."),
        ("bamboo", "bamboo board > Care",
         "A bamboo board resists knife scarring better than maple but dulls blades faster."),
        ("mat", "silicone mat > Limits", "A silicone mat is rated to 250 °C, density 1.15 g/cm3."),
        ("enamel", "enamel pot > Durability", "Durability of enamel pots: not chip resistant."),
        ("timer", "egg timer > Settings",
         "Soft-boiled eggs take 6-7 minutes; hard-boiled eggs take 9-12 minutes."),
    ]
]  # fmt: skip
BY_ID = {c.id: c for c in CHUNKS}
SHOWN = shown_whole(BY_ID)


@functools.cache
def vocabulary():
    return chunk_vocabulary(CHUNKS)


def status(claim: str, cited: str) -> str:
    claims = check_claims(f"{claim} [KB#mem_{cited}].", SHOWN, vocabulary=vocabulary())
    return "dropped" if any(c.status == "dropped" for c in claims) else claims[0].status


FALSE = [
    # a word the chunk does not hold: an antonym, an opposite, an item added
    ("Carbon steel knives resist rust", "cs_care"),
    ("A carbon steel knife sharpens with difficulty", "cs_edge"),
    ("A ceramic knife is tough when dropped", "ceramic"),
    ("A cast iron pan heats quickly and evenly", "ci_heat"),
    ("A cast iron pan suits searing, frying and boiling pasta", "ci_uses"),
    ("A nonstick pan's coating resists metal utensils", "ns_limits"),
    ("A bamboo board keeps blades sharp", "bamboo"),
    ("A stainless pan reacts with acidic sauces and tomatoes", "ss_clean"),
    # negation: "un-"/"not" read either way, and a label's words are no statement
    ("A ceramic knife is suitable for prying", "ceramic"),
    ("Carbon steel knives are dishwasher safe", "cs_care"),
    ("Durability of enamel pots: chip resistant", "enamel"),
    ("Enamel pots are chip resistant", "enamel"),
    ("Outdoor storage of cast iron pans: good", "ci_store"),
    # comparatives and superlatives turned round; the thing after "than"/"like" changed
    ("A ceramic knife stays sharp shorter than steel", "ceramic"),
    ("A copper pan conducts heat worse than a stainless pan", "cu_heat"),
    ("A bamboo board resists knife scarring worse than maple", "bamboo"),
    ("A bamboo board resists knife scarring better than glass", "bamboo"),
    ("A copper pan conducts heat far better than a cast iron pan", "cu_heat"),
    ("A ceramic knife stays sharp longest of all knives", "ceramic"),
    # numbers: glued units, a range's width, rounding
    ("A nonstick pan's coating degrades above 200C", "ns_limits"),
    ("A silicone mat is rated to 300C", "mat"),
    ("Hard-boiled eggs take 3 minutes", "timer"),  # the width of 9-12
    ("A cast iron pan weighs about 0.7 kg", "ci_weight"),  # the width of 2.5-3.2
    ("A silicone mat has a density of about 1.3 g/cm3", "mat"),
    ("A silicone mat has a density of about 1300 kg/m3", "mat"),
    # a thing with no document of its own, as another's subject
    ("A wok heats slowly and unevenly but holds heat well", "ci_heat"),
    ("Santoku knives rust quickly unless dried and oiled", "cs_care"),
    ("Teflon coatings degrade above 260 °C", "ns_limits"),
    ("A granite pan weighs about 2.5-3.2 kg", "ci_weight"),
    # a decision is checked like any line
    ("Decision: a nonstick pan, it handles 300 °C", "ns_limits"),
    ("Decision: the ceramic knife, it is good for prying", "ceramic"),
]

TRUE = [
    ("Carbon steel knives rust quickly unless dried and oiled", "cs_care"),
    ("Carbon steel knives are not dishwasher safe", "cs_care"),
    ("A ceramic knife is not suitable for prying", "ceramic"),
    ("Enamel pots are not chip resistant", "enamel"),
    ("A ceramic knife stays sharp longer than steel", "ceramic"),
    ("A copper pan conducts heat far better than a stainless pan", "cu_heat"),
    ("A bamboo board resists knife scarring better than maple", "bamboo"),
    ("A cast iron pan suits searing and frying", "ci_uses"),
    ("A nonstick pan's coating degrades above 260C", "ns_limits"),
    ("A nonstick pan's coating degrades above 500 °F", "ns_limits"),
    ("A silicone mat is rated to 250 C", "mat"),
    ("A silicone mat has a density of about 1.2 g/cm3", "mat"),
    ("A silicone mat has a density of about 1150 kg/m3", "mat"),
    ("Hard-boiled eggs take 10 minutes", "timer"),
    ("A cast iron pan weighs about 3 kg", "ci_weight"),
    ("Decision: a cast iron pan, it suits searing", "ci_uses"),
    ("It takes a keen edge and sharpens easily at 15-20 degrees", "cs_edge"),
]


@pytest.mark.parametrize(("claim", "cited"), FALSE)
def test_false_claims_are_dropped(claim: str, cited: str) -> None:
    assert status(claim, cited) == "dropped"


@pytest.mark.parametrize(("claim", "cited"), TRUE)
def test_true_claims_stand(claim: str, cited: str) -> None:
    assert status(claim, cited) == "supported"


@pytest.mark.parametrize(
    ("question", "unknown"),
    [
        ("What is the smoke point of Crisco shortening?", ("Crisco",)),
        ("How heavy is a Staub Dutch oven?", ("Staub", "Dutch")),
        ("Does the Le Creuset pot chip?", ("Le", "Creuset")),
        ("What is the density of a wok?", ("wok",)),
        ("What temperature is a silicone mat rated to?", ()),
        ("How heavy is a cast iron pan?", ()),
        ("Which knife stays sharp longest?", ()),
        ("Is a carbon steel knife dishwasher safe?", ()),
        ("How long do I boil an egg for a soft yolk?", ()),
        ("What is the density of a silicone mat?", ()),
        ("Which pan for searing a steak?", ()),
        ("What does a KitchenAid mixer weigh?", ("KitchenAid",)),
        # a name the KB lacks is asked about where it is listed or compared with what is asked
        # about; beside a thing the KB holds, or in "which <kind>", it is context
        ("On my Wolf range, which pan holds heat best?", ()),
        ("Question 3 on t1: which pan for searing a steak?", ()),
        ("I cook on a Bosch hob: is a cast iron pan too heavy?", ()),
        ("For a Thermomix owner, which mat is rated hottest?", ()),
        ("Is a copper pan better than a Mauviel pan?", ("Mauviel",)),
        ("Which heats more evenly, a cast iron pan or a Staub cocotte?", ("Staub",)),
        ("Which stays sharp longer, a ceramic knife or a Shun?", ("Shun",)),
        ("Which board dulls blades less, Epicurean or Boos?", ("Epicurean", "Boos")),
        ("Compare a stainless pan and a Demeyere pan.", ("Demeyere",)),
        ("Which is dishwasher safe: a stainless pan, a carbon steel knife or a Global knife?",
         ("Global",)),
        ("Is a Le Creuset pot heavier than a cast iron pan?", ("Le", "Creuset")),
        ("Does a Lodge cast iron pan rust if left damp?", ()),
        ("Is my Zwilling pot chip resistant?", ("Zwilling",)),
        # a property of a thing no chunk shown names, written in lower case
        ("How dense is wenge?", ("wenge",)),
        ("What temperature is teflon rated to?", ("teflon",)),
        ("What is the density of a silicone mat?", ()),
        # "what <property>" asks no kind of thing: the name is what it asks about
        ("What temperature does Inconel melt at?", ("Inconel",)),
        ("What weight is a Lodge skillet?", ("Lodge",)),
        ("Which knife should a Wusthof owner sharpen at 15 degrees?", ()),
    ],
)  # fmt: skip
def test_a_question_on_a_thing_no_chunk_is_about_is_read_as_such(question, unknown) -> None:
    assert Asked.read(question, vocabulary(), SHOWN.values()).unknown == unknown


def answer(who: str, text: str, confidence: float | None = None):
    return check_answer(who, text, SHOWN, vocabulary=vocabulary(), confidence=confidence)


CI_USES = "A cast iron pan suits searing, baking cornbread and frying [KB#mem_ci_uses]."
SS = "A stainless pan is dishwasher safe [KB#mem_ss_clean]."
CU = "A copper pan conducts heat far better than a stainless pan [KB#mem_cu_heat]."
WRONG = "A cast iron pan suits boiling pasta [KB#mem_ci_uses]."


@pytest.mark.parametrize(
    ("answers", "stands"),
    [
        ([CI_USES, SS, CI_USES], "judge"),  # the judge with the majority
        ([SS, CI_USES, CI_USES], "s1"),  # two samples outvote the judge
        ([WRONG, SS, SS], "s1"),  # the judge's claim dropped: no vote
        ([CI_USES, CU, CU], "s1"),
        ([CI_USES, WRONG, WRONG, SS], None),  # one against one: a split
        ([CU, SS], None),
        ([CI_USES, CI_USES, SS, SS], None),
        ([WRONG, WRONG], "none"),  # nothing supported
        ([CI_USES], "judge"),
        ([SS, CI_USES, CU, CI_USES], "s1"),
    ],
)
def test_the_answer_most_give_among_the_supported_stands(answers, stands) -> None:
    checked = [answer("judge" if n == 0 else f"s{n}", a) for n, a in enumerate(answers)]
    decision = decide(Asked("Which pan should I buy?"), checked, vocabulary())
    if stands is None:
        assert decision.stands is None and len(decision.split) == 2
        assert decision.text.startswith("The answers split evenly")
    elif stands == "none":
        assert decision.stands is not None
        assert decision.stands.text.startswith("The knowledge base does not answer")
    else:
        assert decision.stands is not None and decision.stands.who == stands


def test_confidence_weighs_the_vote() -> None:
    sure, unsure = answer("judge", SS, 0.9), answer("s1", CI_USES, 0.3)
    also = answer("s2", CI_USES, 0.4)
    decision = decide(Asked("Which pan should I buy?"), [sure, unsure, also], vocabulary())
    assert decision.stands is not None and decision.stands.who == "judge"  # 0.9 against 0.7
    even = decide(Asked("Which pan should I buy?"), [sure, unsure, answer("s2", CI_USES, 0.6)],
                  vocabulary())  # fmt: skip
    assert even.stands is None  # 0.9 against 0.9: a split


def test_an_answer_about_another_thing_than_the_one_asked_never_wins() -> None:
    asked = Asked.read("How heavy is a cast iron pan?", vocabulary(), SHOWN.values())
    off = answer("judge", "A silicone mat is rated to 250 °C [KB#mem_mat].")
    on = answer("s1", "A 26 cm cast iron pan weighs about 2.5-3.2 kg [KB#mem_ci_weight].")
    decision = decide(asked, [off, off, on], vocabulary())
    assert decision.stands is not None and decision.stands.who == "s1"
    assert len(decision.off_question) == 2
    unknown = Asked.read("How heavy is a Staub Dutch oven?", vocabulary(), SHOWN.values())
    decision = decide(unknown, [on, on], vocabulary())
    assert decision.stands is not None
    assert decision.stands.text == not_held(["Staub", "Dutch"])


BIKE = [
    Chunk(f"mem_{key}", text, f"bike/{heading.split(' > ')[0]}.md", heading=heading)
    for key, heading, text in [
        ("chain_wear", "steel chain > Wear",
         "A steel chain wears faster than a titanium cog and should be replaced every "
         "3000-5000 km."),
        ("chain_lube", "steel chain > Lubrication",
         "A steel chain runs best with wax lube; it rusts if left wet."),
        ("cog", "titanium cog > Weight",
         "A titanium cog weighs about 40 % less than a steel chainring."),
        ("ring", "steel chainring > Durability",
         "A steel chainring outlasts an aluminium chainring several times."),
        ("alu", "aluminium chainring > Wear",
         "An aluminium chainring is light but wears quickly with a steel chain."),
        ("tube", "butyl inner tube > Punctures",
         "A butyl inner tube punctures more easily than a tubeless tyre but is cheap to replace."),
        ("tubeless", "tubeless tyre > Sealant",
         "A tubeless tyre needs 30-60 ml of sealant, topped up every 2-6 months."),
        ("disc", "disc brake > Wet weather",
         "A disc brake stops well in the wet, unlike a rim brake."),
        ("rim", "rim brake > Wear", "A rim brake wears the rim; its pads last 1000-2000 km."),
    ]
]  # fmt: skip


@pytest.mark.parametrize(
    ("question", "text", "things"),
    [
        # of one thing, a thing named in passing in the chunk cited is no part of the answer
        ("How often should I replace a steel chain?",
         "A steel chain wears faster than a titanium cog [KB#mem_chain_wear].", {"steel chain"}),
        ("Is a titanium cog light?",
         "A titanium cog weighs about 40 % less than a steel chainring [KB#mem_cog].",
         {"titanium cog"}),
        ("How long does a steel chainring last?",
         "A steel chainring outlasts an aluminium chainring several times [KB#mem_ring].",
         {"steel chainring"}),
        ("Is an aluminium chainring durable?",
         "An aluminium chainring is light but wears quickly with a steel chain [KB#mem_alu].",
         {"aluminium chainring"}),
        ("Does a butyl inner tube puncture easily?",
         "A butyl inner tube punctures more easily than a tubeless tyre [KB#mem_tube].",
         {"butyl inner tube"}),
        ("Does a disc brake work in the rain?",
         "A disc brake stops well in the wet, unlike a rim brake [KB#mem_disc].", {"disc brake"}),
        ("Does a steel chain rust?",
         "A steel chain runs best with wax lube; it rusts if left wet [KB#mem_chain_lube].",
         {"steel chain"}),
        # the other thing's own chunk cited: the answer is about it too
        ("Is an aluminium chainring durable?",
         "A steel chainring outlasts an aluminium chainring several times [KB#mem_ring].",
         {"steel chainring", "aluminium chainring"}),
        ("Does a steel chain wear out?",
         "An aluminium chainring wears quickly with a steel chain [KB#mem_alu].",
         {"aluminium chainring", "steel chain"}),
        # a question that names two things is a choice between them: every name counts
        ("Which lasts longer, a steel chainring or an aluminium chainring?",
         "A steel chainring outlasts an aluminium chainring several times [KB#mem_ring].",
         {"steel chainring", "aluminium chainring"}),
        ("Which wears first, an aluminium chainring or a steel chain?",
         "An aluminium chainring wears quickly with a steel chain [KB#mem_alu].",
         {"aluminium chainring", "steel chain"}),
        # no chunk cited: what it names is all it answers
        ("Does a steel chain rust?", "A steel chain and a titanium cog both rust.",
         {"steel chain", "titanium cog"}),
    ],
)  # fmt: skip
def test_a_thing_named_in_passing_is_not_what_an_answer_about_one_thing_gives(
    question, text, things
) -> None:
    from collective.verdict.agreement import reduce

    shown, vocab = shown_whole({c.id: c for c in BIKE}), chunk_vocabulary(BIKE)
    asked = Asked.read(question, vocab, shown.values())
    reduced = reduce(check_answer("judge", text, shown, vocabulary=vocab), asked, vocab)
    titles = {t.key: t.title for t in vocab.things()}
    assert {titles[k] for k in reduced.things} == things


def test_samples_naming_another_thing_in_passing_agree_with_the_judge() -> None:
    # held-out h07 "What can I use to dissolve HIPS supports?": two samples quoted HIPS's uses
    # ("dissolvable supports for ABS"), so they named ABS too, and outvoted the judge's
    # d-limonene line as another answer
    shown, vocab = shown_whole({c.id: c for c in BIKE}), chunk_vocabulary(BIKE)
    asked = Asked.read("Is an aluminium chainring durable?", vocab, shown.values())
    judge = check_answer("judge", "An aluminium chainring wears quickly [KB#mem_alu].", shown,
                         vocabulary=vocab)  # fmt: skip
    passing = "An aluminium chainring is light but wears quickly with a steel chain [KB#mem_alu]."
    samples = [check_answer(f"s{n}", passing, shown, vocabulary=vocab) for n in (1, 2)]
    decision = decide(asked, [judge, *samples], vocab)
    assert decision.stands is judge and not decision.why, decision


TEA = [
    Chunk(f"mem_{key}", text, f"tea/{heading.split(' > ')[0]}.md", heading=heading)
    for key, heading, text in [
        ("green_brew", "green tea > Brewing",
         "Green tea brews at a water temperature of 70-80 °C for 2-3 minutes."),
        ("green_caff", "green tea > Caffeine", "Green tea holds about 30 mg of caffeine per cup."),
        ("green_store", "green tea > Storage",
         "Green tea keeps its flavour for 6-12 months sealed away from light."),
        ("black_brew", "black tea > Brewing",
         "Black tea brews at a water temperature of 95-100 °C for 3-5 minutes."),
        ("black_caff", "black tea > Caffeine", "Black tea holds about 50 mg of caffeine per cup."),
        ("black_store", "black tea > Storage", "Black tea keeps for 18-24 months in a tin."),
    ]
]  # fmt: skip


@pytest.mark.parametrize(
    ("question", "cited", "quoted"),
    [
        # a figure asked of one thing, its figure shown: a line on its other figures is not
        # quoted, cited or not, unless it speaks of what the question asks
        ("What water temperature does green tea brew at?", ["green_brew", "green_caff"],
         {"green_brew"}),
        ("What water temperature does green tea brew at?", ["green_brew", "green_store"],
         {"green_brew"}),
        ("How hot should the water be for green tea?", ["green_brew", "green_caff"],
         {"green_brew"}),
        ("What water temperature for black tea?", ["black_brew", "black_caff", "black_store"],
         {"black_brew"}),
        ("How much caffeine does black tea hold?", ["black_caff", "black_store"], {"black_caff"}),
        ("How much caffeine does black tea hold?", ["black_caff", "black_brew"], {"black_caff"}),
        ("How much caffeine does a cup of black tea hold once brewed?",
         ["black_caff", "black_brew"], {"black_caff", "black_brew"}),  # "brews": asked
        ("What water temperature does green tea brew at, and how long does it keep?",
         ["green_brew", "green_store"], {"green_brew", "green_store"}),  # "keeps": asked
        # no figure asked, or none of the thing asked shown: the lines as cited
        ("Is green tea good before bed?", ["green_caff", "green_store"],
         {"green_caff", "green_store"}),
        ("Is black tea fine to keep for a year?", ["black_store", "black_caff"],
         {"black_store", "black_caff"}),
        # a choice between two things keeps what the answer cites of both
        ("Which holds more caffeine, green tea or black tea?", ["green_caff", "black_caff"],
         {"green_caff", "black_caff"}),
    ],
)  # fmt: skip
def test_a_line_on_another_figure_of_the_thing_asked_is_left_out(question, cited, quoted) -> None:
    # the eval's "What is the density of 5052-H32 aluminium?" quoted its tensile strength
    # under its density, "what nozzle temp should I run HIPS at?" its drying
    from collective.verdict.lines import supporting_lines

    shown, vocab = shown_whole({c.id: c for c in TEA}), chunk_vocabulary(TEA)
    asked = Asked.read(question, vocab, shown.values())
    ids = [f"mem_{key}" for key in cited]
    lines = supporting_lines(asked, shown, dict.fromkeys(shown, 0.5), ids, vocab)
    assert {k for k in (c.id[4:] for c in TEA) if f"[KB#mem_{k}]" in " ".join(lines)} == quoted


@pytest.mark.parametrize(
    ("question", "direct", "cited", "other", "quoted"),
    [
        # a line about a thing neither the question nor the direct answer names: left out
        ("Does a steel chain rust?", "A steel chain rusts if left wet [KB#mem_chain_lube].",
         ["chain_lube", "disc"], "disc", False),
        ("Does a steel chain rust?", "A steel chain rusts if left wet [KB#mem_chain_lube].",
         ["chain_lube", "tubeless"], "tubeless", False),
        ("How long do a rim brake's pads last?", "Its pads last 1000-2000 km [KB#mem_rim].",
         ["rim", "disc"], "disc", False),
        ("Is an aluminium chainring durable?", "An aluminium chainring wears quickly [KB#mem_alu].",
         ["alu", "ring"], "ring", False),
        ("Does a tubeless tyre need sealant?", "Yes, 30-60 ml of it [KB#mem_tubeless].",
         ["tubeless", "chain_lube"], "chain_lube", False),
        ("Which lasts longer, a steel chainring or an aluminium chainring?",
         "A steel chainring outlasts an aluminium chainring [KB#mem_ring].",
         ["ring", "alu", "cog"], "cog", False),
        # the direct answer names it: its alternative, or what it compares with
        ("Is a disc brake good in the wet?",
         "A disc brake stops well in the wet, unlike a rim brake [KB#mem_disc].",
         ["disc", "rim"], "rim", True),
        ("What should I use instead of a butyl inner tube?",
         "A tubeless tyre punctures less [KB#mem_tubeless].", ["tube", "tubeless"], "tubeless",
         True),
        ("Is an aluminium chainring durable?",
         "An aluminium chainring wears quickly; a steel chainring outlasts it [KB#mem_alu].",
         ["alu", "ring"], "ring", True),
        ("Does a titanium cog save weight?",
         "A titanium cog weighs about 40 % less than a steel chainring [KB#mem_cog].",
         ["cog", "ring"], "ring", True),
        # a thing the question names is quoted in any case, and a question naming none chooses
        ("Which lasts longer, a steel chainring or an aluminium chainring?",
         "A steel chainring outlasts an aluminium chainring [KB#mem_ring].",
         ["ring", "alu", "cog"], "alu", True),
        ("Which brakes should I fit for wet rides?", "Fit disc brakes [KB#mem_disc].",
         ["disc", "tube"], "tube", True),
    ],
)  # fmt: skip
def test_a_line_about_a_thing_neither_question_nor_answer_names_is_left_out(
    question, direct, cited, other, quoted
) -> None:
    # held-out h13 "Is birch plywood fine to leave outside?" quoted eastern white pine's outdoor
    # durability, h05 "Will a polypropylene print float?" PA6 nylon's water uptake
    from collective.verdict.lines import supporting_lines

    shown, vocab = shown_whole({c.id: c for c in BIKE}), chunk_vocabulary(BIKE)
    asked = Asked.read(question, vocab, shown.values())
    ids = [f"mem_{key}" for key in cited]
    lines = supporting_lines(asked, shown, dict.fromkeys(shown, 0.5), ids, vocab, said=direct)
    assert (f"[KB#mem_{other}]" in " ".join(lines)) is quoted, lines


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("cast iron pan > Uses: A cast iron pan suits searing [KB#mem_ci_uses]",
         "A cast iron pan suits searing [KB#mem_ci_uses]"),
        ("- cast iron pan > Heat: It holds heat well [KB#mem_ci_heat]",
         "- It holds heat well [KB#mem_ci_heat]"),
        ("Nonstick: degrades above 260 °C [KB-ref mem_ns_limits]",
         "Nonstick: degrades above 260 °C"),
        ("A stainless pan is dishwasher safe [KB-ref mem_x] [KB#mem_ss_clean]",
         "A stainless pan is dishwasher safe [KB#mem_ss_clean]"),
        ("Copper > Conductivity > Detail: conducts well", "conducts well"),
        ("A plain line.", "A plain line."),
        ("Decision: cast iron [KB#mem_ci_uses]", "Decision: cast iron [KB#mem_ci_uses]"),
        ("Use it at 230 °C > 200 °C", "Use it at 230 °C > 200 °C"),
        ("- [kb-ref mem_a] ASA is UV stable", "- ASA is UV stable"),
        ("Soft-boiled eggs take 6-7 minutes.", "Soft-boiled eggs take 6-7 minutes."),
    ],
)  # fmt: skip
def test_a_line_reads_as_a_sentence(line: str, expected: str) -> None:
    assert readable(line) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ABS. It handles heat.\n- reason", "ABS. It handles heat."),
        ("ABS. It handles heat. It is tough.", "ABS. It handles heat."),
        ("\n- ASA [KB#mem_a].\n- more", "ASA [KB#mem_a]."),
        ("x > y: PLA sags [KB#mem_p].", "PLA sags [KB#mem_p]."),
        ("", ""),
    ],
)
def test_the_direct_answer_is_the_first_line_s_first_sentences(text: str, expected: str):
    assert direct_answer(text) == expected


@pytest.mark.parametrize(
    ("reported", "weight"),
    [
        (0.7, 0.7),
        (1, 1.0),
        ({"mean": -0.105, "lowest": -0.9, "tokens": 40, "window": 12}, 0.9003),
        ({"mean": 0.0}, 1.0),
        ({"mean": 0.0001}, 1.0),  # rounding of a sure token: no weight above 1
        ({"mean": None}, None),
        (None, None),
        ("high", None),
    ],
)
def test_a_members_reported_confidence_becomes_its_votes_weight(reported, weight) -> None:
    from collective.nodes.judge import _confidence

    got = _confidence(reported)
    assert got == weight if weight is None else abs(got - weight) < 1e-3


NONSTICK = "A nonstick pan's coating degrades above 260 °C and scratches under metal utensils."
SMOKE = ("A cast iron pan heats slowly and unevenly but holds heat well; its seasoning smokes "
         "above about 230 °C.")  # fmt: skip


@pytest.mark.parametrize(
    ("question", "answers", "verdict"),
    [
        # a figure of one thing, in the model's words: the chunk's words that state it stand
        ("How heavy is a cast iron pan?",
         ["A 26 cm cast iron pan tips the scales at 2.5-3.2 kg."],
         "A 26 cm cast iron pan weighs about 2.5-3.2 kg. [KB#mem_ci_weight]"),
        ("At what heat does a nonstick pan's coating break down?",
         ["A nonstick pan's coating breaks down past 260 °C [KB#mem_ns_limits]."],
         f"{NONSTICK} [KB#mem_ns_limits]"),
        ("How hot can a silicone mat go?", ["A silicone mat handles up to 250 °C."],
         "A silicone mat is rated to 250 °C, density 1.15 g/cm3. [KB#mem_mat]"),
        ("When does the seasoning on a cast iron pan start smoking?",
         ["Cast iron pan seasoning begins smoking past roughly 230 °C."],
         f"{SMOKE} [KB#mem_ci_heat]"),
        # two samples agree in other words, the judge states a wrong figure: theirs stands
        ("How hot can a silicone mat go?",
         ["A silicone mat is rated to 300 °C [KB#mem_mat].", "A silicone mat handles 250 °C.",
          "A silicone mat copes with 250 °C."],
         "A silicone mat is rated to 250 °C, density 1.15 g/cm3. [KB#mem_mat]"),
        # the judge's supported line on another figure of the thing, two samples on the one
        # asked in their own words: the figure most give stands, in its chunk's words
        ("When does the seasoning on a cast iron pan start smoking?",
         ["A 26 cm cast iron pan weighs about 2.5-3.2 kg [KB#mem_ci_weight].",
          "Cast iron pan seasoning begins smoking past roughly 230 °C.",
          "Seasoning on a cast iron pan starts to smoke beyond about 230 °C."],
         f"{SMOKE} [KB#mem_ci_heat]"),
        # the KB's own words already: the answer stands as written
        ("When does a nonstick pan's coating degrade?",
         ["A nonstick pan's coating degrades above 260 °C [KB#mem_ns_limits]."],
         "A nonstick pan's coating degrades above 260 °C [KB#mem_ns_limits]."),
        # numbers the chunk does not state, or of another thing: nothing to quote
        ("At what heat does a nonstick pan's coating break down?",
         ["A nonstick pan's coating breaks down past 300 °C."], NO_ANSWER),
        ("At what heat does a nonstick pan's coating break down?",
         ["A silicone mat handles up to 250 °C."], NO_ANSWER),
        # a choice: numbers in the model's words are its reasons, and do not vote
        ("Which pan for searing a steak?",
         ["A cast iron pan, since its seasoning smokes only past roughly 230 °C."], NO_ANSWER),
        ("Which is heavier, a cast iron pan or a copper pan?",
         ["A 26 cm cast iron pan tips the scales at 2.5-3.2 kg."], NO_ANSWER),
    ],
)  # fmt: skip
def test_a_figure_in_the_model_s_words_stands_in_its_chunk_s(question, answers, verdict) -> None:
    asked = Asked.read(question, vocabulary(), SHOWN.values())
    checked = [answer("judge" if n == 0 else f"s{n}", a) for n, a in enumerate(answers)]
    decision = decide(asked, checked, vocabulary())
    assert decision.stands is not None
    assert _first_line(decision.stands.text) == verdict


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0]


def test_with_an_entailment_check_a_figure_in_other_words_is_settled_by_it() -> None:
    said = "A silicone mat handles up to 250 °C [KB#mem_mat]."
    asked = Asked.read("How hot can a silicone mat go?", vocabulary(), SHOWN.values())
    refused = check_answer("judge", said, SHOWN, lambda pairs: [0.0] * len(pairs),
                           vocabulary=vocabulary())  # fmt: skip
    assert decide(asked, [refused], vocabulary()).stands.text == NO_ANSWER
    granted = check_answer("judge", said, SHOWN, lambda pairs: [1.0] * len(pairs),
                           vocabulary=vocabulary())  # fmt: skip
    assert decide(asked, [granted], vocabulary()).stands.text == said


OVEN = Chunk("mem_oven", "The oven bakes bread at 220-230 °C with the grill at 250-280 °C.",
             "kitchen/oven.md", heading="oven > Settings")  # fmt: skip
KILN = Chunk("mem_kiln", "A kiln fires bisque at 900-1000 °C and glaze at 1200-1260 °C.",
             "kitchen/kiln.md", heading="kiln > Firing")  # fmt: skip
MORE = shown_whole({c.id: c for c in (*CHUNKS, OVEN, KILN)})


@pytest.mark.parametrize(
    ("question", "said", "verdict"),
    [
        # a figure the chunk holds, which the answer ties to other words: the chunk's sentence
        ("How hot should the top element be when baking in the oven?",
         "The top element should be 250-280 °C when baking in the oven.", OVEN),
        ("What heat does the oven's grill reach when baking?",
         "When baking, the oven's grill reaches 250-280 °C.", OVEN),
        ("How hot is a glaze firing in a kiln?",
         "A kiln fires at 1200-1260 °C for glaze, after bisque.", KILN),
        # a number the chunk does not hold, or one of another thing: nothing is quoted
        ("How hot should the top element be when baking in the oven?",
         "The top element should be 300 °C when baking in the oven.", NO_ANSWER),
        ("How hot is a glaze firing in a kiln?",
         "A kiln fires at 250-280 °C for glaze.", NO_ANSWER),
    ],
)  # fmt: skip
def test_a_figure_the_chunk_holds_under_other_words_stands_in_its_sentence(
    question, said, verdict
) -> None:
    vocab = chunk_vocabulary([*CHUNKS, OVEN, KILN])
    asked = Asked.read(question, vocab, MORE.values())
    checked = check_answer("judge", said, MORE, vocabulary=vocab)
    stands = decide(asked, [checked, checked], vocab).stands
    assert stands is not None
    expected = verdict if verdict == NO_ANSWER else f"{verdict.text} [KB#{verdict.id}]"
    assert _first_line(stands.text) == expected


# -- a property the KB reads no figure of, asked of a thing it holds -------------------------


@pytest.mark.parametrize(
    ("question", "wanted"),
    [
        ("What is the thermal mass of a cast iron pan?", "thermal mass"),
        ("What is the boiling point of a silicone mat?", "boiling point"),
        ("What is the shelf life of an egg timer?", "shelf life"),
        ("What is the coefficient of friction of a nonstick pan?", "coefficient of friction"),
        ("What's the heat conductivity of a copper pan?", "heat conductivity"),
        ("what is the edge angle for a carbon steel knife?", "edge angle"),
        ("What is the best use of a cast iron pan?", "best use"),
        # a property the KB reads, of which it holds no figure for the thing asked
        ("What is the density of a cast iron pan?", "density"),
        ("What temperature can a ceramic knife take?", "temperature"),
        # a property the KB reads, no single thing, a thing it lacks, no "the ... of"
        ("What is the density of a silicone mat?", ""),
        ("Which knife stays sharp longer?", ""),
        ("What is the price of a wok?", ""),
        ("Is a ceramic knife dishwasher safe?", ""),
        ("Compare the heat of a copper pan and a cast iron pan", ""),
    ],
)
def test_a_property_asked_in_the_questions_own_words_is_read(question, wanted) -> None:
    assert Asked.read(question, vocabulary(), SHOWN.values()).wanted == wanted


@pytest.mark.parametrize(
    ("question", "prop"),
    [
        ("Is the nonstick coating degraded by metal utensils?", None),  # no temperature asked
        ("Has the copper pan's lining worn through?", None),
        ("Should a bamboo board be oiled?", None),
        ("Does the nonstick coating degrade above 300 °C?", "coating degrades temperature"),
        ("Will a cast iron pan's seasoning smoke in a hot oven?", "temperature"),
        ("Are soft-boiled eggs quick to make?", "eggs take time"),
        ("Do eggs take long on the egg timer?", "eggs take time"),
        ("Should I take eggs off after 6 minutes?", "eggs take time"),
        ("Must a carbon steel knife be sharpened at 15-20 degrees?", "sharpening"),
        ("Does a cast iron pan weigh a lot?", "weighs"),  # the property's whole name
        ("How hot can a nonstick pan's coating get before it degrades?",
         "coating degrades temperature"),  # not asked whether
    ],
)  # fmt: skip
def test_a_question_asking_whether_reads_a_property_only_of_its_kind(question, prop) -> None:
    assert vocabulary().property_asked(question) == prop


@pytest.mark.parametrize(
    ("question", "states", "quoted"),
    [
        ("What is the thermal mass of a cast iron pan?", False, []),  # the KB says nothing of it
        ("What's the heat conductivity of a copper pan?", True, ["cu_heat"]),
        ("what is the edge angle for a carbon steel knife?", False, ["cs_edge"]),  # in part
        ("What is the best use of a cast iron pan?", False, ["ci_uses"]),  # its heading's word
        ("What is the shelf life of an egg timer?", False, []),
    ],
)
def test_the_sentences_that_speak_of_the_property_asked_are_found(question, states, quoted):
    asked = Asked.read(question, vocabulary(), SHOWN.values())
    found, lines = wanted_lines(asked, SHOWN, vocabulary(), asked.unspoken("", SHOWN, vocabulary()))
    assert found is states
    assert [line.rsplit("[KB#mem_", 1)[1].rstrip("]") for line in lines] == quoted


@pytest.mark.parametrize(
    ("question", "verdict", "unanswered"),
    [
        ("What is the thermal mass of a cast iron pan?", "heats slowly [KB#mem_ci_heat]", True),
        ("What is the best use of a cast iron pan?", "suits searing [KB#mem_ci_uses]", False),
        ("What is the best use of a cast iron pan?", "weighs 3 kg [KB#mem_ci_weight]", True),
        ("What's the heat conductivity of a copper pan?", "conducts heat [KB#mem_cu_heat]", False),
        ("What is the density of a silicone mat?", "rated to 250 °C [KB#mem_mat]", False),
        # a figure of a property named otherwise ("limits temperature") is a temperature
        ("What temperature is a silicone mat rated to?", "rated to 250 °C [KB#mem_mat]", False),
        ("What temperature can a ceramic knife take?", "stays sharp [KB#mem_ceramic]", True),
        ("What is the density of a cast iron pan?", "weighs 2.5 kg [KB#mem_ci_weight]", True),
    ],
)
def test_a_verdict_that_says_nothing_of_the_property_asked_is_found(question, verdict, unanswered):
    asked = Asked.read(question, vocabulary(), SHOWN.values())
    assert bool(asked.unspoken(verdict, SHOWN, vocabulary())) is unanswered


@pytest.mark.parametrize(
    ("question", "direct", "cited", "other", "quoted", "first"),
    [
        # the verdict speaks of what is asked: a line of the thing that speaks of none of it is
        # left out (fresh held-out: "What happens to PVA filament in water?" quoted PVA's heat
        # resistance under "dissolves in plain water"; "Can I paint over silicone sealant?" its
        # strength and cure time under "paint does not stick to it")
        ("Does a cast iron pan rust outdoors?",
         "Outdoor storage of cast iron pans: poor: it rusts if left damp [KB#mem_ci_store].",
         ["ci_store", "ci_weight"], "ci_weight", False, None),
        ("Does a cast iron pan rust outdoors?",
         "Outdoor storage of cast iron pans: poor: it rusts if left damp [KB#mem_ci_store].",
         ["ci_store", "ci_heat"], "ci_heat", False, None),
        ("Is a carbon steel knife dishwasher safe?",
         "They are not dishwasher safe [KB#mem_cs_care].", ["cs_care", "cs_edge"], "cs_edge",
         False, None),
        ("How do I sharpen a carbon steel knife?",
         "It sharpens easily at 15-20 degrees [KB#mem_cs_edge].", ["cs_edge", "cs_care"],
         "cs_care", False, None),
        ("Can a cast iron pan take the heat of a grill?", "It holds heat well [KB#mem_ci_heat].",
         ["ci_heat", "ci_store"], "ci_store", False, None),
        # nothing says what is asked in the question's words yet: the lines as cited
        ("How heavy is a cast iron pan?", "It weighs about 2.5-3.2 kg [KB#mem_ci_weight].",
         ["ci_weight", "ci_uses"], "ci_uses", True, None),
        ("What is a cast iron pan good for?",
         "A cast iron pan suits searing, baking cornbread and frying [KB#mem_ci_uses].",
         ["ci_uses", "ci_heat"], "ci_heat", True, None),
        # another thing the answer names (its alternative), two things asked, or retrieval's
        # first by a wide margin: quoted as before
        ("Is a stainless pan dishwasher safe?",
         "A stainless pan is dishwasher safe, unlike a cast iron pan [KB#mem_ss_clean].",
         ["ss_clean", "ci_store"], "ci_store", True, None),
        ("Which is heavier, a cast iron pan or a copper pan?",
         "A cast iron pan weighs about 2.5-3.2 kg [KB#mem_ci_weight].",
         ["ci_weight", "ci_heat"], "ci_heat", True, None),
        ("Does a cast iron pan rust outdoors?",
         "Outdoor storage of cast iron pans: poor: it rusts if left damp [KB#mem_ci_store].",
         ["ci_store", "ci_weight"], "ci_weight", True, "ci_weight"),
    ],
)  # fmt: skip
def test_a_line_of_the_thing_asked_that_speaks_of_nothing_asked_is_left_out(
    question, direct, cited, other, quoted, first
) -> None:
    from collective.verdict.lines import supporting_lines

    asked = Asked.read(question, vocabulary(), SHOWN.values())
    scores = {i: 0.9 if i == f"mem_{first}" else 0.5 for i in SHOWN}
    ids = [f"mem_{key}" for key in cited]
    lines = supporting_lines(asked, SHOWN, scores, ids, vocabulary(), said=direct)
    assert (f"[KB#mem_{other}]" in " ".join(lines)) is quoted, lines


# -- a thing the question describes by its use -------------------------------------------------


@pytest.mark.parametrize(
    ("question", "described", "things"),
    [
        ("How much does the pan used for baking cornbread weigh?", "ci_uses", ["cast iron pan"]),
        ("How heavy is the pan used for searing?", "ci_uses", ["cast iron pan"]),
        ("How hot can the pan used for frying get?", "ci_uses", ["cast iron pan"]),
        ("Is the knife used for sharpening at 15-20 degrees rust resistant?", "cs_edge",
         ["carbon steel knife"]),
        ("How long do eggs take on the timer used for soft-boiled eggs?", "timer", ["egg timer"]),
        ("Which is heavier: the pan used for searing or the mat rated to 250 °C?", "ci_uses",
         ["cast iron pan", "silicone mat"]),
        # the kind in more than one word, or "for" alone (held-out: "the plastic sheet used for
        # riot shields", "the filament for soft grips and wearable straps")
        ("How heavy is the iron pan used for searing?", "ci_uses", ["cast iron pan"]),
        ("Is the steel knife used for sharpening at 15-20 degrees rust resistant?", "cs_edge",
         ["carbon steel knife"]),
        ("How heavy is the pan for baking cornbread?", "ci_uses", ["cast iron pan"]),
        ("How long do eggs take on the timer for soft-boiled eggs?", "timer", ["egg timer"]),
        ("Is the knife for sharpening at 15-20 degrees dishwasher safe?", "cs_edge",
         ["carbon steel knife"]),
        ("How hot can the cast iron pan for frying get?", "ci_uses", ["cast iron pan"]),
        ("Which is heavier: the iron pan for searing or the silicone mat?", "ci_uses",
         ["cast iron pan", "silicone mat"]),
        ("What is the density of the mat for baking?", None, ["silicone mat"]),
        ("What is the best pan for boiling pasta?", None, []),  # no pan's sentence says so
        ("What is the heat limit for a nonstick pan?", None, ["nonstick pan"]),  # not a kind
        # its first word held by no sentence of a thing of that kind: no hop
        ("Does the board used for chopping dull blades?", None, ["bamboo board"]),
        ("What is the density of the mat used for baking?", None, ["silicone mat"]),
        ("At what temperature does the coating of the pan that is used for eggs degrade?", None,
         []),
        ("What is the density of a silicone mat?", None, ["silicone mat"]),
        ("Which pan is used for searing?", None, []),  # asks for it: nothing to hop from
    ],
)  # fmt: skip
def test_a_thing_described_by_its_use_is_the_thing_asked_about(question, described, things):
    asked = Asked.read(question, vocabulary(), SHOWN.values())
    assert [d.chunk_id for d in asked.described] == ([f"mem_{described}"] if described else [])
    assert [t.split("/")[1].removesuffix(".md") for t in asked.things] == things


# -- said once ----------------------------------------------------------------------------------

HEAT = ("A cast iron pan heats slowly and unevenly but holds heat well; its seasoning smokes above "
        "about 230 °C. [KB#mem_ci_heat]")  # fmt: skip
CERAMIC = ("A ceramic knife stays sharp longer than steel but chips easily when dropped. "
           "[KB#mem_ceramic]")  # fmt: skip
BAMBOO = "A bamboo board resists knife scarring better than maple. [KB#mem_bamboo]"
WEIGHT = "A 26 cm cast iron pan weighs about 2.5-3.2 kg. [KB#mem_ci_weight]"
USES = "A cast iron pan suits searing, baking cornbread and frying. [KB#mem_ci_uses]"
TIMER = "Soft-boiled eggs take 6-7 minutes; hard-boiled eggs take 9-12 minutes. [KB#mem_timer]"


@pytest.mark.parametrize(
    ("direct", "quoted", "expected"),
    [
        # the direct answer is part of a quoted sentence: the sentence leads, said once
        ("A cast iron pan weighs about 2.5-3.2 kg [KB#mem_ci_weight].",
         ["A 26 cm cast iron pan weighs about 2.5-3.2 kg. [KB#mem_ci_weight]"],
         ("", ["A 26 cm cast iron pan weighs about 2.5-3.2 kg. [KB#mem_ci_weight]"])),
        ("A silicone mat is rated to 250 °C.",
         ["A bamboo board dulls blades. [KB#mem_bamboo]",
          "A silicone mat is rated to 250 °C, density 1.15 g/cm3. [KB#mem_mat]"],
         ("", ["A silicone mat is rated to 250 °C, density 1.15 g/cm3. [KB#mem_mat]",
               "A bamboo board dulls blades. [KB#mem_bamboo]"])),
        ("a  silicone MAT is rated to 250 °C",  # spacing and case
         ["A silicone mat is rated to 250 °C, density 1.15 g/cm3. [KB#mem_mat]"],
         ("", ["A silicone mat is rated to 250 °C, density 1.15 g/cm3. [KB#mem_mat]"])),
        # a direct answer no line holds stays, the lines after it
        ("Use a cast iron pan.", ["A cast iron pan suits searing. [KB#mem_ci_uses]"],
         ("Use a cast iron pan.", ["A cast iron pan suits searing. [KB#mem_ci_uses]"])),
        ("A copper pan conducts heat far better than a cast iron pan.",
         ["A copper pan conducts heat far better than a stainless pan. [KB#mem_cu_heat]"],
         ("A copper pan conducts heat far better than a cast iron pan.",
          ["A copper pan conducts heat far better than a stainless pan. [KB#mem_cu_heat]"])),
        # a name alone is the answer: a line naming it in passing does not replace it
        ("A bamboo board.", ["A bamboo board resists knife scarring better than maple. "
                             "[KB#mem_bamboo]"],
         ("A bamboo board.", ["A bamboo board resists knife scarring better than maple. "
                              "[KB#mem_bamboo]"])),
        ("Soft-boiled eggs take 6-7 minutes.", [],
         ("Soft-boiled eggs take 6-7 minutes.", [])),
        ("", ["A silicone mat is rated to 250 °C. [KB#mem_mat]"],
         ("", ["A silicone mat is rated to 250 °C. [KB#mem_mat]"])),
        # every word of it in the line: the chunk's sentence says it, and more
        ("A ceramic knife stays sharp longer than steel and chips.",
         ["A ceramic knife stays sharp longer than steel but chips easily. [KB#mem_ceramic]"],
         ("", ["A ceramic knife stays sharp longer than steel but chips easily. "
               "[KB#mem_ceramic]"])),
        # a line holding only part of the direct answer does not replace it
        ("A ceramic knife stays sharp longer than steel and resists prying.",
         ["A ceramic knife stays sharp longer than steel but chips easily. [KB#mem_ceramic]"],
         ("A ceramic knife stays sharp longer than steel and resists prying.",
          ["A ceramic knife stays sharp longer than steel but chips easily. [KB#mem_ceramic]"])),
        ("Hard-boiled eggs take 9-12 minutes [KB#mem_timer].",
         ["Soft-boiled eggs take 6-7 minutes; hard-boiled eggs take 9-12 minutes. [KB#mem_timer]"],
         ("", ["Soft-boiled eggs take 6-7 minutes; hard-boiled eggs take 9-12 minutes. "
               "[KB#mem_timer]"])),
        ("A 24 cm pan", ["A 26 cm cast iron pan weighs about 2.5-3.2 kg. [KB#mem_ci_weight]"],
         ("A 24 cm pan", ["A 26 cm cast iron pan weighs about 2.5-3.2 kg. [KB#mem_ci_weight]"])),
        # a short answer that states a figure a line holds is said by the line (held-out h17:
        # "At 50 °C", then "Drying TPE 85A: dry at 50 °C for 4 hours.")
        ("At 250 °C [KB#mem_mat].", ["A silicone mat is rated to 250 °C. [KB#mem_mat]"],
         ("", ["A silicone mat is rated to 250 °C. [KB#mem_mat]"])),
        ("About 2.5-3.2 kg.", ["A 26 cm cast iron pan weighs about 2.5-3.2 kg. [KB#mem_ci_weight]"],
         ("", ["A 26 cm cast iron pan weighs about 2.5-3.2 kg. [KB#mem_ci_weight]"])),
        ("6-7 minutes.", ["A bamboo board dulls blades. [KB#mem_bamboo]",
                          "Soft-boiled eggs take 6-7 minutes. [KB#mem_timer]"],
         ("", ["Soft-boiled eggs take 6-7 minutes. [KB#mem_timer]",
               "A bamboo board dulls blades. [KB#mem_bamboo]"])),
        ("250 °C", ["A silicone mat is rated to 250 °C, density 1.15 g/cm3. [KB#mem_mat]"],
         ("", ["A silicone mat is rated to 250 °C, density 1.15 g/cm3. [KB#mem_mat]"])),
        # ... not where the line holds another figure, or a word the answer adds
        ("At 260 °C", ["A silicone mat is rated to 250 °C. [KB#mem_mat]"],
         ("At 260 °C", ["A silicone mat is rated to 250 °C. [KB#mem_mat]"])),
        ("2.5 kg.", ["A 26 cm cast iron pan weighs about 2.5-3.2 kg. [KB#mem_ci_weight]"],
         ("2.5 kg.", ["A 26 cm cast iron pan weighs about 2.5-3.2 kg. [KB#mem_ci_weight]"])),
        ("Never above 250 °C", ["A silicone mat is rated to 250 °C. [KB#mem_mat]"],
         ("Never above 250 °C", ["A silicone mat is rated to 250 °C. [KB#mem_mat]"])),
        ("9-12 minutes", ["Soft-boiled eggs take 6-7 minutes. [KB#mem_timer]"],
         ("9-12 minutes", ["Soft-boiled eggs take 6-7 minutes. [KB#mem_timer]"])),
        # a short clause a line holds word for word (held-out: "acetone dissolves it", then
        # "Safety and cleanup for cyanoacrylate (super glue): ...; acetone dissolves it.")
        ("Heats slowly [KB#mem_ci_heat].", [HEAT], ("", [HEAT])),
        ("heats  SLOWLY.", [HEAT], ("", [HEAT])),
        ("Chips easily [KB#mem_ceramic]", [CERAMIC], ("", [CERAMIC])),
        ("Dulls blades faster.", ["A bamboo board dulls blades faster. [KB#mem_bamboo]"],
         ("", ["A bamboo board dulls blades faster. [KB#mem_bamboo]"])),
        ("Holds heat well", [BAMBOO, HEAT], ("", [HEAT, BAMBOO])),
        # ... not where the words are the line's but not as the answer says them
        ("Heats evenly.", [HEAT], ("Heats evenly.", [HEAT])),
        ("Slowly heats [KB#mem_ci_heat].", [HEAT], ("Slowly heats [KB#mem_ci_heat].", [HEAT])),
        ("Blades dull.", [BAMBOO], ("Blades dull.", [BAMBOO])),
        ("Not dishwasher safe", ["A stainless pan is dishwasher safe. [KB#mem_ss_clean]"],
         ("Not dishwasher safe", ["A stainless pan is dishwasher safe. [KB#mem_ss_clean]"])),
        ("Ceramic.", [CERAMIC], ("Ceramic.", [CERAMIC])),  # one word: the answer, not a line's
        # several sentences, each held by a line (fresh held-out: "Polycarbonate sheet is used for
        # riot shields [KB#...]. The density of polycarbonate sheet is 1.20 g/cm3 [KB#...]." over
        # both chunks' sentences): those lines, in the answer's order
        ("A cast iron pan suits searing [KB#mem_ci_uses]. It weighs about 2.5-3.2 kg "
         "[KB#mem_ci_weight].", [WEIGHT, USES], ("", [USES, WEIGHT])),
        ("Heats slowly. Weighs about 2.5-3.2 kg.", [BAMBOO, WEIGHT, HEAT],
         ("", [HEAT, WEIGHT, BAMBOO])),
        ("A cast iron pan suits searing. It holds heat well.", [HEAT, USES], ("", [USES, HEAT])),
        ("Soft-boiled eggs take 6-7 minutes. Hard-boiled eggs take 9-12 minutes.", [TIMER],
         ("", [TIMER])),
        # ... not where one sentence is no line's
        ("A cast iron pan suits searing. It weighs 4 kg.", [USES, WEIGHT],
         ("A cast iron pan suits searing. It weighs 4 kg.", [USES, WEIGHT])),
        ("Heats slowly. Copper heats faster.", [HEAT, BAMBOO],
         ("Heats slowly. Copper heats faster.", [HEAT, BAMBOO])),
    ],
)  # fmt: skip
def test_a_direct_answer_a_quoted_line_holds_is_said_once(direct, quoted, expected) -> None:
    assert said_once(direct, quoted) == expected


# -- a label copied from the prompt -------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # a section's name before the answer is the prompt's heading, copied
        ("notes: A silicone mat is rated to 250 °C.", "A silicone mat is rated to 250 °C."),
        ("Limits**: A silicone mat is rated to 250 °C.", "A silicone mat is rated to 250 °C."),
        ("**Care:** Carbon steel knives rust quickly.", "Carbon steel knives rust quickly."),
        ("Heat: a cast iron pan heats slowly.", "a cast iron pan heats slowly."),
        ("settings : Soft-boiled eggs take 6-7 minutes.", "Soft-boiled eggs take 6-7 minutes."),
        # a label that names no section is the line's own
        ("Cast iron pan: heats slowly.", "Cast iron pan: heats slowly."),
        ("Outdoor storage of cast iron pans: poor.", "Outdoor storage of cast iron pans: poor."),
        ("Decision: the cast iron pan.", "Decision: the cast iron pan."),
        ("A silicone mat is rated to 250 °C.", "A silicone mat is rated to 250 °C."),
        ("Note: it is rated to 250 °C.", "Note: it is rated to 250 °C."),  # "Notes" is no "Note"
        (
            "Durability of enamel pots: not chip resistant.",
            "Durability of enamel pots: not chip resistant.",
        ),
    ],
)
def test_a_label_copied_from_a_sections_heading_is_not_the_answers(line, expected) -> None:
    headings = [*(c.heading for c in CHUNKS), "silicone mat > Notes"]
    assert unlabelled(line, headings) == expected


# -- an answer that opens with the question, echoed --------------------------------------------


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        # held-out: "Why won't glue stick to my teak? - PETG bonds so strongly to smooth PEI ..."
        # stood as a sample's direct answer, the question echoed first
        ("Does a cast iron pan rust outdoors? - It rusts if left damp [KB#mem_ci_store].",
         "It rusts if left damp [KB#mem_ci_store]."),
        ("Is a stainless pan dishwasher safe? Yes, it is dishwasher safe [KB#mem_ss_clean].",
         "Yes, it is dishwasher safe [KB#mem_ss_clean]."),
        ("- How hot can a nonstick pan get? Its coating degrades above 260 °C [KB#mem_ns_limits].",
         "Its coating degrades above 260 °C [KB#mem_ns_limits]."),
        ("how do I sharpen a carbon steel knife?: at 15-20 degrees [KB#mem_cs_edge].",
         "at 15-20 degrees [KB#mem_cs_edge]."),
        ("Will a ceramic knife chip?\nIt chips easily when dropped [KB#mem_ceramic].",
         "It chips easily when dropped [KB#mem_ceramic]."),
        ("What is a silicone mat rated to? – It is rated to 250 °C [KB#mem_mat].",
         "It is rated to 250 °C [KB#mem_mat]."),
        # no question first: as written
        ("A cast iron pan rusts if left damp [KB#mem_ci_store].",
         "A cast iron pan rusts if left damp [KB#mem_ci_store]."),
        ("Soft-boiled eggs take 6-7 minutes [KB#mem_timer]. Why? They are soft inside.",
         "Soft-boiled eggs take 6-7 minutes [KB#mem_timer]. Why? They are soft inside."),
        ("It is rated to 250 °C, density 1.15 g/cm3 [KB#mem_mat].",
         "It is rated to 250 °C, density 1.15 g/cm3 [KB#mem_mat]."),
        ("- A copper pan conducts heat far better [KB#mem_cu_heat].",
         "- A copper pan conducts heat far better [KB#mem_cu_heat]."),
    ],
)  # fmt: skip
def test_an_answer_opening_with_the_question_is_read_from_what_follows(text, answer) -> None:
    checked = check_answer("specialist-1", text, SHOWN, vocabulary=vocabulary())
    assert checked.text.startswith(answer.split(" [KB#")[0]), checked.text
    assert checked.written == answer


def test_a_sample_echoing_the_question_over_another_things_line_does_not_stand() -> None:
    question = "Does a cast iron pan rust outdoors?"
    asked = Asked.read(question, vocabulary(), SHOWN.values())
    judge = answer("judge", "Outdoor storage of cast iron pans: poor: it rusts if left damp "
                            "[KB#mem_ci_store].")  # fmt: skip
    echo = answer("specialist-1", f"{question} - A stainless pan is dishwasher safe "
                                  "[KB#mem_ss_clean].")  # fmt: skip
    decision = decide(asked, [judge, echo, echo], vocabulary())
    assert decision.stands is not None and decision.stands.who == "judge"
