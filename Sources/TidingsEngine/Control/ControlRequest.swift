import TidingsPluginAPI

/// What a client asks the daemon, one JSON line:
/// `{"v":1,"op":"poll","sources":["a","b"]}`: poll these sources now (`sources` absent or
/// empty: every enabled source of the daemon's configuration). Each source is polled once,
/// however often it is named, in the order of its first mention.
package struct ControlRequest: Sendable, Equatable {
    package let sources: [String]

    package init(sources: [String]) { self.sources = sources.firstMentions() }

    package func line() -> String {
        let obj: JSONValue = ["v": .number(Double(ControlProtocol.version)), "op": "poll", "sources": .array(sources.map(JSONValue.string))]
        return obj.jsonString()
    }

    /// Parses a request line; the error text is what the client is told.
    package static func parse(_ line: String) throws(ControlProtocolError) -> ControlRequest {
        let value: JSONValue
        do { value = try JSONParser.parse(line) } catch { throw ControlProtocolError("a request must be one JSON object: \(error.message)") }
        guard case .object(let o) = value else { throw ControlProtocolError("a request must be one JSON object") }
        guard o["v"] == .number(Double(ControlProtocol.version)) else {
            throw ControlProtocolError("this daemon speaks control protocol version \(ControlProtocol.version)")
        }
        guard o["op"] == "poll" else { throw ControlProtocolError("unknown op (known: poll)") }
        switch o["sources"] {
        case nil, .null?:
            return ControlRequest(sources: [])
        case .array(let names)?:
            var out: [String] = []
            for n in names {
                guard case .string(let s) = n else { throw ControlProtocolError("sources must be a list of names") }
                out.append(s)
            }
            return ControlRequest(sources: out)
        default:
            throw ControlProtocolError("sources must be a list of names")
        }
    }
}
