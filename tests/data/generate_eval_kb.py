# ruff: noqa: E501 -- the fact tables are one record per line on purpose
"""Generate the retrieval evaluation set: a workshop-materials KB and labelled queries.

Deterministic: the KB files (tests/data/eval_kb/*.md) are rendered from the fact tables below,
the easy queries from templates over the same facts, the hard queries are hand-written
paraphrases. Chunk ids come from ingesting the files with the real SqliteKnowledgeStore
(sources relative to tests/data), so they match what `bench/retrieval_eval.py` ingests.

Run: .venv/bin/python tests/data/generate_eval_kb.py
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from collective.kb.sqlite_store import SqliteKnowledgeStore  # noqa: E402

# -- facts ------------------------------------------------------------------------------------

# name | density g/cm3 | melting °C | strength | corrosion | machining | welding | uses | cost
METALS = """
6061-T6 aluminium|2.70|582-652|ultimate tensile strength about 310 MPa, yield about 276 MPa|good general corrosion resistance thanks to its oxide layer, and it anodizes well|machines easily with good chip formation|weldable by TIG or MIG, but the heat-affected zone loses much of the T6 strength|frames, brackets, bicycle parts and general structures|inexpensive and stocked everywhere in plate, bar and tube
7075-T6 aluminium|2.81|477-635|ultimate tensile strength about 572 MPa, yield about 503 MPa, close to many steels|poorer than 6061 and prone to stress corrosion cracking, so parts are usually anodized or clad|machines very well to a fine finish|generally considered unweldable by fusion processes because it hot-cracks|aircraft structures, climbing gear and highly stressed parts|noticeably more expensive than 6061
5052-H32 aluminium|2.68|607-650|ultimate tensile strength about 228 MPa, yield about 193 MPa|excellent, including seawater and salt spray, which is why it is called marine grade|gummy to machine, better suited to sheet work|welds easily and bends tightly without cracking|sheet-metal enclosures, boat hulls and fuel tanks|moderately priced, mostly sold as sheet
304 stainless steel|8.00|1400-1450|ultimate tensile strength 505-620 MPa, yield about 215 MPa|resists atmospheric corrosion and food acids, but pits and crevice-corrodes in chlorides and seawater|work-hardens quickly; use sharp tools, slow speeds and steady feeds|welds well with common processes|kitchen equipment, sinks, food processing and architectural trim|moderately expensive
316 stainless steel|8.00|1375-1400|ultimate tensile strength 515-620 MPa, yield about 205 MPa|its molybdenum content resists chlorides, making it the marine grade for salt water and de-icing salts|work-hardens like 304 and needs rigid setups|welds well; choose 316L for heavy welded sections to avoid sensitisation|boat fittings, marine hardware, chemical plants and medical devices|pricier than 304
1018 mild steel|7.87|1450-1520|ultimate tensile strength about 440 MPa, yield about 370 MPa|rusts readily unless painted, plated or oiled|machines well and takes a good finish|excellent weldability with any process|shafts, pins, brackets and general fabrication|cheap and widely available
O1 tool steel|7.81|about 1420|can be oil-quenched and tempered to 57-62 HRC for high hardness and edge retention|rusts easily and must be kept oiled|machinable in the annealed state, then hardened|poor weldability; needs preheat and careful post-heat to avoid cracking|knives, punches, dies and cutting tools|moderately priced, sold as precision ground flat stock
C360 brass|8.50|885-900|ultimate tensile strength 340-470 MPa|good in water and air, tarnishes, and can dezincify in aggressive water|the benchmark free-machining alloy with a machinability rating of 100|poorly suited to welding; soldering and brazing work better|plumbing fittings, valves, gears and decorative hardware|expensive because of its copper content
C110 copper|8.96|1083|ultimate tensile strength about 220 MPa|resists corrosion and develops a green patina outdoors|gummy and difficult to machine cleanly|hard to weld because it conducts heat away so fast, but solders and brazes easily|electrical bus bars, heat exchangers and wiring|expensive, and the price follows the copper market
Ti-6Al-4V titanium|4.43|1604-1660|ultimate tensile strength about 950 MPa, yield about 880 MPa, with an excellent strength-to-weight ratio|outstanding, including seawater and body fluids|difficult: low thermal conductivity concentrates heat at the tool and it galls|weldable only under full inert gas shielding|aerospace parts, medical implants and high-end bicycle parts|very expensive
gray cast iron|7.20|1150-1200|weak and brittle in tension (about 200-400 MPa) but strong in compression, and it damps vibration|surface rusts but thick sections last for decades|machines easily because its graphite flakes lubricate the cut, though it is dusty|difficult to weld and prone to cracking; brazing is common for repairs|machine tool bases, engine blocks and cookware|cheap to cast in complex shapes
C932 bearing bronze|8.90|855-980|ultimate tensile strength about 240 MPa with good fatigue and wear behaviour|excellent, including seawater|machines well|poor weldability|bushings, plain bearings and thrust washers|expensive
"""

# name | nozzle °C | bed °C | heat | drying | warping/enclosure | mechanics | uses | notes
FILAMENTS = """
PLA|190-220|50-60|softens near its glass transition of about 60 °C, so parts sag in hot cars|dry at 45-50 °C for 4-6 hours if it strings|barely warps and needs no enclosure|stiff but brittle, snapping rather than bending|prototypes, figurines and indoor fixtures|low odour and the easiest material for beginners
PETG|230-250|70-85|glass transition about 80 °C, heat deflection about 70 °C|dry at 60-65 °C for 4-6 hours|warps little; an enclosure is not needed|tough and slightly flexible, it bends before breaking|functional brackets, containers and mild outdoor parts|bonds so strongly to smooth PEI that a glue-stick release layer is advised
ABS|230-260|95-110|heat deflection about 95-100 °C|dry at 70-80 °C for 4 hours|shrinks and warps; needs a warm enclosure and no drafts|tough and impact resistant|housings, automotive interior parts and tool handles|releases styrene fumes, so ventilate or filter; can be smoothed with acetone vapour
ASA|240-260|90-110|heat deflection about 95 °C|dry at 70-80 °C for 4 hours|warps somewhat less than ABS but still wants an enclosure|tough, similar to ABS|outdoor fixtures, car exterior parts and garden equipment|UV stable, keeping colour and strength in years of sunlight
TPU 95A|210-230|40-60|stays flexible across a wide range and softens above roughly 80-100 °C|dry at 50-55 °C for 4-6 hours; it absorbs moisture quickly|does not warp|rubber-like, abrasion resistant and fatigue resistant|gaskets, phone cases, bumpers and vibration dampers|print slowly (15-30 mm/s) with a direct-drive extruder
PA6 nylon|250-280|70-90|heat deflection around 70-80 °C under load when conditioned, higher when dry|very hygroscopic; dry at 70-80 °C for 8-12 hours and print from a dry box|warps; use an enclosure and a garolite or PVA-glue surface|very tough with low friction and good wear resistance|gears, hinges and bushings|absorbs water from room air within hours, which makes prints pop and bubble
PA12 nylon|240-270|70-90|heat deflection around 80-90 °C|less hygroscopic than PA6 but still dry at 70-80 °C for 6-8 hours|warps less than PA6|tough, with better dimensional stability than PA6|snap-fits, fluid lines and durable functional parts|absorbs about a third of the water PA6 does
polycarbonate|260-310|100-120|glass transition about 147 °C and heat deflection around 130-140 °C|dry at 80-90 °C for 6-8 hours|warps strongly; needs a hot enclosure|very strong and impact resistant|high-heat brackets, lamp housings and protective covers|needs an all-metal hotend for the high nozzle temperature
PVA|185-210|45-60|softens around 60 °C|extremely hygroscopic; store sealed and dry at 45-55 °C|does not warp much|weak; it is a support material, not a structural one|dissolvable supports for PLA on dual-extrusion printers|dissolves in plain water, so supports wash out of internal cavities
HIPS|220-240|90-110|heat deflection about 90 °C|dry at 60-70 °C for 3-4 hours|warps like ABS and likes an enclosure|lightweight and impact resistant|dissolvable supports for ABS and light prototypes|dissolves in d-limonene, a citrus-based solvent
polypropylene|220-250|80-100|heat deflection about 90-100 °C|absorbs almost no water; drying is rarely needed|warps badly and sticks only to PP tape or PP sheets|tough, very chemically resistant, and survives repeated folding as living hinges|living hinges, chemical containers and lab parts|very low density, about 0.9 g/cm3, so it floats
PEEK|370-450|120-160|glass transition about 143 °C and continuous use up to about 250 °C|dry at 120-150 °C for 3-4 hours|needs a heated chamber of 70-120 °C and an industrial printer|very strong, chemically inert and flame resistant|aerospace brackets, medical and oil-and-gas parts|filament is very expensive and ordinary desktop hotends cannot reach its temperature
PLA-CF|210-230|50-60|similar to PLA, about 60 °C|dry at 45-50 °C|barely warps|stiffer than plain PLA but more brittle|stiff jigs, drone frames and matte-finish parts|abrasive carbon fibres wear brass nozzles; use hardened steel
PETG-CF|240-260|70-85|slightly higher than PETG, about 75 °C|dry at 60-65 °C for 4-6 hours|warps little|stiffer than PETG with less stringing|brackets, mounts and tooling|abrasive; requires a hardened or ruby nozzle
PA-CF|260-290|80-100|heat deflection up to about 150 °C when dried, among the best of desktop materials|must be dried at 80 °C for 8-12 hours|warps less than plain nylon thanks to the fibres|very stiff and strong|automotive brackets, end-of-arm tooling and functional prototypes|abrasive and hygroscopic; hardened nozzle plus dry box
TPE 85A|210-230|30-50|softens around 80 °C|dry at 50 °C for 4 hours|does not warp|very soft and stretchy|soft grips, seals and wearable straps|buckles in the extruder; needs a direct drive with a constrained filament path and very slow speeds
"""

# name | density & Janka hardness | workability | outdoor | finishing | uses | cost
WOODS = """
white oak|about 0.75 g/cm3; Janka hardness about 1360 lbf|works well with sharp tools but is heavy on blades and splits if nailed near edges|highly rot resistant because its pores are plugged with tyloses, so it is used for barrels and boats|takes stain well and shows striking ray fleck when quartersawn|furniture, flooring, barrels and boat building|moderately priced
red oak|about 0.70 g/cm3; Janka hardness about 1290 lbf|machines and glues well|poor outdoors: its open pores wick water and it rots quickly|open grain needs a grain filler for a glass-smooth finish|furniture, cabinets, flooring and trim|inexpensive for a hardwood
hard maple|about 0.70 g/cm3; Janka hardness about 1450 lbf|hard to work by hand and prone to burning on router and saw cuts|not durable outdoors|blotches with stain; clear finishes or gel stains work better|butcher blocks, cutting boards, bowling alleys and workbench tops|moderately priced
eastern white pine|about 0.40 g/cm3; Janka hardness about 380 lbf|soft and easy to cut, carve and nail|low decay resistance unless pressure-treated or painted|knots bleed resin through paint unless sealed with shellac first|trim, shelving, carving and construction|cheap
black walnut|about 0.61 g/cm3; Janka hardness about 1010 lbf|works, carves and turns beautifully|heartwood is fairly durable outdoors|finishes beautifully with oil; rarely needs stain|fine furniture, gunstocks and turned bowls|expensive
black cherry|about 0.56 g/cm3; Janka hardness about 950 lbf|machines smoothly but burns easily|moderately durable|darkens from pink to deep reddish-brown with light exposure; blotches with stain|cabinets, fine furniture and turnings|moderately expensive
birch plywood|about 0.68 g/cm3; hard faces|cuts cleanly with a fine-tooth blade; edges need banding|interior grades delaminate in damp conditions; use marine or exterior plywood outdoors|smooth faces paint well|cabinet carcasses, jigs, drawers and laser cutting|moderately priced per sheet
MDF|about 0.75 g/cm3; uniform with no grain|machines cleanly but its dust is very fine, so wear a respirator|swells and crumbles when wet|paints very smoothly once edges are sealed|painted cabinets, speaker boxes and templates|cheap
teak|about 0.65 g/cm3; Janka hardness about 1070 lbf|its silica content dulls tools quickly|excellent weather and rot resistance thanks to its natural oils|oily surface resists glue and finish; wipe with acetone first|boat decks, outdoor furniture and cutting boards|very expensive
western red cedar|about 0.37 g/cm3; Janka hardness about 350 lbf|light, soft and easy to work|naturally rot and insect resistant|weathers to silver grey unless finished; tannins can stain iron fasteners|siding, fences, decks and outdoor furniture|moderately priced
white ash|about 0.67 g/cm3; Janka hardness about 1320 lbf|bends well with steam and machines cleanly|not durable outdoors|takes stain well|tool handles, baseball bats and bent furniture parts|moderately priced
balsa|about 0.10-0.20 g/cm3; extremely soft|cuts with a hobby knife|not durable|needs sealing before paint|model aircraft, floats and sandwich cores|cheap in small sizes
"""

# name | cure | gap filling | bonds | strength | temperature | safety
ADHESIVES = """
cyanoacrylate (super glue)|sets in seconds to a minute; full strength in about 24 hours; accelerator sprays make it instant|poor gap filling unless a thick gel grade is used|bonds plastics, metal, rubber and skin; polyethylene and polypropylene need a primer|high tensile strength but brittle in peel and impact|fails above about 80 °C|bonds skin instantly; acetone dissolves it
two-part epoxy|5-minute grades set quickly, but structural grades need 24 hours to cure fully|excellent gap filling without shrinking|bonds metal, wood, ceramics and most plastics|very strong in shear; the best choice for structural joints|most grades handle up to about 90-120 °C|uncured resin sensitises skin; wear gloves
PVA wood glue|clamp for 30-60 minutes; full cure in 24 hours|poor; needs tight-fitting joints|wood, paper and other porous materials only|stronger than the wood itself in a good joint|softens with heat and creeps under sustained load|non-toxic and cleans up with water; Type II and III grades resist water
polyurethane glue|cures in 1-4 hours using moisture from the air|foams and expands to fill gaps, but the foam itself is weak|wood, stone, metal, ceramics and foam|strong and waterproof|handles outdoor temperature swings well|stains skin for days; wear gloves
hot melt glue|sets in under a minute as it cools|fills gaps well|wood, fabric, cardboard and many plastics|weak, useful for fixtures and crafts|softens again around 60-80 °C|the gun and glue can cause burns
contact cement|apply to both surfaces, wait until tacky, then press: the bond is instant|none; needs flat mating surfaces|laminates, veneers, leather and rubber|good peel strength over large areas|moderate heat resistance|solvent-based grades are flammable and need ventilation
silicone sealant|skins in 10-30 minutes and cures about 2 mm per day|fills gaps and stays flexible|glass, ceramics, metal and many plastics; paint does not stick to it|weak but very flexible|stays flexible from about -50 to 200 °C|acetic-cure types smell of vinegar and can corrode some metals
methacrylate structural adhesive|working time 5-15 minutes, handling strength within an hour|good gap filling|metals, composites and hard plastics with minimal surface preparation|very high strength and toughness, even on oily metal|good heat resistance, around 120 °C for many grades|strong odour; ventilate the work area
"""

# Engineering plastics as sheet and rod stock: numeric properties for the council eval's wide
# questions (compare 5-10 of them); their sections are not among the retrieval eval's templates.
# name | density g/cm3 | continuous service °C | tensile MPa | friction and wear | chemicals | uses
PLASTICS = """
HDPE|0.95|80|26|low friction and good wear resistance, but it creeps under load|resists most acids, bases and solvents|cutting boards, tanks and chemical liners
UHMW-PE|0.93|82|42|the best abrasion resistance of common plastics and very low friction|excellent; almost nothing dissolves it at room temperature|wear strips, chute liners and conveyor guides
acetal|1.41|105|67|low friction and excellent dimensional stability, ideal for moving parts|good with fuels and solvents, attacked by strong acids|precision gears, bushings and snap fits
nylon 66|1.14|95|82|tough with good wear resistance, but it swells as it absorbs water|good with oils and fuels, poor with acids|gears, rollers and wear pads
PTFE|2.17|260|24|the lowest friction of any solid plastic, but it creeps and wears fast unfilled|inert to almost every chemical|seals, gaskets and non-stick bearings
PVC|1.40|60|52|moderate wear; not a bearing material|resists acids, bases and salts; attacked by ketones|pipes, tanks and electrical enclosures
acrylic|1.19|78|72|scratches easily|attacked by many solvents, resists dilute acids|windows, light guides and display cases
polycarbonate sheet|1.20|120|64|poor wear and scratch resistance without a hard coat|attacked by solvents and alkalis|machine guards, safety glazing and riot shields
PEEK rod|1.31|250|98|excellent wear resistance at high temperature|resists almost everything but concentrated sulphuric acid|pump parts, valve seats and aerospace bushings
PET-P|1.39|110|85|low friction and wear, better than acetal in humid air|good with dilute acids and oils|food-machinery parts and precision bearings
ABS sheet|1.05|70|44|moderate wear|attacked by acetone and many solvents|housings, vacuum-formed trays and signage
polypropylene sheet|0.90|100|33|moderate wear and a waxy surface|excellent against acids, bases and many solvents|chemical tanks, lab benches and living hinges
PVDF|1.78|145|48|good abrasion resistance|resists acids, halogens and most solvents|chemical pipework, pump housings and membranes
polysulfone|1.24|160|70|moderate wear|resists hydrolysis and steam, attacked by polar solvents|steam-sterilised medical parts and hot-water fittings
"""

PLASTIC_SECTIONS = [
    ("Density", "{Name} stock has a density of {1} g/cm3."),
    ("Service temperature", "{Name} is rated for continuous service up to {2} °C."),
    ("Tensile strength", "The tensile strength of {name} is about {3} MPa."),
    ("Friction and wear", "Friction and wear of {name}: {4}."),
    ("Chemical resistance", "Chemical resistance of {name}: {5}."),
    ("Applications", "{Name} is used for {6}."),
]

METAL_SECTIONS = [
    ("Density and melting range", "{name} has a density of about {1} g/cm3 and melts over {2} °C."),
    ("Strength", "Typical figures for {name}: {3}."),
    ("Corrosion resistance", "Corrosion resistance of {name}: {4}."),
    ("Machining", "Machining {name}: {5}."),
    ("Welding and joining", "Welding {name}: {6}."),
    ("Typical uses", "Common uses of {name} include {7}."),
    ("Cost and availability", "{Name} is {8}."),
]
FILAMENT_SECTIONS = [
    (
        "Print temperatures",
        "{name} prints at a nozzle temperature of {1} °C with the bed at {2} °C.",
    ),
    ("Heat resistance", "Heat resistance of {name}: {3}."),
    ("Drying", "Drying {name}: {4}."),
    ("Warping and enclosure", "{Name} {5}."),
    ("Mechanical behaviour", "Printed {name} parts are {6}."),
    ("Typical uses", "{Name} is used for {7}."),
    ("Notes", "{Name}: {8}."),
]
WOOD_SECTIONS = [
    ("Density and hardness", "{Name} has a density of {1}."),
    ("Workability", "Working {name}: {2}."),
    ("Outdoor durability", "Outdoor durability of {name}: {3}."),
    ("Finishing", "Finishing {name}: {4}."),
    ("Typical uses", "{Name} is used for {5}."),
    ("Cost", "{Name} is {6}."),
]
ADHESIVE_SECTIONS = [
    ("Cure time", "Cure time of {name}: {1}."),
    ("Gap filling", "Gap filling with {name}: {2}."),
    ("What it bonds", "{Name} bonds {3}."),
    ("Strength", "Strength of {name}: {4}."),
    ("Temperature range", "Temperature range of {name}: {5}."),
    ("Safety and cleanup", "Safety and cleanup for {name}: {6}."),
]


# Other names a curator gives a document, in its front matter (`names:`): the trade names,
# acronyms, chemical names and spellings people ask by, which the KB's vocabulary reads
# (docs/kb-vocabulary.md) and no title holds.
NAMES = {
    "PTFE": "Teflon, polytetrafluoroethylene",
    "acetal": "POM, Delrin, polyoxymethylene",
    "acrylic": "PMMA, Plexiglas, Perspex",
    "polycarbonate sheet": "Lexan",
    "PVDF": "Kynar, polyvinylidene fluoride",
    "UHMW-PE": "UHMWPE",
    "HDPE": "high-density polyethylene",
    "polysulfone": "PSU",
    "PVC": "polyvinyl chloride",
    "nylon 66": "PA66",
    "cyanoacrylate (super glue)": "CA glue",
    "hot melt glue": "hot glue",
    "PLA": "polylactic acid",
    "ABS": "acrylonitrile butadiene styrene",
    "TPU 95A": "thermoplastic polyurethane",
    "PVA": "polyvinyl alcohol",
    "gray cast iron": "grey cast iron",
    "Ti-6Al-4V titanium": "grade 5 titanium",
    "hard maple": "sugar maple, rock maple",
    "MDF": "medium-density fibreboard",
}


def _table(raw: str) -> list[list[str]]:
    return [line.split("|") for line in raw.strip().splitlines()]


def slug(name: str) -> str:
    """File-name form of an entity name."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def _render(category: str, rows: list[list[str]], sections: list[tuple[str, str]]) -> dict:
    files = {}
    for row in rows:
        name = row[0]
        fields = {f"f{i}": v for i, v in enumerate(row)}
        front = ["---", f"names: {NAMES[name]}", "---"] if name in NAMES else []
        lines = [*front, f"# {name}", "", f"tags: {category}", ""]
        for title, template in sections:
            text = re.sub(r"\{(\d)\}", r"{f\1}", template).format(
                **fields, name=name, Name=name[0].upper() + name[1:]
            )
            lines += [f"## {title}", text, ""]
        files[f"{category}/{slug(name)}.md"] = "\n".join(lines)
    return files


