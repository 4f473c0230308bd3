import FoundationEssentials

/// The `command` of exec sources and sinks: how it is written and whether it may be run.
extension OptionReader {
    /// `key` as a program and its arguments: an array of strings. A string is refused, with the
    /// array it probably meant: `"./check --warn 90"` would be one program named with spaces.
    package func command(_ key: String = "command") throws -> [String]? {
        guard let n = table[key] else {
            markConsumed(key)
            return nil
        }
        if case .string(let s) = n.value {
            markConsumed(key)
            let words = s.split(whereSeparator: { $0 == " " || $0 == "\t" }).map { Self.tomlString(String($0)) }
            throw error(key, "\(what): '\(key)' must be an array (the program, then each argument), like \(key) = [\(words.joined(separator: ", "))]")
        }
        let list = try stringList(key) ?? []
        guard let program = list.first, !program.isEmpty else {
            throw error(key, "\(what): '\(key)' must be a non-empty array, like \(key) = [\"./check-disk\", \"--warn\", \"90\"]")
        }
        return list
    }

    /// Refusals (``FileTrust``) for running `program`, a path, each located at `key`; walks up
    /// no further than the directories in `vouched` (checked elsewhere).
    package func untrustedCommand(_ program: String, key: String = "command", stopAt vouched: Set<String> = []) -> ConfigErrors? {
        let problems = FileTrust().check(program, as: .command, stopAt: vouched)
        if problems.isEmpty { return nil }
        return ConfigErrors(problems.map { error(key, "\(what): \($0)") })
    }

    private static func tomlString(_ s: String) -> String {
        "\"" + s.replacingScalars("\\", with: "\\\\").replacingScalars("\"", with: "\\\"") + "\""
    }
}
