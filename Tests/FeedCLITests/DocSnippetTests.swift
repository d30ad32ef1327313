import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// Every Swift code block of the DocC catalog and the README, type-checked against the built `FeedSync` module, so that no example
/// drifts from the API.
///
/// Each block is checked on its own, as the main file of a program that imports `FeedSync` and `Foundation`. A block
/// may use what the article's text or an earlier block gave it — a `service`, a database `url`, the app's own `http`
/// server —: a name from ``DocSnippetTests/context`` that the block uses and does not declare is declared before it,
/// with its type and no value (the code is checked, never run). A package manifest (`// swift-tools-version`) is
/// skipped.
// Blocks: waits for each snippet's `swiftc` child process.
@Suite(.ownThreads) struct DocSnippetTests {
    struct Snippet: Sendable, CustomTestStringConvertible {
        let file: String
        let line: Int
        let code: String

        var testDescription: String { "\(file):\(line)" }
    }

    /// What a snippet may use without declaring it: the name and its declaration.
    static let context: [(name: String, declaration: String)] = [
        ("service", "let service: FeedService = unavailable()"),
        ("bridge", "let bridge: EventBridge = unavailable()"),
        ("feed", "let feed: FeedListProjection = unavailable()"),
        ("detail", "let detail: PostDetailProjection = unavailable()"),
        ("url", "let url: String = unavailable()"),
        ("path", "let path: String = unavailable()"),
        ("source", "let source: String = unavailable()"),
        ("options", "let options: FeedOpenOptions = unavailable()"),
        ("cancellables", "var cancellables = Set<AnyCancellable>()"),
        ("http", "struct AppServer { func run() async throws {} }\nlet http = AppServer()"),
        ("log", "func log(_ event: FeedLogEvent) {}"),
        ("lastSeenSeq", "let lastSeenSeq: Int64 = unavailable()"),
        ("send", "func send(_ batch: [EventRecord]) {}"),
    ]

    static let snippets: [Snippet] =
        ["Sources/FeedSync/FeedSync.docc"].flatMap { folder in
            let names =
                (try? FileManager.default.contentsOfDirectory(atPath: DocSessionTests.root.appendingPathComponent(folder).path)) ?? []
            return names.filter { $0.hasSuffix(".md") }.sorted().flatMap { name in
                let file = "\(folder)/\(name)"
                return swiftBlocks(in: DocSessionTests.text(of: file)).map { Snippet(file: file, line: $0.line, code: $0.code) }
            }
        }
        + ["README.md"].flatMap { file in
            swiftBlocks(in: DocSessionTests.text(of: file)).map { Snippet(file: file, line: $0.line, code: $0.code) }
        }

    /// The ```swift blocks of a Markdown text and the line each starts on, manifests left out.
    static func swiftBlocks(in text: String) -> [(line: Int, code: String)] {
        var blocks: [(line: Int, code: String)] = []
        var current: (line: Int, lines: [String])?
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).enumerated() {
            if current == nil {
                if line == "```swift" { current = (index + 1, []) }
            } else if line == "```" {
                let code = current!.lines.joined(separator: "\n")
                if !code.hasPrefix("// swift-tools-version") { blocks.append((current!.line, code)) }
                current = nil
            } else {
                current!.lines.append(line)
            }
        }
        return blocks
    }

    /// The program that checks `code`: the imports, the context it uses and does not declare, then the code.
    static func program(_ code: String) -> String {
        var program = "import FeedSync\nimport Foundation\n\nfunc unavailable<T>() -> T { fatalError() }\n"
        for (name, declaration) in context where uses(code, name) && !declares(code, name) {
            program += declaration + "\n"
        }
        return program + "\n" + code + "\n"
    }

    static func uses(_ code: String, _ name: String) -> Bool {
        code.range(of: #"(?<![\w.\\])\#(name)\b"#, options: .regularExpression) != nil
    }

    static func declares(_ code: String, _ name: String) -> Bool {
        code.range(of: #"\b(let|var|func)\s+\#(name)\b"#, options: .regularExpression) != nil
    }

    @Test func theCatalogsSnippetsAreFound() {
        #expect(Self.snippets.count >= 10)
        #expect(Self.snippets.contains { $0.file.hasSuffix("GettingStarted.md") })
    }

    @Test(arguments: snippets) func everySnippetTypeChecks(_ snippet: Snippet) throws {
        let directory = TemporaryDirectory("feedsync-snippet")
        let file = directory.file("Snippet.swift")
        try Self.program(snippet.code).write(toFile: file, atomically: true, encoding: .utf8)
        let result = try SpawnedProcess.run("/usr/bin/env", ["swiftc", "-typecheck", "-module-name", "Snippet", file] + Self.flags)
        #expect(result.status == 0, "\(snippet.file) line \(snippet.line) does not compile:\n\(result.stderr)")
    }

    /// Where the built modules are: the `FeedSync` module and its dependencies, with the C modules' maps.
    static let flags: [String] = {
        let build = URL(fileURLWithPath: CLIRun.executable).deletingLastPathComponent()
        var flags = ["-I", build.appendingPathComponent("Modules").path]
        var maps = [build.appendingPathComponent("CLibPQLoader.build/module.modulemap").path]
        let sources = DocSessionTests.root.appendingPathComponent("Sources")
        for target in (try? FileManager.default.contentsOfDirectory(atPath: sources.path)) ?? [] where target.hasPrefix("C") {
            maps.append(sources.appendingPathComponent("\(target)/module.modulemap").path)
        }
        for map in maps where FileManager.default.fileExists(atPath: map) { flags += ["-Xcc", "-fmodule-map-file=\(map)"] }
        return flags + ["-Xcc", "-I/usr/include/postgresql"]
    }()
}
