"""The e2e test files whose outcome could depend on the date, for `make test-calendar`.

A fixture that hard-coded a maintenance ending 2026-11-25 turned the suite red on that day
(issue 20). `make test-calendar` runs the files listed here with the clock a year ahead
(libfaketime), so a date that will pass is found before it does.

A file is listed when it, or a module of this folder it imports (a fake, a helper), carries a
date or works with calendar time: an ISO date literal, `datetime`, `date.today()`,
`strftime`/`strptime`/`mktime`/`gmtime`/`localtime`. (`time.time()` alone measures durations,
which a shifted clock does not change.) Found by reading the files, not kept by hand, so a new
test with a date is covered without anyone remembering to add it.

    python3 calendar_files.py        # the file names, one per line
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATED = re.compile(r"\b(19|20)\d\d-[01]\d-[0-3]\d\b|\bdatetime\b|\bdate\.today\(|\bstr[fp]time\(|\bmktime\(|\bgmtime\(|\blocaltime\(")
IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\s+([\w, ()]+)|import\s+([\w.]+))", re.M)


def local_modules(text: str) -> set[Path]:
    """The modules of this folder that `text` imports (`fakes.x`, `from fakes import x`, `helper`)."""
    found = set()
    for m in IMPORT.finditer(text):
        names = []
        if m[1]:
            names.append(m[1])
            names += [f"{m[1]}.{n.strip()}" for n in m[2].strip("()").split(",") if n.strip()]
        else:
            names.append(m[3])
        for name in names:
            path = HERE.joinpath(*name.split(".")).with_suffix(".py")
            if path.is_file():
                found.add(path)
    return found


def dated(path: Path, seen: set[Path] | None = None) -> bool:
    seen = set() if seen is None else seen
    if path in seen:
        return False
    seen.add(path)
    text = path.read_text()
    return bool(DATED.search(text)) or any(dated(m, seen) for m in local_modules(text))


def files() -> list[str]:
    return sorted(p.name for p in HERE.glob("test_*.py") if p.name != "test_install.py" and dated(p))


if __name__ == "__main__":
    print("\n".join(files()))
    sys.exit(0)
