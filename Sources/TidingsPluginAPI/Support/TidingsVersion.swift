package enum TidingsVersion {
    package static let string = "0.1.0"
}
