"""Links into the docs stay valid: every markdown link between the project's pages, and every
`docs/PAGE.md#section` a comment, docstring or plan cites, names a page that exists and a
heading it has (GitHub's anchor for it). Moving a section means updating its citations."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from support.paths import REPO_ROOT

PAGES = [REPO_ROOT / "README.md", REPO_ROOT / "ARCHITECTURE.md",
         *sorted((REPO_ROOT / "docs").glob("*.md"))]
CITING = [*sorted((REPO_ROOT / "gate").rglob("*.py")), *sorted((REPO_ROOT / "gate").rglob("*.yaml")),
          *sorted((REPO_ROOT / "gate").rglob("*.j2")), *sorted((REPO_ROOT / "benchmarks").glob("*.py")),
          *sorted((REPO_ROOT / ".github" / "workflows").glob("*.yml")), REPO_ROOT / "action.yml",
          *PAGES]
MD_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
DOCS_CITATION = re.compile(r"\bdocs/([\w.-]+\.md)(?:#([\w-]+))?")
FENCE = re.compile(r"^(```|~~~)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def headings(page: Path) -> list[str]:
    out, fenced = [], False
    for line in page.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6} (.+)", line)):
            out.append(m.group(1))
    return out


def anchors(page: Path) -> set[str]:
    """Each heading's slug; a repeated slug gets -1, -2, ... as on GitHub."""
    seen: Counter[str] = Counter()
    out = set()
    for heading in headings(page):
        base = slug(heading)
        out.add(f"{base}-{seen[base]}" if seen[base] else base)
        seen[base] += 1
    return out


def problem(page: Path, anchor: str | None) -> str | None:
    if not page.is_file():
        return f"{page.relative_to(REPO_ROOT)} does not exist"
    if anchor and anchor not in anchors(page):
        return f"{page.relative_to(REPO_ROOT)} has no section #{anchor}"
    return None


def markdown_links(page: Path) -> list[tuple[Path, str | None]]:
    """Targets of the page's relative links (web links and mail are not ours to check)."""
    out = []
    for target in MD_LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        out.append(((page.parent / path).resolve() if path else page, anchor or None))
    return out


def test_slugs_follow_github():
    assert slug("Threads versus the CPU quota") == "threads-versus-the-cpu-quota"
    assert slug("Two servers of one build, and glibc's allocator") == \
        "two-servers-of-one-build-and-glibcs-allocator"
    assert slug("Artifacts of `gate profile diff`") == "artifacts-of-gate-profile-diff"
    assert slug("Seed harness (A100)") == "seed-harness-a100"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_between_pages_name_a_page_and_a_section(page):
    broken = [p for target, anchor in markdown_links(page) if (p := problem(target, anchor))]
    assert broken == []


def test_docs_cited_in_code_plans_and_pages_exist_with_their_sections():
    broken = []
    for path in CITING:
        for name, anchor in DOCS_CITATION.findall(path.read_text()):
            if p := problem(REPO_ROOT / "docs" / name, anchor or None):
                broken.append(f"{path.relative_to(REPO_ROOT)}: {p}")
    assert broken == []


def test_the_check_finds_citations():
    """The checks above cannot pass by finding nothing."""
    cited = {name for path in CITING for name, _ in DOCS_CITATION.findall(path.read_text())}
    assert {"background.md", "profile.md", "compare.md"} <= cited
    assert any(anchor for page in PAGES for _, anchor in markdown_links(page))
