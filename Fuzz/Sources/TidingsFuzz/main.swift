import Foundation
import TidingsFuzzTargets

// One libFuzzer binary for every target: FUZZ_TARGET=NAME (a key of `FuzzTargets.all`) picks it.
//
// SwiftPM links an executable target with `--defsym main=TidingsFuzz_main` (so tests could link
// it), and this module has no top-level code (`-parse-as-library`), so `TidingsFuzz_main` below
// is the program's entry; it hands over to libFuzzer's own driver (`LLVMFuzzerRunDriver`).

nonisolated(unsafe) var selected: (Data) -> Void = { _ in }

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    // libFuzzer passes a null pointer for the empty input.
    selected(start.map { count > 0 ? Data(bytes: $0, count: count) : Data() } ?? Data())
    return 0
}

@_cdecl("TidingsFuzz_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    let name = ProcessInfo.processInfo.environment["FUZZ_TARGET"] ?? ""
    guard let target = FuzzTargets.all[name] else {
        FileHandle.standardError.write(Data("set FUZZ_TARGET to one of: \(FuzzTargets.all.keys.sorted().joined(separator: ", "))\n".utf8))
        return 2
    }
    selected = target
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv, fuzzOne)
}

@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt
