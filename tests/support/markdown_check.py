"""What a markdown document shows once rendered, with a real CommonMark renderer
(markdown-it-py, GFM tables, raw HTML allowed as GitHub allows its safe subset): the HTML tags
and the text outside code, where GitHub would make @mentions, #refs and images live; and the
links GitHub's own renderer (cmark-gfm, through cmarkgfm, autolinks included) would make."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

import cmarkgfm
from markdown_it import MarkdownIt

# Tags the gate's own layout produces.
OWN_TAGS = {"details", "summary", "code", "b", "sub", "a", "p", "h3", "h4", "table", "thead",
            "tbody", "tr", "th", "td", "ul", "li", "hr", "pre", "em", "strong"}
LIVE_MENTION = re.compile(r"@(?!\u200d)[A-Za-z0-9]")
LIVE_REF = re.compile(r"#(?!\u200d)\d")


@dataclass
class Rendered:
    tags: list[str] = field(default_factory=list)  # every start tag, code included
    text_outside_code: list[str] = field(default_factory=list)
    strong: list[str] = field(default_factory=list)  # text shown in bold
    code: list[str] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)  # live HTML comments (hidden tags)

    @property
    def outside(self) -> str:
        return "".join(self.text_outside_code)

    def live_mentions(self) -> list[str]:
        return LIVE_MENTION.findall(self.outside)

    def live_refs(self) -> list[str]:
        return LIVE_REF.findall(self.outside)


class _Walker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out = Rendered()
        self.stack: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.out.tags.append(tag)
        if tag not in ("img", "br", "hr", "input"):
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in self.stack:
            while self.stack and self.stack.pop() != tag:
                pass

    def handle_comment(self, data):
        self.out.comments.append(f"<!--{data}-->")

    def handle_data(self, data):
        if "code" in self.stack or "pre" in self.stack:
            self.out.code.append(data)
            return
        self.out.text_outside_code.append(data)
        if "strong" in self.stack or "b" in self.stack:
            self.out.strong.append(data)


def render(md: str) -> Rendered:
    html = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(md)
    walker = _Walker()
    walker.feed(html)
    return walker.out


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.hrefs += [value or "" for name, value in attrs if name == "href"]


def github_links(md: str) -> list[str]:
    """Every link target in `md` as github.com renders it (GFM with its autolink extension)."""
    parser = _Links()
    parser.feed(cmarkgfm.github_flavored_markdown_to_html(md))
    return parser.hrefs
