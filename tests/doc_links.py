#!/usr/bin/env python3
"""doc_links.py -- every relative link in the given Markdown files must resolve.

    python3 tests/doc_links.py README.md docs/*.md

A link [text](target) or [text](target#anchor) outside code blocks and code spans: the target
(relative to the linking file) must exist, and an anchor must be the slug GitHub gives one of the
target's headings (lowercased, punctuation dropped, spaces to hyphens, "-1", "-2" for repeats).
Absolute URLs (http:, https:, mailto:) are not fetched. Prints each broken link as
FILE:LINE: target (why) and exits 1 if there is any; else prints how many links it checked.
"""
import os
import re
import sys

LINK = re.compile(r'(?<!!)\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
HEADING = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$')


def strip_code(lines):
    """The lines with fenced blocks blanked and code spans removed (links in code are not links)."""
    out, fence = [], None
    for line in lines:
        m = re.match(r'^\s*(```+|~~~+)', line)
        if m:
            if fence is None:
                fence = m.group(1)[0] * 3
            elif line.strip().startswith(fence):
                fence = None
            out.append('')
            continue
        out.append('' if fence else re.sub(r'`[^`]*`', '', line))
    return out


def slug(text):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r'<[^>]+>', '', text)                 # inline HTML
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', text)  # links keep their text
    text = text.strip().lower()
    text = re.sub(r'[^\w\- ]', '', text)                # punctuation (keeps letters, digits, _ and -)
    return text.replace(' ', '-')


def anchors(path, cache={}):
    if path not in cache:
        seen, found, fence = {}, set(), None
        with open(path, encoding='utf-8') as f:
            for line in f:
                m = re.match(r'^\s*(```+|~~~+)', line)
                if m:
                    fence = None if fence else m.group(1)[0]
                    continue
                h = None if fence else HEADING.match(line)
                if not h:
                    continue
                s = slug(h.group(2))
                n = seen.get(s, 0)
                seen[s] = n + 1
                found.add(s if n == 0 else '%s-%d' % (s, n))
        cache[path] = found
    return cache[path]


def main(files):
    bad, checked = [], 0
    for src in files:
        with open(src, encoding='utf-8') as f:
            lines = strip_code(f.read().split('\n'))
        for no, line in enumerate(lines, 1):
            for m in LINK.finditer(line):
                target = m.group(1)
                if re.match(r'^[a-z][a-z0-9+.-]*:', target, re.I):
                    continue
                checked += 1
                path, _, anchor = target.partition('#')
                dest = os.path.normpath(os.path.join(os.path.dirname(src), path)) if path else src
                if not os.path.exists(dest):
                    bad.append('%s:%d: %s (no file %s)' % (src, no, target, dest))
                elif anchor and (os.path.isdir(dest) or not dest.endswith('.md')):
                    bad.append('%s:%d: %s (an anchor into %s, which is not Markdown)' % (src, no, target, dest))
                elif anchor and anchor not in anchors(dest):
                    bad.append('%s:%d: %s (no heading in %s has the anchor #%s)' % (src, no, target, dest, anchor))
    for b in bad:
        print(b)
    print('%d relative links in %d files: %d broken' % (checked, len(files), len(bad)))
    return 1 if bad else 0


if __name__ == '__main__':
    if len(sys.argv) < 2:
        sys.exit('usage: doc_links.py FILE.md...')
    sys.exit(main(sys.argv[1:]))
