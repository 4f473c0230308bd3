import TidingsPluginAPI

/// A line that does not follow the control protocol.
package struct ControlProtocolError: Error, CustomStringConvertible, Sendable {
    package var description: String
    package init(_ description: String) { self.description = description }
}
