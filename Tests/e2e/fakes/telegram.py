"""A Telegram Bot API server for end-to-end tests (Python standard library only), as
reference/channels.md and core.telegram.org/bots/api describe it:

    POST /bot{token}/sendMessage  JSON {"chat_id", "text", "parse_mode": "HTML", "link_preview_options"}

Answers `{"ok": true, "result": {message}}`, or `{"ok": false, "error_code", "description"}`:
401 "Unauthorized" for another token, 404 "Not Found" for another method, 400 "Bad Request:
chat not found" for an unknown chat, 400 "can't parse entities" for HTML Telegram would refuse
(an unsupported or unbalanced tag), 400 "message is too long" over 4096 characters after entity
parsing. Failure modes, one per request, from `state["script"]`:

    500 / 502 …           that status with Telegram's JSON error
    ("429", N)            429 with "parameters": {"retry_after": N} (no Retry-After header)
    "blocked"             403 "Forbidden: bot was blocked by the user"
    "migrate"             400 with "parameters": {"migrate_to_chat_id": -100…}
    "echo"                401 whose description echoes the request path (and so the token)

`state["messages"]` records each accepted message: the request JSON plus the visible `plain`
text and `links` (hrefs) Telegram would show.
"""
from __future__ import annotations

from html.parser import HTMLParser

from fakes.server import FakeHandler

ALLOWED_TAGS = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a",
                "code", "pre", "blockquote", "tg-emoji"}
MAX_LENGTH = 4096


def telegram_state(token: str, chats=("4242",), script=None) -> dict:
    return {"token": token, "chats": set(chats), "script": list(script or []), "messages": []}


class EntityParser(HTMLParser):
    """Telegram's HTML mode: the visible text, the links, and the first reason to refuse."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.plain, self.links, self.stack, self.error = "", [], [], None

    def handle_starttag(self, tag, attrs):
        if tag not in ALLOWED_TAGS:
            self.error = self.error or f'Unsupported start tag "{tag}"'
        if tag == "a":
            self.links.append(dict(attrs).get("href"))
        self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.error = self.error or f'Unmatched end tag "{tag}"'
        else:
            self.stack.pop()

    def handle_data(self, data):
        self.plain += data

    @classmethod
    def parse(cls, text):
        p = cls()
        p.feed(text)
        p.close()
        if p.stack and not p.error:
            p.error = f'Can\'t find end tag corresponding to start tag "{p.stack[-1]}"'
        return p


def error(code, description, **parameters):
    body = {"ok": False, "error_code": code, "description": description}
    if parameters:
        body["parameters"] = parameters
    return code, {}, body


class TelegramBotAPI(FakeHandler):
    def route(self, req):
        st = self.state
        parts = req.path.split("/")
        if req.method not in ("POST", "GET") or len(parts) != 3 or not parts[1].startswith("bot"):
            return error(404, "Not Found")
        token, method = parts[1][3:], parts[2]
        with self.server.lock:
            mode = st["script"].pop(0) if st["script"] else None
        if mode == "echo":
            return error(401, f"Unauthorized: no bot for {req.path}")
        if token != st["token"]:
            return error(401, "Unauthorized")
        if method != "sendMessage":
            return error(404, "Not Found")
        if isinstance(mode, int):
            return error(mode, "Internal Server Error" if mode == 500 else "Bad Gateway")
        if isinstance(mode, tuple) and mode[0] == "429":
            return error(429, f"Too Many Requests: retry after {mode[1]}", retry_after=mode[1])
        if mode == "blocked":
            return error(403, "Forbidden: bot was blocked by the user")
        if mode == "migrate":
            return error(400, "Bad Request: group chat was upgraded to a supergroup chat", migrate_to_chat_id=-1001234567890)
        try:
            msg = req.json()
        except ValueError:
            return error(400, "Bad Request: can't parse JSON")
        if str(msg.get("chat_id")) not in st["chats"]:
            return error(400, "Bad Request: chat not found")
        text = msg.get("text") or ""
        if msg.get("parse_mode") == "HTML":
            parsed = EntityParser.parse(text)
            if parsed.error:
                return error(400, f"Bad Request: can't parse entities: {parsed.error}")
            plain, links = parsed.plain, parsed.links
        else:
            plain, links = text, []
        if not plain.strip():
            return error(400, "Bad Request: message text is empty")
        if len(plain.encode("utf-16-le")) // 2 > MAX_LENGTH:
            return error(400, "Bad Request: message is too long")
        with self.server.lock:
            st["messages"].append({**msg, "plain": plain, "links": links})
            message_id = len(st["messages"])
        return 200, {}, {"ok": True, "result": {"message_id": message_id, "date": 1700000000,
                                               "chat": {"id": msg["chat_id"], "type": "private"}, "text": plain}}