def render_kb() -> dict[str, str]:
    """Every KB file's relative path and Markdown text."""
    files = {}
    files |= _render("metal", _table(METALS), METAL_SECTIONS)
    files |= _render("filament", _table(FILAMENTS), FILAMENT_SECTIONS)
    files |= _render("wood", _table(WOODS), WOOD_SECTIONS)
    files |= _render("adhesive", _table(ADHESIVES), ADHESIVE_SECTIONS)
    files |= _render("plastic", _table(PLASTICS), PLASTIC_SECTIONS)
    return files


# -- queries ----------------------------------------------------------------------------------

# Easy: the entity's name and the section's own words. (entity, section, question)
EASY_TEMPLATES = {
    "Density and melting range": "What is the density and melting point of {name}?",
    "Strength": "What is the tensile strength of {name}?",
    "Corrosion resistance": "How good is the corrosion resistance of {name}?",
    "Machining": "Is {name} easy to machine?",
    "Welding and joining": "Can you weld {name}?",
    "Print temperatures": "What nozzle and bed temperature for printing {name}?",
    "Heat resistance": "What is the heat resistance of {name}?",
    "Drying": "How do I dry {name} filament?",
    "Warping and enclosure": "Does {name} warp, does it need an enclosure?",
    "Density and hardness": "What is the Janka hardness of {name}?",
    "Outdoor durability": "Is {name} durable outdoors?",
    "Finishing": "How do I finish {name}?",
    "Cure time": "What is the cure time of {name}?",
    "Temperature range": "What temperature range can {name} handle?",
    "Gap filling": "Is {name} good at gap filling?",
}

