import Foundation
import TidingsPluginAPI

/// Wall-clock time and randomness, injectable so scheduling can be tested exactly.
public protocol Environment: Sendable {
    func now() -> Date
    /// A uniform draw in [0, 1).
    func unit() -> Double
}

public struct SystemEnvironment: Environment {
    public init() {}
    public func now() -> Date { Date() }
    public func unit() -> Double { Double.random(in: 0..<1) }
}
