import CYAML

/// A YAML node as read: a scalar (its text, and whether it was written plain, so that `true`,
/// `3` and `~` mean what YAML 1.1 says and `"3"` stays a string), a sequence or a mapping (keys
/// in file order), with the line (1-based) where it starts.
package struct YAMLNode: Sendable, Equatable {
    package enum Value: Sendable, Equatable {
        case scalar(String, plain: Bool)
        case sequence([YAMLNode])
        case mapping([YAMLPair])
    }
    package var value: Value
    package var line: Int

    package init(_ value: Value, line: Int) {
        self.value = value
        self.line = line
    }
}

package struct YAMLPair: Sendable, Equatable {
    package var key: YAMLNode
    package var value: YAMLNode

    package init(key: YAMLNode, value: YAMLNode) {
        self.key = key
        self.value = value
    }
}

/// Why a YAML text was not read, and the line (1-based) where it went wrong.
package struct YAMLError: Error, Sendable, Equatable, CustomStringConvertible {
    package var line: Int
    package var message: String
    package var description: String { "line \(line): \(message)" }
    package init(line: Int, _ message: String) {
        self.line = line
        self.message = message
    }
}

/// Reads YAML documents with libyaml's event parser into ``YAMLNode`` trees, bounded: the
/// nesting depth, and the nodes the documents hold once every alias is expanded (an alias
/// counts as many nodes as the node it names, so a "billion laughs" is refused after the
/// first million, not built). Tags are not resolved (no constructors run); merge keys (`<<`)
/// are applied as PyYAML applies them; of a key given twice, the last counts (as in PyYAML).
package enum YAML {
    package struct Limits: Sendable {
        package var maxDepth = 64
        package var maxNodes = 1_000_000
        package var maxBytes = 64 << 20
        package init() {}
    }

    /// Loads libyaml (it is not linked: DESIGN §15), once per process: nil, or why it cannot be
    /// (the soname and the Debian package to install). ``documents(_:limits:)`` loads it too; a
    /// command asks first to tell a missing library from a file that is not YAML.
    package static func unavailable() -> String? {
        tidings_yaml_load().map { String(cString: $0) }
    }

    /// Every document of `text`, in order (an empty text has none).
    package static func documents(_ text: [UInt8], limits: Limits = Limits()) throws(YAMLError) -> [YAMLNode] {
        if let missing = unavailable() { throw YAMLError(line: 1, missing) }
        guard text.count <= limits.maxBytes else {
            throw YAMLError(line: 1, "the file is larger than \(limits.maxBytes >> 20) MiB")
        }
        var parser = yaml_parser_t()
        guard tidings_yaml_parser_initialize(&parser) == 1 else { throw YAMLError(line: 1, "libyaml: out of memory") }
        defer { tidings_yaml_parser_delete(&parser) }
        return try text.withUnsafeBufferPointer { (buf) throws(YAMLError) -> [YAMLNode] in
            // libyaml reads from the pointer only while parsing, within this closure.
            tidings_yaml_parser_set_input_string(&parser, buf.baseAddress ?? UnsafePointer(bitPattern: 1), buf.count)
            var builder = Builder(limits: limits)
            while true {
                var event = yaml_event_t()
                guard tidings_yaml_parser_parse(&parser, &event) == 1 else {
                    let problem = parser.problem.map { String(cString: $0) } ?? "not YAML"
                    let context = parser.context.map { String(cString: $0) + ": " } ?? ""
                    throw YAMLError(line: Int(parser.problem_mark.line) + 1, context + problem)
                }
                defer { tidings_yaml_event_delete(&event) }
                if event.type == YAML_STREAM_END_EVENT { break }
                try builder.take(&event)
            }
            return builder.documents
        }
    }

    private struct Builder {
        let limits: Limits
        var documents: [YAMLNode] = []
        /// Open sequences and mappings: the node so far, its anchor, nodes counted under it.
        var open: [(node: YAMLNode, anchor: String?, count: Int)] = []
        /// Named nodes, and how many nodes each stands for.
        var anchors: [String: (node: YAMLNode, count: Int)] = [:]
        var total = 0

        init(limits: Limits) { self.limits = limits }

        mutating func take(_ event: inout yaml_event_t) throws(YAMLError) {
            let line = Int(event.start_mark.line) + 1
            switch event.type {
            case YAML_DOCUMENT_START_EVENT:
                anchors = [:]
            case YAML_SCALAR_EVENT:
                let s = event.data.scalar
                let text = s.value.map { String(decoding: UnsafeBufferPointer(start: $0, count: s.length), as: UTF8.self) } ?? ""
                let node = YAMLNode(.scalar(text, plain: s.style == YAML_PLAIN_SCALAR_STYLE && s.tag == nil), line: line)
                try add(node, anchor: Self.string(s.anchor), count: 1, line: line)
            case YAML_ALIAS_EVENT:
                let name = Self.string(event.data.alias.anchor) ?? ""
                guard let named = anchors[name] else { throw YAMLError(line: line, "alias *\(name) names no anchor before it") }
                try add(YAMLNode(named.node.value, line: line), anchor: nil, count: named.count, line: line)
            case YAML_SEQUENCE_START_EVENT:
                try push(YAMLNode(.sequence([]), line: line), anchor: Self.string(event.data.sequence_start.anchor), line: line)
            case YAML_MAPPING_START_EVENT:
                try push(YAMLNode(.mapping([]), line: line), anchor: Self.string(event.data.mapping_start.anchor), line: line)
            case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                guard let done = open.popLast() else { return }
                var node = done.node
                if case .mapping(let pairs) = node.value {
                    if pairs.last?.value.line == -1 { throw YAMLError(line: line, "a mapping key without a value") }
                    node.value = .mapping(try Self.merged(pairs))
                }
                try add(node, anchor: done.anchor, count: done.count + 1, line: done.node.line, counted: true)
            default:
                break
            }
        }

        mutating func push(_ node: YAMLNode, anchor: String?, line: Int) throws(YAMLError) {
            guard open.count < limits.maxDepth else {
                throw YAMLError(line: line, "nested deeper than \(limits.maxDepth) levels")
            }
            open.append((node, anchor, 0))
        }

        /// Puts a finished node into the open collection (or makes it a document).
        mutating func add(_ node: YAMLNode, anchor: String?, count: Int, line: Int, counted: Bool = false) throws(YAMLError) {
            // A scalar counts one, an alias the nodes it stands for; a finished collection one
            // more (its own nodes were counted as they came).
            total += counted ? 1 : count
            guard total <= limits.maxNodes else {
                throw YAMLError(line: line, "aliases expand to more than \(limits.maxNodes) nodes (refused: an alias bomb?)")
            }
            if let anchor { anchors[anchor] = (node, count) }
            guard !open.isEmpty else {
                documents.append(node)
                return
            }
            let top = open.count - 1
            open[top].count += count
            switch open[top].node.value {
            case .sequence(var items):
                open[top].node.value = .sequence([])  // keep the array uniquely referenced
                items.append(node)
                open[top].node.value = .sequence(items)
            case .mapping(var pairs):
                open[top].node.value = .mapping([])
                if let last = pairs.last, last.value.line == -1 {
                    pairs[pairs.count - 1].value = node
                } else {
                    pairs.append(YAMLPair(key: node, value: YAMLNode(.scalar("", plain: true), line: -1)))
                }
                open[top].node.value = .mapping(pairs)
            case .scalar:
                break
            }
        }

        /// YAML 1.1's merge key, as PyYAML (and so urlwatch) reads it: `<<: *base` (or a list of
        /// them) adds the named mapping's keys that the mapping does not give itself.
        static func merged(_ pairs: [YAMLPair]) throws(YAMLError) -> [YAMLPair] {
            func isMerge(_ p: YAMLPair) -> Bool { if case .scalar("<<", true) = p.key.value { true } else { false } }
            guard pairs.contains(where: isMerge) else { return pairs }
            var out = pairs.filter { !isMerge($0) }
            var have = Set(out.compactMap(\.key.string))
            for p in pairs where isMerge(p) {
                let sources = p.value.sequence ?? [p.value]
                for source in sources {
                    guard let inner = source.mapping else {
                        throw YAMLError(line: source.line, "a merge key (<<) takes a mapping or a list of mappings")
                    }
                    for q in inner where q.key.string.map({ have.insert($0).inserted }) ?? true { out.append(q) }
                }
            }
            return out
        }

        static func string(_ p: UnsafeMutablePointer<yaml_char_t>?) -> String? {
            p.map { String(cString: UnsafePointer($0)) }
        }
    }
}