# Hard: paraphrases that avoid the section's wording and often the entity's name.
# (question, [(file, section), ...]) -- every listed chunk answers the question.
HARD = [
    (
        "Which metal should I use for a boat cleat that sits in salt water for years?",
        [
            ("metal/316_stainless_steel.md", "Corrosion resistance"),
            ("metal/5052_h32_aluminium.md", "Corrosion resistance"),
            ("metal/ti_6al_4v_titanium.md", "Corrosion resistance"),
            ("metal/c932_bearing_bronze.md", "Corrosion resistance"),
        ],
    ),
    (
        "My printed phone mount drooped on the dashboard in July, what went wrong?",
        [("filament/pla.md", "Heat resistance"), ("filament/pla_cf.md", "Heat resistance")],
    ),
    (
        "The spool crackles and pops and the parts come out full of bubbles",
        [("filament/pa6_nylon.md", "Notes"), ("filament/pa6_nylon.md", "Drying")],
    ),
    (
        "Why do the corners of my big printed box curl up off the plate?",
        [
            ("filament/abs.md", "Warping and enclosure"),
            ("filament/asa.md", "Warping and enclosure"),
            ("filament/polycarbonate.md", "Warping and enclosure"),
        ],
    ),
    (
        "Which plastic can fold thousands of times without snapping, like a flip-top lid?",
        [
            ("filament/polypropylene.md", "Mechanical behaviour"),
            ("filament/polypropylene.md", "Typical uses"),
        ],
    ),
    (
        "What lumber survives rain and sun on a patio table without paint?",
        [
            ("wood/teak.md", "Outdoor durability"),
            ("wood/western_red_cedar.md", "Outdoor durability"),
            ("wood/white_oak.md", "Outdoor durability"),
        ],
    ),
    (
        "What should I make a chopping board from?",
        [("wood/hard_maple.md", "Typical uses"), ("wood/teak.md", "Typical uses")],
    ),
    (
        "Which glue will hold a wobbly chair rung where the joint is loose and sloppy?",
        [
            ("adhesive/two_part_epoxy.md", "Gap filling"),
            ("adhesive/polyurethane_glue.md", "Gap filling"),
            ("adhesive/methacrylate_structural_adhesive.md", "Gap filling"),
        ],
    ),
    (
        "I glued my fingers together, how do I get them apart?",
        [("adhesive/cyanoacrylate_super_glue.md", "Safety and cleanup")],
    ),
    (
        "How can I get support material out of a hollow part without cutting it?",
        [
            ("filament/pva.md", "Notes"),
            ("filament/pva.md", "Typical uses"),
            ("filament/hips.md", "Notes"),
        ],
    ),
    (
        "Which aluminum is lightest yet nearly as strong as steel for a climbing carabiner?",
        [
            ("metal/7075_t6_aluminium.md", "Strength"),
            ("metal/7075_t6_aluminium.md", "Typical uses"),
        ],
    ),
    (
        "Why did the bracket I welded from aircraft aluminum crack along the bead?",
        [("metal/7075_t6_aluminium.md", "Welding and joining")],
    ),
    (
        "My drill bit squeals and stops cutting halfway through a kitchen sink",
        [("metal/304_stainless_steel.md", "Machining")],
    ),
    (
        "What material for a hip implant that the body tolerates?",
        [
            ("metal/ti_6al_4v_titanium.md", "Corrosion resistance"),
            ("metal/ti_6al_4v_titanium.md", "Typical uses"),
        ],
    ),
    (
        "Which metal makes a heavy base that soaks up lathe chatter?",
        [("metal/gray_cast_iron.md", "Strength"), ("metal/gray_cast_iron.md", "Typical uses")],
    ),
    (
        "What can I make a knife blade from in a home shop and harden it?",
        [("metal/o1_tool_steel.md", "Strength"), ("metal/o1_tool_steel.md", "Typical uses")],
    ),
    (
        "Which printed material copes best with a part right next to a car engine?",
        [
            ("filament/pa_cf.md", "Heat resistance"),
            ("filament/peek.md", "Heat resistance"),
            ("filament/polycarbonate.md", "Heat resistance"),
        ],
    ),
    (
        "My carbon fibre prints got worse and the hole in the nozzle looks bigger",
        [
            ("filament/pla_cf.md", "Notes"),
            ("filament/petg_cf.md", "Notes"),
            ("filament/pa_cf.md", "Notes"),
        ],
    ),
    (
        "The soft rubbery filament keeps tangling inside the feeder gears",
        [("filament/tpe_85a.md", "Notes"), ("filament/tpu_95a.md", "Notes")],
    ),
    (
        "Why does my freshly painted pine shelf show yellow-brown spots?",
        [("wood/eastern_white_pine.md", "Finishing")],
    ),
    (
        "The stain came out patchy on my new cabinet doors",
        [("wood/hard_maple.md", "Finishing"), ("wood/black_cherry.md", "Finishing")],
    ),
    (
        "Which board should I avoid in a bathroom because it puffs up with water?",
        [("wood/mdf.md", "Outdoor durability")],
    ),
    (
        "What do I use for a model airplane wing that must weigh almost nothing?",
        [("wood/balsa.md", "Typical uses"), ("wood/balsa.md", "Density and hardness")],
    ),
    ("How do I bend wood into a curve for a chair back?", [("wood/white_ash.md", "Workability")]),
    (
        "Which glue lets me stick laminate to a countertop in one go without clamps?",
        [("adhesive/contact_cement.md", "Cure time"), ("adhesive/contact_cement.md", "Strength")],
    ),
    (
        "What seals a shower tray and stays rubbery when hot water runs over it?",
        [
            ("adhesive/silicone_sealant.md", "Temperature range"),
            ("adhesive/silicone_sealant.md", "Gap filling"),
        ],
    ),
    (
        "My glue gun repair on the dashboard let go on a sunny day",
        [
            ("adhesive/hot_melt_glue.md", "Temperature range"),
            ("adhesive/cyanoacrylate_super_glue.md", "Temperature range"),
        ],
    ),
    (
        "Which filament stays colourful on a garden gnome left in the sun for years?",
        [("filament/asa.md", "Notes"), ("filament/asa.md", "Typical uses")],
    ),
    (
        "What gives off a smell while printing and needs an air filter?",
        [("filament/abs.md", "Notes")],
    ),
    ("Why won't paint or glue stay on my outdoor teak bench?", [("wood/teak.md", "Finishing")]),
    (
        "Which metal is easiest to turn on a lathe for small fittings?",
        [
            ("metal/c360_brass.md", "Machining"),
            ("metal/1018_mild_steel.md", "Machining"),
            ("metal/6061_t6_aluminium.md", "Machining"),
        ],
    ),
    (
        "What is best for carrying high current in a power distribution bar?",
        [("metal/c110_copper.md", "Typical uses")],
    ),
    (
        "Which sheet metal can I fold into a tight box corner without it cracking?",
        [("metal/5052_h32_aluminium.md", "Welding and joining")],
    ),
    ("Which printing material floats in water?", [("filament/polypropylene.md", "Notes")]),
]


