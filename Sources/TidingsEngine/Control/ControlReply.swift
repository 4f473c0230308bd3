import TidingsPluginAPI

/// One line of the daemon's answer. In order: `wait` lines while the polls run; for each
/// source asked for, its `event` lines and then its `result`; last `done`. Or a single
/// `error` line when the request is refused; with `"retry":true` when the daemon is busy
/// (it serves ``ControlProtocol/maxConnections`` already) and the same request may be
/// sent again later.
///
///     {"type":"wait","v":1}
///     {"event":{…the event JSON of DESIGN §4…},"type":"event","v":1}
///     {"event":{…},"silenced_by":"k3x9m0q2ta","type":"event","v":1}   (a silence kept it from the sinks)
///     {"source":"a","status":"ok","type":"result","v":1}
///     {"error":"HTTP 500 …","source":"b","status":"failed","type":"result","v":1}
///     {"type":"done","v":1}
///     {"message":"…","type":"error","v":1}
///     {"message":"…","retry":true,"type":"error","v":1}
package enum ControlReply: Sendable, Equatable {
    case waiting
    /// An event of the poll; `silencedBy`: the silence that kept it from the sinks.
    case event(Event, silencedBy: String? = nil)
    case result(source: String, outcome: SourceOutcome)
    case done
    case error(String)
    /// The daemon is busy: ask again later.
    case busy(String)

    /// How one source's poll on request went.
    package enum SourceOutcome: Sendable, Equatable {
        case ok
        case failed(String)
    }

    package func line() -> String {
        let v = JSONValue.number(Double(ControlProtocol.version))
        switch self {
        case .waiting:
            return JSONValue.object(["v": v, "type": "wait"]).jsonString()
        case .event(let e, let silence):
            // The event's own JSON line, written once by Event (keys of the envelope stay sorted).
            let silenced = silence.map { ",\"silenced_by\":\(JSONValue.string($0).jsonString())" } ?? ""
            return "{\"event\":\(e.jsonLine())\(silenced),\"type\":\"event\",\"v\":\(ControlProtocol.version)}"
        case .result(let source, .ok):
            return JSONValue.object(["v": v, "type": "result", "source": .string(source), "status": "ok"]).jsonString()
        case .result(let source, .failed(let message)):
            return JSONValue.object(["v": v, "type": "result", "source": .string(source), "status": "failed", "error": .string(message)]).jsonString()
        case .done:
            return JSONValue.object(["v": v, "type": "done"]).jsonString()
        case .error(let message):
            return JSONValue.object(["v": v, "type": "error", "message": .string(message)]).jsonString()
        case .busy(let message):
            return JSONValue.object(["v": v, "type": "error", "message": .string(message), "retry": true]).jsonString()
        }
    }

    /// Parses a reply line. Nil for a type this version does not know (skipped).
    package static func parse(_ line: String) throws(ControlProtocolError) -> ControlReply? {
        let value: JSONValue
        do { value = try JSONParser.parse(line) } catch { throw ControlProtocolError("the daemon's answer is not JSON: \(error.message)") }
        guard case .object(let o) = value, case .string(let type)? = o["type"] else {
            throw ControlProtocolError("the daemon's answer is not a reply object")
        }
        guard o["v"] == .number(Double(ControlProtocol.version)) else {
            throw ControlProtocolError(
                "the daemon speaks another control protocol version (this check speaks \(ControlProtocol.version)); run the same tidings version")
        }
        func string(_ key: String) throws(ControlProtocolError) -> String {
            guard case .string(let s)? = o[key] else { throw ControlProtocolError("a '\(type)' reply without '\(key)'") }
            return s
        }
        switch type {
        case "wait":
            return .waiting
        case "event":
            guard let event = o["event"] else { throw ControlProtocolError("an 'event' reply without 'event'") }
            do { return .event(try Event.decode(jsonLine: event.jsonString()), silencedBy: o["silenced_by"]?.stringValue) } catch {
                throw ControlProtocolError("an unreadable event from the daemon: \(error)")
            }
        case "result":
            let source = try string("source")
            switch try string("status") {
            case "ok": return .result(source: source, outcome: .ok)
            case "failed": return .result(source: source, outcome: .failed(try string("error")))
            case let other: throw ControlProtocolError("a result with status '\(other)'")
            }
        case "done":
            return .done
        case "error":
            return o["retry"] == true ? .busy(try string("message")) : .error(try string("message"))
        default:
            return nil
        }
    }
}
