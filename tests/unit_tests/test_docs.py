"""The README stays short, its docs links resolve, and every rendered figure is current."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from bench import render_docs

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 250
DOCS_LINK = re.compile(r"\]\((docs/[^)#\s]+\.md)(#[^)\s]*)?\)")


def test_bench_is_this_checkout() -> None:
    assert Path(render_docs.__file__).resolve().parent == ROOT / "bench"


def test_the_readme_is_at_most_250_lines() -> None:
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (limit {README_MAX_LINES})"


def test_the_readme_does_not_say_when_a_figure_was_measured() -> None:
    """The README says what is true now; when a run happened is in docs/ and the CHANGELOG."""
    headlines = render_docs.render_readme_headlines(ROOT / "bench" / "results")
    assert "UTC" not in headlines
    assert re.search(r"\b20\d\d-\d\d-\d\d\b", headlines) is None
    assert re.search(r"\b20\d\d-\d\d-\d\d\b", (ROOT / "README.md").read_text()) is None


def docs_links(text: str) -> list[str]:
    return [match.group(1) for match in DOCS_LINK.finditer(text)]


def test_every_docs_link_of_the_readme_resolves() -> None:
    links = docs_links((ROOT / "README.md").read_text())
    assert links, "the README links its docs"
    assert [link for link in links if not (ROOT / link).is_file()] == []


def test_a_broken_docs_link_is_found() -> None:
    links = docs_links("see [x](docs/architecture.md#the-graph) and [y](docs/nowhere.md)")
    assert links == ["docs/architecture.md", "docs/nowhere.md"]
    assert not (ROOT / "docs/nowhere.md").is_file()


def test_every_region_marker_has_an_end() -> None:
    for path in render_docs.documents(ROOT):
        render_docs.regions(path.read_text())  # raises on an unmatched marker
    assert render_docs.regions((ROOT / "README.md").read_text()), "the README has regions"


@pytest.mark.parametrize(
    "text",
    [
        "<!-- bench:locomo-table -->\nno end\n",
        "<!-- bench:locomo-table -->\n<!-- bench:peers-table -->\n<!-- /bench -->\n",
        "a stray end\n<!-- /bench -->\n",
    ],
)
def test_an_unterminated_region_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        render_docs.regions(text)


def test_the_rendered_regions_are_current() -> None:
    assert render_docs.main(["--check", "--root", str(ROOT)]) == 0


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", root / "docs")
    shutil.copytree(ROOT / "bench" / "results", root / "bench" / "results", ignore=_no_png)
    # the configuration tables come from the installed models, not from files
    shutil.copy(ROOT / "README.md", root / "README.md")
    return root


def _no_png(_: str, names: list[str]) -> list[str]:
    return [name for name in names if name.endswith(".png")]


def test_a_stale_region_fails_the_check_and_rendering_fixes_it(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    readme = root / "README.md"
    text = readme.read_text()
    name, start, end = render_docs.regions(text)[0]
    readme.write_text(text[:start] + "\nretyped by hand: 0.999\n" + text[end:])
    assert render_docs.main(["--check", "--root", str(root)]) == 1
    assert render_docs.main(["--root", str(root)]) == 0
    assert readme.read_text() == text, f"region {name} rendered back"
    assert render_docs.main(["--check", "--root", str(root)]) == 0


def test_a_changed_result_makes_its_region_stale(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    locomo = root / "bench" / "results" / "locomo.json"
    data = json.loads(locomo.read_text())
    data["results"]["memory_in_budget"]["overall_1_4"] -= 0.1  # the headline figure
    locomo.write_text(json.dumps(data))
    assert render_docs.main(["--check", "--root", str(root)]) == 1
