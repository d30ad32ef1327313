import FeedServer
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The live page without a browser: what `LivePage.html` is, and that `GET /` serves it.
@Suite struct LivePageTests {
    @Test func pageIsOneSmallSelfContainedDocument() {
        let html = LivePage.html
        #expect(html.hasPrefix("<!doctype html>"))
        #expect(html.utf8.count < 13 << 10, "the page is \(html.utf8.count) bytes")
        // No CDN, font, image or script from elsewhere: nothing is fetched but the server's own API.
        #expect(!html.contains("http://") && !html.contains("https://") && !html.contains("//cdn"))
        #expect(!html.contains("<link") && !html.contains(" src=") && !html.contains("@import"))
        // Post text never goes through the HTML parser.
        #expect(!html.contains("innerHTML") && !html.contains("outerHTML") && !html.contains("insertAdjacentHTML"))
        // The event stream is read with fetch and the token in a header: EventSource cannot send one, and a token never
        // goes in a URL.
        #expect(!html.contains("new EventSource") && !html.contains("token="))
        #expect(html.contains("fetch('/api/events'") && html.contains("Authorization: 'Bearer ' + S.token, 'Last-Event-ID': lastID()"))
        for testID in ["feed", "like-button", "delete-button", "back", "status", "live", "detail-count"] {
            #expect(html.contains("data-testid=\"\(testID)\""), "data-testid \(testID)")
        }
    }

    // Blocks: starts a `feedsync serve` child process and waits for it to listen.
    @Test(.ownThreads) func rootServesThePageAsHTML() async throws {
        let directory = TemporaryDirectory("feedsync-page")
        let server = try ServeProcess(database: directory.file("feed.sqlite"), home: directory.path, extra: ["--demo"])
        defer { server.stop() }
        let (data, response) = try await URLSession.shared.data(from: try #require(URL(string: server.url)))
        let http = try #require(response as? HTTPURLResponse)
        #expect(http.statusCode == 200)
        #expect(http.value(forHTTPHeaderField: "Content-Type")?.hasPrefix("text/html") == true)
        #expect(String(decoding: data, as: UTF8.self) == LivePage.html)
    }
}
