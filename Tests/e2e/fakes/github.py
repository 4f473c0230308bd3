"""A local GitHub REST API (v2022-11-28) for the `github` provider's tests, following GitHub's
documentation of the endpoints tidings uses:

- `GET {prefix}/notifications` (`all`, `participating`, `per_page` ≤ 50, `page`): the user's
  threads, unread only unless `all=true`, newest `updated_at` first. Answers carry
  `Last-Modified` and `X-Poll-Interval`; a request whose `If-Modified-Since` is not older than
  the list's `Last-Modified` gets `304 Not Modified` with no body.
- `GET {prefix}/repos/{owner}/{repo}/releases` (`per_page` ≤ 100, default 30, `page`): with an
  `ETag` per page; `If-None-Match` with it gets a 304.
- Pages: a `Link` header with `rel="next"`, `rel="last"` (and `prev`, `first`).
- Authentication: `Authorization: Bearer TOKEN` (also `token TOKEN`); a wrong token is
  `401 {"message": "Bad credentials"}`; notifications without a token are 401 too ("Requires
  authentication"); public releases need none.
- Rate limits: every answer has `x-ratelimit-limit`, `x-ratelimit-remaining`, `x-ratelimit-reset`
  (epoch seconds) and `x-ratelimit-used`. `state["rate_limited"]` answers 403 (primary limit:
  remaining 0, reset in `rate_limited` seconds); `state["secondary"]` answers 429 with
  `Retry-After` of that many seconds (secondary limit).
- `state["redirect"]`: answer every request with `302 Found` to that base URL + the same path.
- `state["raw"]`: answer every request with this `(status, headers, body)` (hostile answers).

The API lives under `prefix` (default "/api/v3", as on GitHub Enterprise Server); the web pages
(`html_url`) are at the server's origin. Tests change `state` between polls:
`threads` (dicts from `thread(...)`), `releases` ({"owner/repo": [release(...), ...]},
newest first), `poll_interval`, `touch()` after changing threads.
"""
from __future__ import annotations

import hashlib
import json
import time
from email.utils import formatdate, parsedate_to_datetime
from urllib.parse import urlencode

from .server import FakeHandler

DIRECT_REASONS = {"assign", "author", "comment", "mention", "review_requested", "team_mention", "state_change",
                  "approval_requested", "manual", "invitation", "security_alert"}


def http_date(t: float) -> str:
    return formatdate(t, usegmt=True)


def iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def new_state(token="ghp_fake", threads=None, releases=None, poll_interval=60, prefix="/api/v3"):
    return {"token": token, "threads": threads or [], "releases": releases or {}, "poll_interval": poll_interval,
            "prefix": prefix, "last_modified": http_date(time.time() - 60)}


def touch(state):
    """The notification list changed: a new Last-Modified (HTTP dates have whole seconds, so
    it moves at least one second past the previous one)."""
    prev = parsedate_to_datetime(state["last_modified"]).timestamp()
    state["last_modified"] = http_date(max(time.time(), prev + 1))


def thread(n, title, repo="octo/hello", type_="Issue", reason="mention", unread=True, age=60):
    """A notification thread about issue/PR/commit/release `n` of `repo`, updated `age` seconds ago."""
    return {"n": n, "title": title, "repo": repo, "type": type_, "reason": reason, "unread": unread,
            "updated": time.time() - age}


def release(id_, tag, repo="octo/hello", draft=False, prerelease=False, name=None, body="Notes", age=3600):
    # Times fixed when the release is made: an unchanged list must give the same ETag however
    # many seconds later it is asked for.
    created = time.time() - age - 7200
    return {"id": id_, "tag_name": tag, "name": name if name is not None else tag, "draft": draft, "created": created,
            "prerelease": prerelease, "body": body, "published": None if draft else time.time() - age, "repo": repo}


