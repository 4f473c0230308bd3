/// `String(format: "%0*lld", width, value)` for a value ≥ 0: decimal, zero-padded to `width`.
/// (The other corelibs replacements the providers use are the plugin API's: Support/Trimmed.swift,
/// Support/PercentEncoding.swift.)
func zeroPadded(_ value: Int64, width: Int) -> String {
    let digits = String(value)
    return String(repeating: "0", count: max(0, width - digits.count)) + digits
}
