import FoundationEssentials
import TidingsEngine
import TidingsPluginAPI

/// Sources kept as recipes (issue 33): where daemons share a PostgreSQL state, each holds the
/// leases of a share of the sources and polls only those. Every source is still built once at
/// load (so every configuration error is found there, as before); then a source without
/// secrets keeps only its settings and its table in the compact form ``ParsedConfigCache``
/// stores, and its provider (URLs, templates, headers: most of a source's memory) is built
/// again from that table when this instance takes its lease, and dropped when it loses it.
/// Nothing is read from disk again: the running configuration stays the loaded one until a
/// reload. A source with secrets (`X_file`, `X_env`, a password in a URL) stays built, since
/// building it again would read them again.
extension ConfigLoader {
    /// The recipe of a source built from `table` (read by `reader`): the flags, the base folder
    /// if it is not `pluginsDir`, the table (``ParsedConfigCache/Writer``).
    static func recipe(table: ConfigTable, reader: OptionReader, implicitExec: String?, pluginsDir: String) -> [UInt8] {
        var w = ParsedConfigCache.Writer()
        let ownBase = reader.baseDirectory != pluginsDir
        w.bytes.append((implicitExec != nil ? 1 : 0) | (ownBase ? 2 : 0))
        if ownBase { w.string(reader.baseDirectory) }
        w.table(table)
        return w.bytes
    }

    /// `source` kept as `recipe`, which goes to `store`. Called in file order on the loading
    /// thread, once the workers have built the source: what stays (the recipe, and fresh
    /// copies of the strings the worker made: its name, its file's name) is not left among the
    /// workers' freed memory, which then goes back to the system whole (``FreeMemory``).
    static func keep(_ source: SourceConfig, recipe: [UInt8], in store: inout [UInt8]) -> SourceConfig {
        var kept = source
        kept.instance = UnbuiltProvider()
        kept.recipe = SourceRecipe(offset: UInt32(store.count), count: UInt32(recipe.count))
        store += recipe
        kept.name = String(decoding: Array(source.name.utf8), as: UTF8.self)
        kept.file = source.file
        return kept
    }
}

/// Builds sources kept as recipes as the load that kept them built them: the same loader,
/// defaults and plugins directory; `recipes` holds every recipe of the load.
struct RecipeBuilder: SourceBuilder {
    var loader: ConfigLoader
    var defaults: SourceSettings
    var pluginsDir: String
    var recipes: [UInt8]

    struct Unreadable: Error, CustomStringConvertible {
        var description: String { "its recipe is unreadable" }
    }

    func build(_ source: SourceConfig) throws -> SourceConfig {
        guard let recipe = source.recipe else { return source }
        let start = Int(recipe.offset)
        let end = start + Int(recipe.count)
        guard end <= recipes.count else { throw Unreadable() }
        var r = ParsedConfigCache.Reader(bytes: Array(recipes[start..<end]))
        let flags = try r.byte()
        let baseDir = flags & 2 != 0 ? try r.string() : pluginsDir
        let table = try r.table(file: source.file)
        guard r.atEnd else { throw Unreadable() }
        let built = loader.buildSource(
            name: source.name, table: table, baseDir: baseDir, implicitExec: flags & 1 != 0 ? "./\(source.name)" : nil, defaults: defaults,
            pluginsDir: pluginsDir)
        guard let s = built.source, built.errors.isEmpty else { throw ConfigErrors(built.errors) }
        return s
    }
}
