import TidingsTemplates

/// The status page's Mustache templates. `{{x}}` HTML-escapes (`<>&"'`): every value from the
/// state (remote titles, bodies, errors) and every message goes through it. `{{{chart}}}` alone
/// is raw: an SVG that ``StatusChart`` builds from numbers.
enum StatusPageTemplates {
    static let head = """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="referrer" content="same-origin">
        <title>{{title}} · tidings</title>
        <link rel="stylesheet" href="/static/style.css">
        <script src="/static/app.js" defer></script>
        </head>
        <body>
        <header><nav>
        <a href="/" class="brand">tidings</a>
        <a href="/history">History</a>
        <a href="/outbox">Outbox</a>
        <a href="/silences">Silences</a>
        <a href="/notices">Notices</a>
        <label class="refresh" hidden><input type="checkbox" id="autorefresh"> auto-refresh</label>
        </nav></header>
        <main>
        <h1>{{title}}</h1>

        """

    static let foot = """
        </main>
        </body>
        </html>

        """

    static let event = """
        <li class="sev-{{severity}}"><span class="when">{{at}}</span> <span class="tag">{{event}}</span> <span class="tag">{{severity}}</span> <a href="/sources/{{source}}">{{source}}</a>: {{#url}}<a href="{{url}}" rel="noopener noreferrer nofollow">{{title}}</a>{{/url}}{{^url}}{{title}}{{/url}}{{#silenced}} <span class="tag">silenced by {{silenced}}</span>{{/silenced}}{{#body}}<div class="body">{{body}}</div>{{/body}}</li>

        """

    static let overview = """
        {{> head}}
        <section class="verdict {{#healthy}}ok{{/healthy}}{{^healthy}}bad{{/healthy}}">
        {{#healthy}}<p><strong>Healthy.</strong></p>{{/healthy}}
        {{^healthy}}<p><strong>Needs attention:</strong></p><ul>{{#reasons}}<li>{{.}}</li>{{/reasons}}</ul>{{/healthy}}
        <p>Daemon PID {{pid}}, since {{since}}, version {{version}}. State: {{backend}} {{location}}.</p>
        {{#instances}}<p>Instance {{label}}: {{sources}} sources, seen {{seen}}</p>{{/instances}}
        </section>
        <h2>Sources</h2>
        <p class="counts">{{#counts}}<span class="tag">{{n}} {{health}}</span> {{/counts}}</p>
        <div class="scroll"><table>
        <thead><tr><th>Source</th><th>Health</th><th>Items</th><th>Last ok</th><th>Next</th><th>Polls, events: 24 h</th></tr></thead>
        <tbody>
        {{#sources}}<tr class="{{#bad}}bad{{/bad}}"><td><a href="{{link}}">{{name}}</a> <small>{{provider}}</small></td><td>{{health}}{{#failures}} ({{failures}}){{/failures}}{{#lastError}}<div class="error">{{lastError}}</div>{{/lastError}}</td><td>{{items}}</td><td>{{lastSuccess}}</td><td>{{nextDue}}</td><td>{{{chart}}}</td></tr>
        {{/sources}}
        </tbody></table></div>
        <h2>Outbox</h2>
        <div class="scroll"><table><thead><tr><th>Sink</th><th>Pending</th><th>Held</th><th>Dead</th></tr></thead><tbody>
        {{#sinks}}<tr><td>{{name}} <small>{{type}}</small></td><td>{{pending}}</td><td>{{held}}{{#holds}}<div><small>{{.}}</small></div>{{/holds}}</td><td>{{dead}}{{#lastDeadError}}<div class="error">{{lastDeadError}}</div>{{/lastDeadError}}</td></tr>
        {{/sinks}}
        </tbody></table></div>
        <p><a href="/outbox">All deliveries</a></p>
        <h2>Silences</h2>
        {{^silences}}<p>None active. <a href="/silences">Add one</a></p>{{/silences}}
        <ul>{{#silences}}<li><code>{{matchers}}</code> until {{ends}} {{#comment}}— {{comment}}{{/comment}}</li>{{/silences}}</ul>
        <h2>Notices</h2>
        {{^notices}}<p>None pending.</p>{{/notices}}
        <ul>{{#notices}}<li class="sev-{{severity}}">{{source}}: {{title}} <a href="/notices">dismiss…</a></li>{{/notices}}</ul>
        <h2>Last events</h2>
        {{^events}}<p>None yet.</p>{{/events}}
        <ul class="events">{{#events}}{{> event}}{{/events}}</ul>
        <h2>[http]</h2>
        <table>{{#http}}<tr><th>{{key}}</th><td>{{value}}</td></tr>{{/http}}</table>
        {{> foot}}
        """

