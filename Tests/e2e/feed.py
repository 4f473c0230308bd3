"""A scripted exec source for sink tests: `feed(t)` installs plugins.d/feed, whose items are
whatever the test last wrote with `feed.set(...)`. Every item is an event on the first poll
(notify_existing = true)."""
from __future__ import annotations

import json
import os


class Feed:
    def __init__(self, t, name="feed", interval="1s"):
        self.t = t
        self.name = name
        self.items_path = t.root / f"{name}-items.jsonl"
        self.set([])
        script = t.plugins / name
        script.write_text(f"#!/bin/sh\ncat '{self.items_path}'\n")
        os.chmod(script, 0o700)
        t.write_plugin(f"{name}.toml", f'notify_existing = true\ninterval = "{interval}"\njitter = 0\n')

    def set(self, items):
        tmp = self.items_path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(i) + "\n" for i in items))
        os.replace(tmp, self.items_path)


def item(key, title=None, **kw):
    return {"key": key, "title": title or f"item {key}", "kind": "message", **kw}
