import FoundationEssentials

/// One thing a provider currently sees: a message, an alert, a draft invoice.
///
/// Providers return the *current* items; the ``Deduplicator`` decides what is new.
package struct Item: Sendable, Equatable {
    /// Identity within the source. Stable across polls.
    package var key: String
    /// What sort of thing this is (`message`, `notice`, `alert`, `draft-invoice` …).
    package var kind: String
    package var title: String
    package var body: String
    package var url: String?
    package var severity: Severity
    /// Provider-specific details, passed through to the event's `data`.
    package var data: JSONValue
    /// When this item stops mattering (notices: a maintenance window's end).
    package var expiresAt: Date?
    /// What "changed" means. Defaults to ``contentHash``; a provider may give its own (a
    /// Nagios plugin's state), and then text can change while the fingerprint does not.
    package var fingerprint: String
    /// A hash over what the item shows: kind, title, body, url, severity and data.
    package var contentHash: String

    package init(
        key: String, kind: String, title: String, body: String = "", url: String? = nil,
        severity: Severity = .info, data: JSONValue = .object([:]), expiresAt: Date? = nil,
        fingerprint: String? = nil
    ) {
        self.key = key
        self.kind = kind
        self.title = title
        self.body = body
        self.url = url
        self.severity = severity
        self.data = data
        self.expiresAt = expiresAt
        let content = Fingerprint.of([kind, title, body, url ?? "", severity.rawValue, data.jsonString()])
        self.contentHash = content
        self.fingerprint = fingerprint ?? content
    }

    /// Whether the provider chose the fingerprint (rather than the content deciding it).
    package var hasCustomFingerprint: Bool { fingerprint != contentHash }
}