extension YAMLNode {
    /// A scalar's text (any style); nil for a collection.
    package var string: String? {
        if case .scalar(let s, _) = value { s } else { nil }
    }

    /// A plain `~`, `null`, `Null`, `NULL` or empty scalar.
    package var isNull: Bool {
        if case .scalar(let s, true) = value { ["", "~", "null", "Null", "NULL"].contains(s) } else { false }
    }

    /// A plain scalar YAML 1.1 reads as a boolean (as PyYAML, which urlwatch uses, does).
    package var bool: Bool? {
        guard case .scalar(let s, true) = value else { return nil }
        switch s {
        case "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON": return true
        case "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF": return false
        default: return nil
        }
    }

    /// A plain decimal integer scalar.
    package var int: Int? {
        guard case .scalar(let s, true) = value else { return nil }
        return Int(s.replacing("_", with: ""))
    }

    package var sequence: [YAMLNode]? {
        if case .sequence(let items) = value { items } else { nil }
    }

    package var mapping: [YAMLPair]? {
        if case .mapping(let pairs) = value { pairs } else { nil }
    }

    /// The value of `key` (the last, when it is given twice, as PyYAML reads it).
    package subscript(key: String) -> YAMLNode? {
        mapping?.last { $0.key.string == key }?.value
    }
}
