/// Abbreviated ids, as git abbreviates hashes: the shortest prefix, at least ``minimumLength``
/// characters, that tells every id of a set apart; and the way back from a prefix to one id.
///
/// Event ids are ULIDs (``EventID``): ids made in the same millisecond share their first 10
/// characters, so a set from one poll needs a longer prefix than a set made over days.
package enum IDPrefix {
    /// Shorter prefixes are refused even when they match one id: a prefix that is unique today
    /// would silently pick a different id tomorrow.
    package static let minimumLength = 8

    /// The length at which every id of `ids` has a distinct prefix (at least `minimumLength`,
    /// at most the longest id), so one column of abbreviations stays unambiguous.
    package static func length(for ids: [String], minimum: Int = minimumLength) -> Int {
        let upper = ids.map { $0.uppercased() }
        let distinct = Set(upper).count
        let longest = upper.map(\.count).max() ?? minimum
        var n = minimum
        while n < longest, Set(upper.map { $0.prefix(n) }).count < distinct { n += 1 }
        return n
    }

    /// What a prefix typed by a person designates among `ids`.
    package enum Resolution: Equatable {
        /// Exactly one id: the id itself, or the only one with this prefix.
        case one(String)
        /// No id starts with it.
        case none
        /// Several ids start with it: the candidates.
        case ambiguous([String])
        /// Shorter than `minimumLength` and not a whole id; the ids it would match.
        case tooShort([String])
    }

    /// Resolves `prefix` among `ids`, ignoring case (ids are upper-case Crockford base32; people
    /// type lower case).
    package static func resolve(_ prefix: String, among ids: [String], minimum: Int = minimumLength) -> Resolution {
        let wanted = prefix.uppercased()
        if let exact = ids.first(where: { $0.uppercased() == wanted }) { return .one(exact) }
        let matches = wanted.isEmpty ? ids : ids.filter { $0.uppercased().hasPrefix(wanted) }
        if wanted.count < minimum { return .tooShort(matches) }
        switch matches.count {
        case 0: return .none
        case 1: return .one(matches[0])
        default: return .ambiguous(matches)
        }
    }
}