def build(out: Path = HERE) -> dict:
    """Write the KB files and queries under `out`; return the queries document."""
    kb_dir = out / "eval_kb"
    if kb_dir.exists():
        shutil.rmtree(kb_dir)
    for rel, text in render_kb().items():
        path = kb_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteKnowledgeStore(Path(tmp) / "eval.sqlite", embedder=None)
        store.add_paths([kb_dir], base=out)
        by_ref = {}
        for chunk in store.list():
            section = chunk.heading.split(" > ")[-1]
            by_ref[(chunk.source.removeprefix("eval_kb/"), section)] = chunk.id
        total = store.count()
        store.close()

    queries = []
    names = {}
    for category, table in (
        ("metal", METALS),
        ("filament", FILAMENTS),
        ("wood", WOODS),
        ("adhesive", ADHESIVES),
    ):
        for row in _table(table):
            names[f"{category}/{slug(row[0])}.md"] = row[0]
    # Easy queries: cycle through entities and the templated sections deterministically.
    refs = sorted(r for r in by_ref if r[1] in EASY_TEMPLATES)
    for index, ref in enumerate(refs):
        if index % 5:
            continue
        question = EASY_TEMPLATES[ref[1]].format(name=names[ref[0]])
        queries.append(
            {
                "id": f"easy-{len(queries) + 1:02d}",
                "difficulty": "easy",
                "query": question,
                "relevant": [by_ref[ref]],
                "relevant_refs": [f"{ref[0]}#{ref[1]}"],
            }
        )
    for number, (question, labelled) in enumerate(HARD, 1):
        ids = [by_ref[ref] for ref in labelled]  # KeyError here means a label is wrong
        queries.append(
            {
                "id": f"hard-{number:02d}",
                "difficulty": "hard",
                "query": question,
                "relevant": ids,
                "relevant_refs": [f"{f}#{s}" for f, s in labelled],
            }
        )
    doc = {"kb": "eval_kb", "chunks": total, "queries": queries}
    (out / "eval_queries.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return doc


if __name__ == "__main__":
    result = build()
    easy = sum(q["difficulty"] == "easy" for q in result["queries"])
    print(f"{result['chunks']} chunks, {len(result['queries'])} queries ({easy} easy)")
