"""`collective models`: provenance a user can read, and the licences shipped in the package."""

from __future__ import annotations

import json
import re
from importlib import resources

from collective.models.embedded import EMBEDDED_MODELS
from tests.cli import run


def test_every_embedded_model_is_listed_with_its_provenance():
    code, out, err = run(["models", "--json"])
    assert code == 0, err
    found = {m["name"]: m for m in json.loads(out)}
    assert set(found) == {*EMBEDDED_MODELS, "all-MiniLM-L6-v2"}
    for key, model in EMBEDDED_MODELS.items():
        assert found[key]["sha256"] == model.sha256
        assert found[key]["packages"][: model.parts] == model.requirements
    for name, model in found.items():
        assert model["upstream"].startswith("https://huggingface.co/"), name
        assert re.fullmatch(r"[0-9a-f]{64}", model["sha256"]), name
        assert model["packages"] and all("==" in p for p in model["packages"]), name
        assert model["size"] > 10_000_000 and model["path"], name
        licence_file = re.search(r"collective/data/licenses/(\S+)\)", model["licence"]).group(1)
        assert (resources.files("collective") / "data/licenses" / licence_file).is_file(), name
    assert found["gemma-3-270m"]["licence"].startswith("Gemma Terms of Use")
    assert found["qwen2.5-coder-1.5b"]["licence"].startswith("Apache-2.0")


def test_the_licence_texts_ship_in_the_package():
    licences = resources.files("collective") / "data/licenses"
    apache = (licences / "Apache-2.0.txt").read_text()
    assert "Apache License" in apache and "Version 2.0, January 2004" in apache
    assert "Gemma Terms of Use" in (licences / "Gemma-Terms-of-Use.html").read_text()


def test_the_listing_names_each_model_with_its_upstream_and_licence():
    code, out, _ = run(["models"])
    assert code == 0
    for name in (*EMBEDDED_MODELS, "all-MiniLM-L6-v2"):
        assert re.search(rf"^{re.escape(name)}  \(", out, re.M), name
    assert out.count("  licence   ") == out.count("  upstream  ") == len(EMBEDDED_MODELS) + 1