    static let source = """
        {{> head}}
        <p><span class="tag">{{provider}}</span> <span class="tag {{#bad}}bad{{/bad}}">{{health}}</span> declared in {{file}}, polled every {{interval}}</p>
        <form method="post" action="{{link}}/poll"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit">Poll now</button></form>
        <table>
        <tr><th>Last success</th><td>{{lastSuccess}}</td></tr>
        <tr><th>Failures in a row</th><td>{{#failures}}{{failures}}{{/failures}}{{^failures}}0{{/failures}}</td></tr>
        <tr><th>Last error</th><td>{{#lastError}}<span class="error">{{lastError}}</span> ({{lastErrorAt}}){{/lastError}}{{^lastError}}none{{/lastError}}</td></tr>
        <tr><th>Next poll</th><td>{{nextDue}}</td></tr>
        <tr><th>Polls and events, 24 h</th><td>{{{chart}}}</td></tr>
        </table>
        <h2>Last polls</h2>
        {{^polls}}<p>None since the daemon started.</p>{{/polls}}
        {{#hasPolls}}<div class="scroll"><table class="polls"><thead><tr><th>Ended</th><th>Took</th><th>Outcome</th><th>Events</th></tr></thead><tbody>{{/hasPolls}}
        {{#polls}}<tr><td>{{at}}</td><td>{{duration}}</td><td class="{{#failed}}error{{/failed}}">{{outcome}}</td><td>{{events}}</td></tr>{{/polls}}
        {{#hasPolls}}</tbody></table></div>{{/hasPolls}}
        <h2>Items ({{itemCount}})</h2>
        {{^items}}<p>None.</p>{{/items}}
        <ul class="items">{{#items}}<li class="sev-{{severity}}"><span class="tag">{{severity}}</span> {{#url}}<a href="{{url}}" rel="noopener noreferrer nofollow">{{title}}</a>{{/url}}{{^url}}{{title}}{{/url}} <small>{{kind}}, seen since {{seen}}{{#missing}}, missing from the last poll{{/missing}}</small>{{#body}}<div class="body">{{body}}</div>{{/body}}</li>{{/items}}</ul>
        {{#more}}<p>Only the first 500 are shown.</p>{{/more}}
        <h2>Recent events</h2>
        {{^events}}<p>None.</p>{{/events}}
        <ul class="events">{{#events}}{{> event}}{{/events}}</ul>
        <p><a href="/history?source={{name}}">All of its history</a></p>
        {{> foot}}
        """

    static let history = """
        {{> head}}
        <form method="get" action="/history" class="filters">
        <label>Source <select name="source">{{#sourceOptions}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/sourceOptions}}</select></label>
        <label>Kind <input name="kind" value="{{kind}}" placeholder="e.g. new, entry"></label>
        <label>Severity <select name="severity">{{#severityOptions}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/severityOptions}}</select></label>
        <button type="submit">Filter</button>
        </form>
        <p>{{count}} events match (the newest 500 are shown).</p>
        <ul class="events">{{#events}}{{> event}}{{/events}}</ul>
        {{> foot}}
        """

    static let outbox = """
        {{> head}}
        <p>{{count}} deliveries queued, held or dead.</p>
        <div class="scroll"><table>
        <thead><tr><th>#</th><th>Sink</th><th>Status</th><th>Event</th><th>Attempts</th><th></th></tr></thead><tbody>
        {{#entries}}<tr class="{{#dead}}bad{{/dead}}"><td>{{id}}</td><td>{{sink}}</td><td>{{status}}{{#hold}}<div><small>{{hold}}</small></div>{{/hold}}{{#next}}<div><small>next {{next}}</small></div>{{/next}}</td><td>{{source}}: {{title}}{{#error}}<div class="error">{{error}}</div>{{/error}}</td><td>{{attempts}}</td>
        <td>{{#dead}}<form method="post" action="/outbox/{{id}}/retry"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" name="retry">Retry now</button></form>
        <form method="post" action="/outbox/{{id}}/drop"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" name="drop" class="danger">Drop</button></form>{{/dead}}</td></tr>
        {{/entries}}
        </tbody></table></div>
        {{> foot}}
        """

    static let silences = """
        {{> head}}
        {{#error}}<p class="error" id="form-error">{{error}}</p>{{/error}}
        <form method="post" action="/silences" class="silence">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <label>Matchers, one a line (NAME=VALUE, NAME!=VALUE, NAME~=REGEX)<textarea name="matchers" rows="3" required placeholder="source=helpdesk">{{matchers}}</textarea></label>
        <label>For <input name="duration" value="{{duration}}" required></label>
        <label>Comment <input name="comment" value="{{comment}}"></label>
        <button type="submit" name="add">Add silence</button>
        </form>
        <h2>Active and pending</h2>
        {{^active}}<p>None.</p>{{/active}}
        <ul class="silences">{{#active}}<li><code>{{matchers}}</code> until {{ends}} by {{by}}{{#comment}} — {{comment}}{{/comment}}
        <form method="post" action="/silences/{{id}}/expire"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" name="expire" value="{{id}}">Expire</button></form></li>{{/active}}</ul>
        <h2>Ended</h2>
        {{^expired}}<p>None.</p>{{/expired}}
        <ul class="expired">{{#expired}}<li><code>{{matchers}}</code> ended {{ends}}{{#comment}} — {{comment}}{{/comment}}</li>{{/expired}}</ul>
        {{> foot}}
        """

