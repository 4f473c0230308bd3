#!/usr/bin/env python3
"""tidings.toml(5) from the configuration reference in docs/ (`make man`).

The page is the reference pages themselves, in the order a reader of a config file wants them
(etc/man/tidings.toml.5.in holds NAME, SYNOPSIS, DESCRIPTION, FILES and SEE ALSO and says where
the rest goes). Markdown is turned into man(7) roff here with the standard library only: headings,
paragraphs, lists, tables (one .TP per row), fenced code, inline code, emphasis and links, which is
all the docs use. Usage: md2man.py TEMPLATE ROOT VERSION DATE DOCDIR > tidings.toml.5
"""
import re
import sys
from pathlib import Path

# (section title, file under docs/, the heading level that becomes .SS; deeper ones are bold lines)
SECTIONS = [
    ("CONFIGURATION", "configuration.md", 2),
    ("PROVIDERS", "providers/README.md", 2),
    (None, "providers/*.md", 1),
    ("SINKS", "sinks.md", 2),
    ("ATTENTION", "attention.md", 2),
    ("SHARED STATE", "shared-state.md", 2),
    ("MONITORING AND OPERATIONS", "operations.md", 2),
    ("STATUS PAGE", "status-page.md", 2),
]

CHARS = {"→": r"\(->", "←": r"\(<-", "×": r"\(mu", "…": r"\&...", "—": r"\(em", "–": r"\(en",
         "≤": r"\(<=", "≥": r"\(>=", "“": r"\(lq", "”": r"\(rq", "‘": r"\(oq", "’": r"\(cq",
         "±": r"\(+-", "≈": r"\(~~", "§": r"\(sc", "·": r"\(pc", "✓": "yes", "✗": "no"}


def escape(text):
    text = text.replace("\\", r"\e").replace("-", r"\-")
    for k, v in CHARS.items():
        text = text.replace(k, v)
    return text


def inline(text):
    """Markdown inline markup to roff font changes; everything else escaped."""
    out, i = [], 0
    text = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", text)          # images: their alt text
    text = re.sub(r"\[([^\]]+)\]\((https?://[^)\s]+)\)", r"\1 <\2>", text)
    text = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", text)           # links inside the docs: the text
    # Bold around or across code spans: marked now, fonts set at the end.
    text = re.sub(r"\*\*(?=\S)(.+?)(?<=\S)\*\*", "\x01\\1\x02", text)
    # Code spans next: their content is literal.
    for m in re.finditer(r"(`+)(.+?)\1", text):
        out.append(spans(text[i:m.start()]))
        out.append(r"\fB" + escape(m.group(2).strip()) + r"\fR")
        i = m.end()
    out.append(spans(text[i:]))
    return "".join(out).replace("\x01", r"\fB").replace("\x02", r"\fR")


def spans(text):
    text = text.replace(r"\*", "\x00")
    text = escape(text)
    text = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"\\fI\1\\fR", text)
    text = re.sub(r"(?<!\w)_(?!\s)(.+?)(?<!\s)_(?!\w)", r"\\fI\1\\fR", text)
    return text.replace("\x00", "*").replace("<br>", " ")


def line_safe(s):
    """A roff text line must not start with a control character."""
    return r"\&" + s if s[:1] in (".", "'") else s


def convert(md, ss_level, first_heading_is_ss=False):
    lines = md.split("\n")
    out, para, i = [], [], 0

    def flush():
        if para:
            out.append(".PP")
            out.append(line_safe(inline(" ".join(para))))
            para.clear()

    while i < len(lines):
        l = lines[i]
        s = l.strip()
        if s.startswith("```"):
            flush()
            i += 1
            out += [".PP", ".RS 4", ".nf"]
            while i < len(lines) and not lines[i].strip().startswith("```"):
                out.append(line_safe(escape(lines[i])))
                i += 1
            out += [".fi", ".RE"]
        elif re.match(r"#{1,6} ", s):
            flush()
            level = len(s) - len(s.lstrip("#"))
            title = s.lstrip("#").strip()
            if level < ss_level and not first_heading_is_ss:
                pass                                  # the page's own title: the .SH says it
            elif level <= ss_level or (first_heading_is_ss and level == 1):
                out.append(".SS " + inline(title).replace('"', r"\(dq"))
            else:
                out += [".PP", line_safe(r"\fB" + inline(title) + r"\fR")]
        elif s.startswith("|") and i + 1 < len(lines) and re.match(r"\s*\|[\s:|-]+\|\s*$", lines[i + 1]):
            flush()
            head = [c.strip() for c in s.strip("|").split("|")]
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                cells = [c.strip() for c in re.split(r"(?<!\\)\|", lines[i].strip().strip("|"))]
                tag, rest = cells[0], [c for c in cells[1:] if c]
                labelled = [f"{h}: {c}" if h and len(head) > 2 else c for h, c in zip(head[1:], cells[1:]) if c]
                out += [".TP", line_safe(inline(tag) or r"\&"), line_safe(inline("; ".join(labelled if len(head) > 2 else rest)) or r"\&")]
                i += 1
            continue
        elif re.match(r"([-*]|\d+\.) ", s):
            flush()
            m = re.match(r"(\s*)([-*]|\d+\.) (.*)", l)
            depth = len(m.group(1))
            mark = r"\(bu" if m.group(2) in "-*" else m.group(2)
            item = [m.group(3)]
            i += 1
            while i < len(lines) and lines[i].strip() and not re.match(r"\s*([-*]|\d+\.) ", lines[i]) \
                    and not lines[i].strip().startswith("```") and lines[i].startswith(" "):
                item.append(lines[i].strip())
                i += 1
            if depth:
                out.append(".RS 2")
            out += [f".IP {mark} 4", line_safe(inline(" ".join(item)))]
            if depth:
                out.append(".RE")
            continue
        elif not s:
            flush()
        else:
            para.append(s)
        i += 1
    flush()
    return out


def main():
    template, root, version, date, docdir = sys.argv[1:6]
    docs = Path(root) / "docs"
    body = []
    for title, name, level in SECTIONS:
        if "*" in name:
            files = sorted(p for p in docs.glob(name) if p.name != "README.md")
        else:
            files = [docs / name]
        if title:
            body.append(".SH " + title)
        for f in files:
            body += convert(f.read_text(), level, first_heading_is_ss=title is None)
    text = Path(template).read_text()
    text = text.replace("@VERSION@", version).replace("@DATE@", date).replace("@DOCDIR@", docdir)
    text = text.replace("@REFERENCE@\n", "\n".join(body) + "\n")
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
