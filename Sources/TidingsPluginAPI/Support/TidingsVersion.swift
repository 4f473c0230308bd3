public enum TidingsVersion {
    public static let string = "0.1.0"
}