    static let notices = """
        {{> head}}
        {{^notices}}<p>None pending.</p>{{/notices}}
        <ul class="notices">{{#notices}}<li class="sev-{{severity}}"><span class="when">{{at}}</span> <a href="/sources/{{source}}">{{source}}</a>: {{#url}}<a href="{{url}}" rel="noopener noreferrer nofollow">{{title}}</a>{{/url}}{{^url}}{{title}}{{/url}}{{#body}}<div class="body">{{body}}</div>{{/body}}
        <form method="post" action="/notices/{{id}}/dismiss"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" name="dismiss">Dismiss</button></form></li>{{/notices}}</ul>
        {{> foot}}
        """

    static let poll = """
        {{> head}}
        <ul>{{#lines}}<li class="{{#failed}}error{{/failed}}">{{.}}</li>{{/lines}}</ul>
        <h2>Events of this poll</h2>
        {{^events}}<p>None.</p>{{/events}}
        <ul class="events">{{#events}}{{> event}}{{/events}}</ul>
        <p><a href="/sources/{{name}}">Back to {{name}}</a></p>
        {{> foot}}
        """

    package static let message = """
        {{> head}}
        <p>{{message}}</p>
        <p><a href="/">Overview</a></p>
        {{> foot}}
        """

    /// Every template by name (the tests render each with the oracle too).
    package static let all = [
        "head": head, "foot": foot, "event": event, "overview": overview, "source": source, "history": history,
        "outbox": outbox, "silences": silences, "notices": notices, "poll": poll, "message": message,
    ]

    static let library: TemplateLibrary = {
        var lib = TemplateLibrary()
        for (name, text) in all {
            // Fixed templates of this file: a parse error is a programming error a test catches.
            lib.register(try! Template(text), named: name)
        }
        return lib
    }()
}

/// The status page's only files: its style and a little script (auto-refresh), served by the
/// daemon so the CSP can say `'self'` and nothing inline.
enum StatusPageAssets {
    static let css = """
        :root { color-scheme: light dark; --bad: #c0392b; --ok: #2e7d32; --muted: #777; }
        * { box-sizing: border-box; }
        body { font: 15px/1.45 system-ui, sans-serif; margin: 0; overflow-wrap: break-word; }
        header { background: #223; padding: .5rem 1rem; }
        header nav { display: flex; flex-wrap: wrap; gap: .25rem 1rem; align-items: center; }
        header a, header label { color: #eef; text-decoration: none; }
        header .brand { font-weight: bold; }
        main { padding: .5rem 1rem 2rem; max-width: 70rem; }
        h1 { font-size: 1.4rem; overflow-wrap: anywhere; }
        h2 { font-size: 1.15rem; margin-top: 1.5rem; }
        table { border-collapse: collapse; width: 100%; }
        th, td { text-align: left; vertical-align: top; padding: .3rem .4rem; border-bottom: 1px solid #8884; }
        .verdict, .error, code, .body, li { overflow-wrap: anywhere; }
        .scroll { overflow-x: auto; }
        .verdict { padding: .25rem .75rem; border-left: 4px solid var(--ok); }
        .verdict.bad { border-color: var(--bad); }
        tr.bad td:first-child { border-left: 3px solid var(--bad); }
        .error, .tag.bad { color: var(--bad); }
        .tag { display: inline-block; font-size: .8em; padding: 0 .35em; border: 1px solid #8886; border-radius: .3em; }
        .when, small { color: var(--muted); }
        ul.events, ul.items, ul.notices, ul.silences { padding-left: 1rem; }
        li { margin: .3rem 0; }
        .body { white-space: pre-wrap; color: var(--muted); max-height: 6em; overflow: hidden; }
        .sev-critical > .tag:first-of-type { border-color: var(--bad); }
        form { display: inline; }
        form.silence, form.filters { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: flex-end; margin: .5rem 0 1rem; }
        form.silence label, form.filters label { display: flex; flex-direction: column; }
        textarea, input, select, button { font: inherit; max-width: 100%; }
        textarea { width: 22rem; }
        button.danger { color: var(--bad); }
        svg.chart { display: block; max-width: 100%; height: auto; }
        @media (max-width: 40rem) {
          main { padding: .5rem .6rem 2rem; }
          th, td { padding: .25rem; font-size: .85rem; }
          .scroll table { min-width: 34rem; }
          textarea { width: 100%; }
          form.silence { flex-direction: column; align-items: stretch; }
        }

        """

    static let js = """
        // tidings status page: optional auto-refresh (every 30 s) of a page without a form being edited.
        (function () {
          var box = document.getElementById("autorefresh");
          if (!box) return;
          box.parentElement.hidden = false;
          box.checked = localStorage.getItem("tidings.autorefresh") === "1";
          box.addEventListener("change", function () {
            localStorage.setItem("tidings.autorefresh", box.checked ? "1" : "0");
          });
          setInterval(function () {
            var editing = document.activeElement && /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName) && document.activeElement !== box;
            if (box.checked && !editing) location.reload();
          }, 30000);
        })();

        """
}
