#!/usr/bin/env python3
"""Checks every relative link of README.md and the book's markdown (docs/book/src): the file
it names must exist, and its #anchor must be an id in the page mdbook built for it.

Usage: book-links.py BUILT_HTML_DIR. Exits 1 listing each broken link as file:line.
Links to http(s) and mailto are not checked (CI has no network)."""
import html.parser
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SRC = os.path.join(ROOT, "docs", "book", "src")
LINK = re.compile(r"\]\(([^)\s]+)\)")


class Ids(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)


def html_ids(built, md_path, cache={}):
    rel = os.path.relpath(md_path, SRC)
    page = os.path.join(built, os.path.splitext(rel)[0] + ".html")
    if page not in cache:
        parser = Ids()
        try:
            with open(page, encoding="utf-8") as f:
                parser.feed(f.read())
            cache[page] = parser.ids
        except FileNotFoundError:
            cache[page] = None
    return cache[page]


def links(path):
    """(line number, target) of each markdown link outside code blocks and code spans."""
    fence = None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            stripped = line.lstrip()
            if stripped.startswith(("```", "~~~")):
                marker = stripped[:3]
                fence = None if fence == marker else (fence or marker)
                continue
            if fence:
                continue
            text = re.sub(r"`[^`]*`", "", line)
            for m in LINK.finditer(text):
                yield n, m.group(1)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    built = sys.argv[1]
    files = [os.path.join(ROOT, "README.md")]
    for d, _, names in os.walk(SRC):
        files += [os.path.join(d, n) for n in sorted(names) if n.endswith(".md")]
    bad = []
    checked = 0
    for md in files:
        for n, target in links(md):
            if re.match(r"^[a-z]+:", target):
                continue
            checked += 1
            where = f"{os.path.relpath(md, ROOT)}:{n}: {target}"
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
            if not os.path.exists(dest):
                bad.append(f"{where}: no such file")
                continue
            if not anchor:
                continue
            if not dest.startswith(SRC + os.sep) or not dest.endswith(".md"):
                bad.append(f"{where}: an anchor into a file outside the book")
                continue
            ids = html_ids(built, dest)
            if ids is None:
                bad.append(f"{where}: the book has no page for it (not in SUMMARY.md?)")
            elif anchor not in ids:
                bad.append(f"{where}: no heading with that anchor")
    for line in bad:
        print(line)
    print(f"book links: {checked} relative links checked, {len(bad)} broken", file=sys.stderr)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
