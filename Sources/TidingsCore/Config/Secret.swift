import Foundation
import Synchronization

/// A credential read from config. Prints as `‹redacted›` so it cannot leak by interpolation;
/// the value is also registered with ``Redactor`` so logs and errors scrub it.
public struct Secret: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    public let value: String
    public init(_ value: String) {
        self.value = value
        Redactor.shared.register(value)
    }
    public var description: String { "‹redacted›" }
    public var debugDescription: String { "‹redacted›" }
}

/// Scrubs known secret values out of text before it reaches a log, an error or an event.
public final class Redactor: Sendable {
    public static let shared = Redactor()
    private let secrets = Mutex<Set<String>>([])

    public func register(_ value: String) {
        // Very short values would redact ordinary words; they are weak secrets anyway.
        guard value.count >= 4 else { return }
        secrets.withLock { _ = $0.insert(value) }
    }

    public func scrub(_ text: String) -> String {
        let known = secrets.withLock { $0 }
        guard !known.isEmpty else { return text }
        var out = text
        for s in known.sorted(by: { $0.count > $1.count }) where out.contains(s) {
            out = out.replacingOccurrences(of: s, with: "‹redacted›")
            if let enc = s.addingPercentEncoding(withAllowedCharacters: .alphanumerics), enc != s {
                out = out.replacingOccurrences(of: enc, with: "‹redacted›")
            }
        }
        return out
    }
}