class GitHub(FakeHandler):
    def origin(self, req):
        return f"http://{req.headers.get('host')}"

    def limits(self, remaining=4999, reset_in=3600):
        return {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": str(remaining),
                "x-ratelimit-reset": str(int(time.time() + reset_in)), "x-ratelimit-used": str(5000 - remaining),
                "x-ratelimit-resource": "core"}

    def token_of(self, req):
        auth = req.headers.get("authorization", "")
        for scheme in ("Bearer ", "token "):
            if auth.startswith(scheme):
                return auth[len(scheme):]
        return None

    def route(self, req):
        s = self.state
        if s.get("raw") is not None:  # hostile answers: (status, headers, body bytes)
            return s["raw"]
        if s.get("redirect"):
            return 302, {"Location": s["redirect"] + req.path}, b""
        prefix = s.get("prefix", "")
        if not req.path.startswith(prefix + "/"):
            return 404, {}, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}
        path = req.path[len(prefix):]
        token = self.token_of(req)
        if token is not None and token != s["token"]:
            return 401, self.limits(), {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest",
                                        "status": "401"}
        if s.get("rate_limited"):
            return 403, self.limits(remaining=0, reset_in=s["rate_limited"]), {
                "message": "API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, "
                           "please include the request ID.", "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}
        if s.get("secondary"):
            return 429, {**self.limits(), "Retry-After": str(s["secondary"])}, {
                "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
                "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}
        if path == "/notifications":
            if token is None:
                return 401, self.limits(), {"message": "Requires authentication", "documentation_url": "https://docs.github.com/rest"}
            return self.notifications(req)
        parts = path.split("/")
        if len(parts) == 5 and parts[1] == "repos" and parts[4] == "releases":
            return self.releases(req, f"{parts[2]}/{parts[3]}")
        return 404, self.limits(), {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}

    def page_of(self, req, items, default, maximum):
        per_page = min(int(req.query.get("per_page", [default])[0]), maximum)
        page = max(int(req.query.get("page", ["1"])[0]), 1)
        last = max((len(items) + per_page - 1) // per_page, 1)
        chunk = items[(page - 1) * per_page: page * per_page]
        links = []
        base = self.origin(req) + self.state.get("prefix", "") + req.path[len(self.state.get("prefix", "")):]
        other = {k: v[0] for k, v in req.query.items() if k not in ("page", "per_page")}

        def link(p, rel):
            return f'<{base}?{urlencode({**other, "per_page": per_page, "page": p})}>; rel="{rel}"'
        if page < last:
            links += [link(page + 1, "next"), link(last, "last")]
        if page > 1:
            links += [link(page - 1, "prev"), link(1, "first")]
        return chunk, ({"Link": ", ".join(links)} if links else {})

    def notifications(self, req):
        s = self.state
        api, web = self.origin(req) + s.get("prefix", ""), self.origin(req)
        headers = {**self.limits(), "Last-Modified": s["last_modified"]}
        if s.get("poll_interval") is not None:
            headers["X-Poll-Interval"] = str(s["poll_interval"])
        since = req.headers.get("if-modified-since")
        if since:
            try:
                if parsedate_to_datetime(since) >= parsedate_to_datetime(s["last_modified"]):
                    return 304, headers, b""
            except (TypeError, ValueError):
                pass
        all_ = req.query.get("all", ["false"])[0] == "true"
        participating = req.query.get("participating", ["false"])[0] == "true"
        threads = [t for t in s["threads"] if (all_ or t["unread"]) and (not participating or t["reason"] in DIRECT_REASONS)]
        threads.sort(key=lambda t: -t["updated"])
        chunk, links = self.page_of(req, threads, 50, 50)
        kinds = {"Issue": "issues", "PullRequest": "pulls", "Commit": "commits", "Release": "releases"}
        body = []
        for t in chunk:
            repo_api = f"{api}/repos/{t['repo']}"
            subject_url = f"{repo_api}/{kinds[t['type']]}/{t['n']}" if t["type"] in kinds else None
            body.append({
                "id": str(t.get("id", t["n"] * 1000 + 7)), "unread": t["unread"], "reason": t["reason"],
                "updated_at": iso(t["updated"]), "last_read_at": None,
                "subject": {"title": t["title"], "url": subject_url, "latest_comment_url": subject_url, "type": t["type"]},
                "repository": {"id": 1296269, "name": t["repo"].split("/")[1], "full_name": t["repo"], "private": False,
                               "html_url": f"{web}/{t['repo']}", "url": repo_api},
                "url": f"{api}/notifications/threads/{t['n'] * 1000 + 7}",
                "subscription_url": f"{api}/notifications/threads/{t['n'] * 1000 + 7}/subscription",
            })
        return 200, {**headers, **links}, body

    def releases(self, req, repo):
        s = self.state
        if repo not in s["releases"]:
            return 404, self.limits(), {"message": "Not Found", "documentation_url": "https://docs.github.com/rest/releases/releases#list-releases"}
        token = self.token_of(req)
        # Drafts are listed only to users with push access (here: anyone with the token).
        items = [r for r in s["releases"][repo] if token is not None or not r["draft"]]
        chunk, links = self.page_of(req, items, 30, 100)
        web, api = self.origin(req), self.origin(req) + s.get("prefix", "")
        body = [{
            "url": f"{api}/repos/{repo}/releases/{r['id']}", "html_url": f"{web}/{repo}/releases/tag/{r['tag_name']}",
            "id": r["id"], "tag_name": r["tag_name"], "target_commitish": "main", "name": r["name"], "draft": r["draft"],
            "prerelease": r["prerelease"], "created_at": iso(r["created"]),
            "published_at": iso(r["published"]) if r["published"] else None, "body": r["body"],
            "author": {"login": "octocat"}, "assets": [],
        } for r in chunk]
        payload = json.dumps(body).encode()
        etag = 'W/"' + hashlib.sha1(payload).hexdigest() + '"'
        headers = {**self.limits(), "ETag": etag, **links}
        if req.headers.get("if-none-match") == etag:
            return 304, headers, b""
        return 200, {**headers, "Content-Type": "application/json; charset=utf-8"}, payload
