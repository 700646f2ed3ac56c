"""The KB's vocabulary read from its chunks: names by title and short form, figures by property."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from collective.kb.names import KbVocabulary, chunk_vocabulary, read_figures
from collective.kb.sqlite_store import SqliteKnowledgeStore
from collective.kb.store import Chunk, chunk_id
from collective.kb.vocabulary import Vocabulary

DATA = Path(__file__).parents[1] / "data"


@pytest.fixture(scope="module")
def chunks(tmp_path_factory) -> list[Chunk]:
    store = SqliteKnowledgeStore(tmp_path_factory.mktemp("kb") / "eval.sqlite", embedder=None)
    store.add_paths([DATA / "eval_kb"], base=DATA, embed=False)
    listed = store.list()
    store.close()
    return listed


@pytest.fixture(scope="module")
def vocab(chunks) -> KbVocabulary:
    return chunk_vocabulary(chunks)


def _titles(vocab: Vocabulary, text: str) -> list[str]:
    return [n.thing.title for n in vocab.named_in(text)]


def test_it_is_a_vocabulary_with_a_thing_per_document(vocab, chunks):
    assert isinstance(vocab, Vocabulary)
    assert len(vocab.things()) == 62
    for chunk in chunks[::37]:
        thing = vocab.thing_of(chunk.id)
        assert thing is not None and thing.key == chunk.source
    assert vocab.thing_of("mem_0000000000000000") is None


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("How dense is copper?", "C110 copper"),
        ("Is 316 good for boat fittings?", "316 stainless steel"),
        ("What does 6061-T6 weigh?", "6061-T6 aluminium"),
        ("Does epoxy fill gaps?", "two-part epoxy"),
        ("How long does cyanoacrylate take to set?", "cyanoacrylate (super glue)"),
        ("Will super glue bond skin?", "cyanoacrylate (super glue)"),
        ("Is acetal stiff?", "acetal"),
        ("Can UHMW take 90 °C?", "UHMW-PE"),
        ("How strong is C932 compared with brass?", "C932 bearing bronze"),
        ("Is polycarbonate sheet rated above 100 °C?", "polycarbonate sheet"),
        ("Is walnut harder than cherry?", "black walnut"),
        ("Is the 6061 T6 grade weldable?", "6061-T6 aluminium"),
    ],
)
def test_a_short_form_of_the_title_names_its_document(vocab, text, title):
    assert title in _titles(vocab, text)


def test_a_name_that_is_a_prefix_of_another_matches_only_itself(vocab):
    assert _titles(vocab, "Is PLA-CF stiffer?") == ["PLA-CF"]
    assert _titles(vocab, "PLA-CF or PLA, and PETG-CF") == ["PLA-CF", "PLA", "PETG-CF"]
    assert _titles(vocab, "PLA's glass transition") == ["PLA"]
    assert _titles(vocab, "Displays and replace") == []  # no name inside a word


def test_a_shared_name_goes_to_the_document_the_other_words_fit(vocab):
    assert _titles(vocab, "Is PVA good for gluing wood joints?") == ["PVA wood glue"]
    assert _titles(vocab, "What nozzle temperature does PVA print at?") == ["PVA"]
    assert _titles(vocab, "How long should PVA be clamped?") == ["PVA wood glue"]
    assert _titles(vocab, "Is polycarbonate rated for continuous service outdoors in sheets?") == [
        "polycarbonate sheet"
    ]
    # Nothing tells them apart: the document the name is the title of.
    assert _titles(vocab, "Tell me about PVA.") == ["PVA"]
    # Two documents that share a name and that the text fits alike: both.
    both = _titles(vocab, "Is stainless steel magnetic?")
    assert sorted(both) == ["304 stainless steel", "316 stainless steel"]


def test_acronyms_match_in_capitals_and_numbers_with_units_are_figures(vocab):
    assert _titles(vocab, "my pet likes abs") == []
    assert _titles(vocab, "PET or ABS?") == ["PET-P", "ABS"]
    assert _titles(vocab, "It melts at 316 °C and 316 MPa") == []
    assert _titles(vocab, "316 has a density of 8.00 g/cm3") == ["316 stainless steel"]


def test_a_common_noun_two_titles_share_names_neither(vocab):
    # "nylon" ends three titles, "aluminium" three: alone they name no one document.
    assert _titles(vocab, "Is nylon hygroscopic?") == []
    assert _titles(vocab, "Is aluminium weldable?") == []
    assert _titles(vocab, "Which glue is best?") == []  # nor does a category of the KB


def _complete(vocab: KbVocabulary, chunks: list[Chunk], prop: str, says: str) -> None:
    """Every document whose chunks say `says` has exactly one figure of `prop`, in one unit."""
    stating = {c.source for c in chunks if says in c.text}
    figures = vocab.figures(prop)
    assert stating and sorted(f.thing for f in figures) == sorted(stating)
    assert len({f.unit for f in figures}) == 1


def test_density_nozzle_and_janka_figures_are_complete_and_in_one_unit(vocab, chunks):
    _complete(vocab, chunks, "density", "density")
    _complete(vocab, chunks, "nozzle temperature", "nozzle temperature")
    _complete(vocab, chunks, "bed temperature", "with the bed at")
    _complete(vocab, chunks, "janka hardness", "Janka hardness")
    _complete(vocab, chunks, "melting range", "melts over")
    _complete(vocab, chunks, "service temperature", "continuous service")
    maple = vocab.figures("janka hardness", ["eval_kb/wood/hard_maple.md"])
    assert [(f.low, f.high, f.unit) for f in maple] == [(1450, 1450, "force_pound")]
    pla = vocab.figures("bed temperature", ["eval_kb/filament/pla.md"])
    assert [(f.low, f.high) for f in pla] == [(50, 60)]
    assert "50-60 °C" in pla[0].text


def test_tensile_strength_groups_ultimate_tensile_strength(vocab):
    things = {f.thing for f in vocab.figures("tensile strength")}
    assert {"eval_kb/metal/c110_copper.md", "eval_kb/plastic/ptfe.md"} <= things
    assert "ultimate tensile strength" not in vocab.properties()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # labels after the number
        ("PLA: 190-220 °C nozzle, 50-60 °C bed", {"nozzle temperature": (190, 220),
                                                   "bed temperature": (50, 60)}),
        # a label before, a verb whose meaning the heading gives
        ("Brass has a density of about 8.5 g/cm3 and melts over 900-940 °C.",
         {"density": (8.5, 8.5), "melting range": (900, 940)}),
        ("Hard maple: Janka hardness 1450 lbf; density about 0.70 g/cm3.",
         {"janka hardness": (1450, 1450), "density": (0.7, 0.7)}),
        ("It costs about $12-15 per board foot.", {"price": (12, 15)}),
        ("The price is roughly €30.", {"price": (30, 30)}),
        ("Yield about 276 MPa.", {"yield strength": (276, 276)}),
        ("Dry at 50 °C for 4 hours.", {"drying temperature": (50, 50), "drying time": (4, 4)}),
        ("Rated for continuous service up to 260 °C.", {"service temperature": (260, 260)}),
        ("Print slowly (15-30 mm/s).", {"print speed": (15, 30)}),
        ("It has 3 holes and weighs little.", {}),  # a bare number is no figure
    ],
)  # fmt: skip
def test_a_figure_is_typed_by_its_own_words(text, expected):
    heading = "X > Density and melting range" if "melts" in text else "X > Drying"
    if "service" in text:
        heading = "X > Service temperature"
    found = read_figures(text, thing="x", chunk_id="c", heading=heading)
    assert {f.property: (round(f.low, 2), round(f.high, 2)) for f in found} == expected


def test_figures_of_one_property_in_two_units_are_converted_to_one():
    chunks = [
        Chunk(chunk_id(t, s, h), t, s, heading=h)
        for t, s, h in [
            ("Alpha has a density of 2.70 g/cm3.", "a.md", "Alpha > Density"),
            ("Beta has a density of 7850 kg/m3.", "b.md", "Beta > Density"),
            ("Gamma has a density of 1.2 g/cm3.", "c.md", "Gamma > Density"),
            ("Gamma prints at a nozzle temperature of 428 °F.", "c.md", "Gamma > Print"),
            ("Delta prints at a nozzle temperature of 210-230 °C.", "d.md", "Delta > Print"),
            ("Epsilon prints at a nozzle temperature of 200 °C.", "e.md", "Epsilon > Print"),
        ]
    ]
    vocab = chunk_vocabulary(chunks)
    density = {f.thing: round(f.low, 2) for f in vocab.figures("density")}
    assert density == {"a.md": 2.7, "b.md": 7.85, "c.md": 1.2}
    assert {f.unit for f in vocab.figures("density")} == {"gram / centimeter ** 3"}
    nozzle = {f.thing: round(f.low) for f in vocab.figures("nozzle temperature")}
    assert nozzle == {"c.md": 220, "d.md": 210, "e.md": 200}


@pytest.mark.parametrize(
    ("question", "prop"),
    [
        ("Which is the lightest: Ti-6Al-4V, C360 brass or 316?", "density"),
        ("Which is the densest: PTFE, HDPE or acetal?", "density"),
        ("Which is harder, white oak or maple?", "janka hardness"),
        ("Which wood is the hardest?", "janka hardness"),
        ("Which filament needs the hottest nozzle?", "nozzle temperature"),
        ("What bed temperature for PETG?", "bed temperature"),
        ("Which metal melts first, brass or copper?", "melting range"),
        ("Which metal is strongest?", "tensile strength"),
        ("Which is the heaviest metal?", "density"),
        # the KB has no price or friction figures: no property, not another one
        ("Which metal is the cheapest: 1018 mild steel, 6061-T6 aluminium or Ti-6Al-4V?", None),
        ("Which plastic has the lowest friction: PTFE, HDPE or acetal?", None),
        # a temperature, but which of them the question does not say
        ("How hot can PETG get?", None),
        ("What is PLA used for?", None),
        # a kind named as a noun: another kind's property named in part is not asked (it read
        # "prints at the lowest temperature" as the print speed)
        ("Which filament prints at the lowest temperature: PLA, PETG or ABS?",
         "nozzle temperature"),
        ("Which melts at the lowest temperature, PLA or ABS?", "melting range"),
        # ... and one asked by that noun alone is one the KB has of the things named: the
        # plastics' service temperature, not the filaments' continuous use temperature
        ("Which sheet takes the highest continuous temperature: acrylic, PVC or HDPE?",
         "service temperature"),
        ("Of PTFE and acetal, which handles a higher continuous temperature?",
         "service temperature"),
    ],
)  # fmt: skip
def test_the_property_a_question_asks_about(vocab, question, prop):
    assert vocab.property_asked(question) == prop


@pytest.mark.parametrize(
    ("question", "prop"),
    [
        # asked whether: a verb sharing a property's word asks no figure (it read the drying
        # temperature, and the verdict quoted print settings for "do I have to dry it?")
        ("Do I really have to dry polypropylene filament before printing?", None),
        ("Does PETG need drying before use?", None),
        ("Are PLA prints safe to dry in an oven?", None),
        ("Will a polypropylene print float in water?", None),  # it read the print speed
        # ... unless it states a quantity of the property's kind, or asks its kind by adjective
        ("Should I dry PA6 nylon at 80 °C?", "drying temperature"),
        ("Is ABS printed with the bed at 100 °C?", "bed temperature"),
        ("Will PEEK survive continuous use at 200 °C?", "continuous use temperature"),
        ("Does cyanoacrylate cure fast?", "cure time"),
        ("Must PVA wood glue be clamped for long?", "clamp time"),
        ("Is 304 stainless denser than 6061-T6?", "density"),
        ("Is a heated chamber needed for PEEK?", "heated chamber"),  # named whole
        # not asked whether: unchanged
        ("How long should I dry PA6 nylon?", "drying time"),
        ("What temperature should I dry ABS at?", "drying temperature"),
    ],
)
def test_a_question_asking_whether_asks_a_figure_only_of_its_kind(vocab, question, prop):
    assert vocab.property_asked(question) == prop


@functools.cache
def _bakery():
    return chunk_vocabulary(_bakery_chunks())


def _bakery_chunks() -> list[Chunk]:
    rows = [
        ("Sourdough bakes at an oven temperature of 230-250 °C and proofs at a room temperature "
         "of 24-27 °C.", "sourdough.md", "Sourdough > Baking"),
        ("Brioche bakes at an oven temperature of 170-180 °C and proofs at a room temperature of "
         "26-28 °C.", "brioche.md", "Brioche > Baking"),
        ("Rye bread bakes at an oven temperature of 220-240 °C and proofs at a room temperature "
         "of 27-30 °C.", "rye.md", "Rye bread > Baking"),
        ("Sourdough has a density of 0.45 g/cm3.", "sourdough.md", "Sourdough > Crumb"),
        ("Brioche has a density of 0.30 g/cm3.", "brioche.md", "Brioche > Crumb"),
    ]  # fmt: skip
    return [Chunk(chunk_id(t, s, h), t, s, heading=h) for t, s, h in rows]


@pytest.mark.parametrize(
    ("question", "prop"),
    [
        # two temperatures asked alike ("hottest"): the KB's own clause tells which one the
        # question's verb states ("bakes at an oven temperature", "proofs at a room temperature")
        ("Which bakes hottest: sourdough, brioche or rye bread?", "oven temperature"),
        ("Which proofs warmest, brioche or rye bread?", "room temperature"),
        ("How hot should I bake brioche?", "oven temperature"),
        ("Does sourdough or rye bread bake hotter?", "oven temperature"),
        ("Which is proofed coolest: sourdough or brioche?", "room temperature"),
        ("Which bakes at the coolest, brioche or rye bread?", "oven temperature"),
        ("Is brioche baked hotter than sourdough?", "oven temperature"),
        ("How warm should the oven be for rye bread?", "oven temperature"),  # named whole
        # a word no clause holds tells nothing: not guessed
        ("How warm should the proving drawer be for brioche?", None),
        ("How hot can brioche get?", None),
        ("How hot should I keep rye bread?", None),
        ("Which rises warmest, brioche or sourdough?", None),
    ],
)
def test_the_kbs_clause_tells_which_of_two_temperatures_a_verb_asks(question, prop):
    assert _bakery().property_asked(question) == prop


@pytest.mark.parametrize(
    ("question", "prop"),
    [
        # the kind named as a noun ("at the lowest temperature") asks it as "hottest" does; the
        # direction word ("lowest") and the kind of thing ("which bread": its folder) tell
        # nothing of which temperature
        ("Which bakes at the lowest temperature: sourdough, brioche or rye bread?",
         "oven temperature"),
        ("Which proofs at the highest temperature, brioche or rye bread?", "room temperature"),
        ("Which bread bakes at the highest temperature: sourdough or brioche?", "oven temperature"),
        ("Which bread proofs at the lowest temperature, sourdough or brioche?",
         "room temperature"),
        ("At what temperature does brioche proof?", "room temperature"),
        ("What temperature should sourdough bake at?", "oven temperature"),
        ("At what temperature is rye bread baked?", "oven temperature"),
        ("Which has the lowest density: sourdough or brioche?", "density"),
        # no clause holds the question's other words, or it has none: not guessed
        ("What is the temperature of brioche?", None),
        ("Which bread is kept at the lowest temperature?", None),
        ("Which loaf rises at the highest temperature, sourdough or brioche?", None),
        ("Which is stored at the highest temperature: sourdough or rye bread?", None),
    ],
)  # fmt: skip
def test_a_kind_named_as_a_noun_is_asked_as_its_adjective_asks_it(question, prop):
    rows = [(c.text, f"bread/{c.source}", c.heading) for c in _bakery_chunks()]
    bakery = chunk_vocabulary([Chunk(chunk_id(t, s, h), t, s, heading=h) for t, s, h in rows])
    assert bakery.property_asked(question) == prop


@functools.cache
def _kitchen_fats():
    rows = [
        ("Olive oil smokes at a smoke temperature of 190-210 °C.", "oil/olive_oil.md",
         "Olive oil > Heat"),
        ("Olive oil has a density of 0.91 g/cm3.", "oil/olive_oil.md", "Olive oil > Density"),
        ("Coconut oil smokes at a smoke temperature of 175 °C.", "oil/coconut_oil.md",
         "Coconut oil > Heat"),
        ("Coconut oil has a density of 0.92 g/cm3.", "oil/coconut_oil.md", "Coconut oil > Density"),
        ("Smoked oil smokes at a smoke temperature of 160 °C.", "oil/smoked_oil.md",
         "Smoked oil > Heat"),
        ("Smoked oil has a density of 0.93 g/cm3.", "oil/smoked_oil.md", "Smoked oil > Density"),
        ("Butter smokes at a smoke temperature of 150 °C and melts at a melting temperature of "
         "32-35 °C.", "fat/butter.md", "Butter > Heat"),
        ("Ghee smokes at a smoke temperature of 250 °C and melts at a melting temperature of "
         "30-40 °C.", "fat/ghee.md", "Ghee > Heat"),
    ]  # fmt: skip
    return chunk_vocabulary([Chunk(chunk_id(t, s, h), t, s, heading=h) for t, s, h in rows])


@pytest.mark.parametrize(
    ("question", "prop"),
    [
        # "heat" standing alone names a temperature, as "temperature" does (held-out: "Which glue
        # handles more heat, cyanoacrylate or two-part epoxy?" read none, and led with strength)
        ("Which oil takes more heat, olive oil or coconut oil?", "smoke temperature"),
        ("How much heat can coconut oil take?", "smoke temperature"),
        ("Which can take more heat: ghee or coconut oil?", "smoke temperature"),
        ("What temp does olive oil smoke at?", "smoke temperature"),
        # ... of the things of the kind asked for ("which oil": oil/), none named
        ("Which oil handles the most heat?", "smoke temperature"),
        # ... not where it opens a longer name, nor where it asks whether
        ("What is the heat capacity of olive oil?", None),
        ("Does butter handle heat well?", None),
        ("Which melts at a higher temperature, butter or ghee?", "melting temperature"),
        # the names of things ask nothing: "smoked oil" is no smoke temperature
        ("Which is denser, smoked oil or olive oil?", "density"),
        ("Which is the densest: smoked oil, olive oil or coconut oil?", "density"),
        # a heat no word tells apart: not guessed
        ("Which handles heat better, smoked oil or olive oil?", None),
    ],
)
def test_heat_asks_a_temperature_and_a_things_name_asks_nothing(question, prop):
    assert _kitchen_fats().property_asked(question) == prop


@pytest.mark.parametrize(
    ("question", "prop"),
    [
        ("Which glue handles more heat, cyanoacrylate or two-part epoxy?", "temperature range"),
        ("Which takes more heat: PVA wood glue or hot melt glue?", "temperature range"),
        ("How much heat can PEEK rod take?", "service temperature"),
        ("Which glue handles the most heat?", "temperature range"),
    ],
)
def test_heat_asked_of_the_eval_kbs_glues_and_plastics(vocab, question, prop):
    assert vocab.property_asked(question) == prop


@pytest.mark.parametrize(
    ("question", "prop"),
    [
        # a property named only in part ("nozzle" of "nozzle temperature"), where no word asks a
        # quantity, is not asked: the nozzle is (fresh held-out: "What kind of nozzle do I need
        # for PLA-CF?" led with its nozzle temperature; "Why do my PA6 nylon prints pop and
        # bubble?" read the print speed)
        ("What kind of nozzle do I need for PLA-CF?", None),
        ("What nozzle should I use for PLA-CF?", None),
        ("What sort of nozzle suits PETG-CF?", None),
        ("What bed surface does PETG need?", None),
        ("Which kind of drying box suits PA6 nylon?", None),
        ("Why do my PA6 nylon prints pop and bubble?", None),
        # ... but a word that asks one does: an adjective of its kind, its kind's word, a figure
        # stated, a comparison, or its whole name
        ("Which filament needs the hottest nozzle?", "nozzle temperature"),
        ("what nozzle temp should I run HIPS at?", "nozzle temperature"),
        ("Which alloy yields first under load: 6061-T6 or 5052-H32?", "yield strength"),
        ("Which metal melts first, brass or copper?", "melting range"),
        ("Should I dry PA6 nylon at 80 °C?", "drying temperature"),
        ("What bed temperature for PETG?", "bed temperature"),
    ],
)
def test_a_property_named_in_part_is_asked_only_with_a_quantity(vocab, question, prop):
    assert vocab.property_asked(question) == prop
