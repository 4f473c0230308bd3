// What `tidings add` and `tidings import` agree on (DESIGN §14): a format reader (urlwatch
// jobs, OPML outlines, a URL list, an address `add` looked at) turns what it read into drafts
// and refusals; one writer turns a draft into `plugins.d/NAME.toml`. Readers never write files.

/// One source as it would be written: provider, options in order, and the comments a person
/// reads above them.
package struct SourceDraft: Sendable, Equatable {
    /// The wished file name without `.toml` (the writer makes it safe and unique).
    package var name: String
    /// `feed`, `page`, `exec`, `github`, `certificate`, `imap`, …
    package var provider: String
    /// Written in this order after `provider`.
    package var options: [SourceOption]
    /// Lines for the head of the file (no leading `# `): where the source came from, what was
    /// dropped or changed on the way.
    package var comments: [String]
    /// The address this source watches, compared with the configured sources' to report
    /// "already watched" instead of writing a second file; nil when there is none (exec).
    package var watchedURL: String?
    /// Secrets the source needs: each written as `KEY_file` pointing at a file created 0600
    /// (or asked for), never inline.
    package var secrets: [SecretDraft]

    package init(
        name: String, provider: String, options: [SourceOption] = [], comments: [String] = [],
        watchedURL: String? = nil, secrets: [SecretDraft] = []
    ) {
        self.name = name
        self.provider = provider
        self.options = options
        self.comments = comments
        self.watchedURL = watchedURL
        self.secrets = secrets
    }
}

/// One `key = value` line of a draft, with an optional comment written above it.
package struct SourceOption: Sendable, Equatable {
    package var key: String
    package var value: DraftValue
    package var comment: String?

    package init(_ key: String, _ value: DraftValue, comment: String? = nil) {
        self.key = key
        self.value = value
        self.comment = comment
    }
}

/// The TOML values a draft writes.
package indirect enum DraftValue: Sendable, Equatable {
    case string(String)
    case integer(Int)
    case boolean(Bool)
    case strings([String])
    /// An inline table of strings (`headers = { Accept = "…" }`), keys in this order.
    case table([(String, String)])

    package static func == (a: DraftValue, b: DraftValue) -> Bool {
        switch (a, b) {
        case (.string(let x), .string(let y)): x == y
        case (.integer(let x), .integer(let y)): x == y
        case (.boolean(let x), .boolean(let y)): x == y
        case (.strings(let x), .strings(let y)): x == y
        case (.table(let x), .table(let y)): x.map(\.0) == y.map(\.0) && x.map(\.1) == y.map(\.1)
        default: false
        }
    }
}

/// A secret of a draft: the option (`password`), and its value when the reader knows it
/// (a password in a urlwatch job's URL); nil asks for it or leaves a file to fill in.
package struct SecretDraft: Sendable, Equatable {
    package var option: String
    package var value: String?

    package init(option: String, value: String?) {
        self.option = option
        self.value = value
    }
}

/// Something a reader could not turn into a source, with where it was and why.
package struct NotImportable: Sendable, Equatable {
    /// The job's name or URL, the outline's title: what a person recognises.
    package var what: String
    /// The line in the imported file, when known.
    package var line: Int?
    package var reason: String

    package init(what: String, line: Int? = nil, reason: String) {
        self.what = what
        self.line = line
        self.reason = reason
    }
}

/// What a reader returns for one file: drafts in file order, refusals, and notes on what was
/// imported but changed on the way (a filter dropped, a default interval chosen).
package struct ImportReading: Sendable, Equatable {
    package var drafts: [SourceDraft] = []
    package var notImportable: [NotImportable] = []

    package init(drafts: [SourceDraft] = [], notImportable: [NotImportable] = []) {
        self.drafts = drafts
        self.notImportable = notImportable
    }
}
