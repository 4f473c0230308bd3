import Glibc

/// `value` with `digits` digits after the point, as `String(format: "%.1f", value)` wrote it
/// (C's `%.*f`: the double's exact value rounded half to even, `-0.0` as "-0.0", "inf", "nan"),
/// without corelibs Foundation's `String(format:)`.
package func decimalText(_ value: Double, digits: Int) -> String {
    var buffer = [CChar](repeating: 0, count: 64)
    let needed = withVaList([Int32(digits), value]) { vsnprintf(&buffer, buffer.count, "%.*f", $0) }
    if needed >= buffer.count {
        buffer = [CChar](repeating: 0, count: Int(needed) + 1)
        _ = withVaList([Int32(digits), value]) { vsnprintf(&buffer, buffer.count, "%.*f", $0) }
    }
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
